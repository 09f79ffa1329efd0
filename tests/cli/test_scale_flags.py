"""`servelab scale`'s refusals: one line, exit 2, nothing started."""

import pytest

from servelab.cli.main import main


@pytest.mark.parametrize("flags, message", [
    (["--replicas", "0"], "--replicas must be at least 1"),
    (["--workers", "2"], "scale runs one client process per replica"),
    (["--simulate"], "scale runs one client process per replica"),
    (["--ray", "--workers", "2"], "--simulate and --workers do not apply"),  # Ray places replicas, not shards
    (["--ray", "10.0.0.1:6379", "--simulate"], "--simulate and --workers do not apply"),
    (["--ray", "--engine", "external", "--url", "http://127.0.0.1:9"], "an external server cannot be replicated"),
    (["--engine", "external", "--url", "http://127.0.0.1:9"], "an external server cannot be replicated"),
    (["--engine", "sim", "--repeats", "0"], "--repeats must be at least 1"),
])
def test_refused_in_one_line(flags, message, tmp_path, capsys):
    assert main(["scale", "--results", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "scale").exists()
