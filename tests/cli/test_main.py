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
