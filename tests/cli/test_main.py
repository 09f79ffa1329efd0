"""The entry point: a bad flag is one line naming it, exit 2 — not a screen of usage."""

import pytest

from servelab.cli import main


@pytest.mark.parametrize("argv, says", [
    (["serve", "--engine", "tgi"], "servelab serve: error: argument --engine: invalid choice: 'tgi'"),
    (["bench", "--num-prompts", "x"], "servelab bench: error: argument --num-prompts: invalid int value: 'x'"),
    (["study", "runn", "x.toml"], "servelab study: error: argument ACTION: invalid choice: 'runn'"),
    (["nope"], "servelab: error: argument COMMAND: invalid choice: 'nope'"),
])
def test_a_bad_flag_is_one_line_naming_it(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main.main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and err.startswith(says) and err.rstrip().endswith("--help)")


@pytest.mark.parametrize("command", ["sweep", "tune", "scale"])
def test_help_shows_the_commands_own_options_first_and_benchs_under_one_heading(command, capsys):
    """Issue 19 item 14: ~460 lines of --help with the command's own options last."""
    with pytest.raises(SystemExit):
        main.main([command, "--help"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"usage: servelab {command} [{command.upper()} OPTIONS] [BENCH WORKLOAD FLAGS] [-- ENGINE ARGS]"
    own = lines.index(f"{command}:")
    heading = next(i for i, line in enumerate(lines) if line.startswith("bench workload flags — `servelab bench`'s"))
    assert own < 6 and own < lines.index("results:") < heading < lines.index("dataset options:")
    assert lines.index("engine (default: the embedded vLLM CPU engine):") < heading


def test_tunes_loads_help_promises_no_ladder(capsys):
    with pytest.raises(SystemExit):
        main.main(["tune", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "the loads each config is measured at (default: the one load the workload's" in out
    assert "geometric ladder" not in out
