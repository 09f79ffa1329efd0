"""`servelab scale`'s refusals: one line, exit 2, nothing started."""

import pytest

from servelab.cli.main import main


@pytest.mark.parametrize("flags, message", [
    (["--replicas", "0"], "--replicas must be at least 1"),
    (["--workers", "2"], "scale runs one client process per replica"),
    (["--simulate"], "scale runs one client process per replica"),
    (["--ray", "--workers", "2"], "--workers does not apply"),  # Ray places replicas, not shards
    (["--ray", "10.0.0.1:6379", "--simulate"], "--simulate does not apply"),
    (["--ray", "--engine", "external", "--url", "http://127.0.0.1:9"], "an external server cannot be replicated"),
    (["--engine", "external", "--url", "http://127.0.0.1:9"], "an external server cannot be replicated"),
    (["--engine", "sim", "--repeats", "0"], "--repeats must be at least 1"),
])
def test_refused_in_one_line(flags, message, tmp_path, capsys):
    assert main(["scale", "--results", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "scale").exists()


def test_scale_says_what_ray_means_to_it_and_bench_keeps_its_own():
    import argparse

    from servelab.cli import bench, scale

    def ray_help(module) -> str:
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        return " ".join(parser.format_help().split("\n  --ray [ADDRESS]", 1)[1].split())  # its help, not usage

    assert ray_help(scale).startswith("start each replica on a node of a Ray cluster")
    assert ray_help(bench).startswith("drive the load from every node of a Ray cluster")
