"""``results/layout.py``: one owner for the run folder, its marker and reading results back."""

from __future__ import annotations

import json

from servelab.results import layout
from servelab.results.runs import load_runs, read_result, run_result


def test_the_marker_is_what_makes_a_run_done(tmp_path):
    folder = layout.run_dir(tmp_path, "s", "baseline", "random", 2)
    assert folder == tmp_path / "s" / "baseline" / "random" / "2"
    layout.clear(folder)
    (folder / layout.RESULT_FILE).write_text(json.dumps({"output_throughput": 5.0, "completed": 1}))
    assert layout.read_marker(folder) is None and load_runs_or_none(tmp_path / "s") is None
    layout.write_marker(folder, {"engine": "baseline", "workload": "random", "repeat": 2, "study": "s"})
    assert layout.read_marker(folder)["result"] == layout.RESULT_FILE
    [run] = load_runs([tmp_path / "s"])
    assert (run.config, run.workload, run.repeat, run.result["output_throughput"]) == ("baseline", "random", 2, 5.0)
    assert run_result(folder)["completed"] == 1


def test_an_unreadable_marker_counts_as_not_done(tmp_path):
    (tmp_path / layout.RUN_MARKER).write_text("{cut")
    assert layout.read_marker(tmp_path) is None
    (tmp_path / layout.RUN_MARKER).write_text("[1, 2]")
    assert layout.read_marker(tmp_path) is None


def test_clear_removes_an_interrupted_attempt(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "leftover.txt").write_text("x")
    layout.clear(folder)
    assert folder.is_dir() and not any(folder.iterdir())


def test_read_result_takes_the_last_run_of_an_appended_file(tmp_path):
    path = tmp_path / "runs.txt"
    path.write_text(json.dumps({"completed": 1}) + "\n" + json.dumps({"completed": 2}) + "\n")
    assert read_result(path)["completed"] == 2


def load_runs_or_none(folder):
    from servelab.errors import InputError

    try:
        return load_runs([folder])
    except InputError:
        return None
