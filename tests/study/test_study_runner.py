"""Running and resuming a study, on mock engines (kind command: ``servelab mock``) for speed."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from net_helpers import free_port, port_open, wait_until

from servelab.study import layout, runner, session
from servelab.study.file import RunKey, load_study


def mock_engine(name: str, port: int, *flags: str) -> str:
    argv = [sys.executable, "-m", "servelab.cli.main", "mock", "--port", str(port), *flags]
    return (f'[engines.{name}]\nkind = "command"\ncommand = {json.dumps(argv)}\nport = {port}\n'
            f'ready_url = "http://127.0.0.1:{port}/health"\n')


def study_file(tmp_path, qwen3_path, itl_ms: float = 1.0, prompts: int = 8, workloads=("w1",)) -> Path:
    port = free_port()
    text = (f'[study]\nname = "t"\nrepeats = 2\nwarmup = 1\nresults = "{tmp_path / "results"}"\n'
            + mock_engine("fast", port, "--ttft-ms", "5", "--itl-ms", str(itl_ms))
            + mock_engine("slow", port, "--ttft-ms", "20", "--itl-ms", str(2 * itl_ms), "--max-open", "2"))
    for w in workloads:
        text += (f'[workloads.{w}]\nargs = ["--dataset-name", "random", "--random-input-len", "16", '
                 f'"--random-output-len", "8", "--num-prompts", "{prompts}", "--max-concurrency", "4", '
                 f'"--no-telemetry"]\n'
                 f'tokenizer = "{qwen3_path}"\n')
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path


def markers(study) -> list[tuple[str, str, int]]:
    found = sorted(layout.study_dir(study).rglob(layout.RUN_MARKER))
    return [(m.parent.parent.parent.name, m.parent.parent.name, int(m.parent.name)) for m in found]


def counting_starts(monkeypatch) -> list[str]:
    started = []
    real = session.start_engine

    def start(spec, *args, **kwargs):
        started.append(spec.name)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(session, "start_engine", start)
    return started


def test_a_study_runs_every_pair_and_writes_its_files(tmp_path, qwen3_path, monkeypatch, capsys):
    study = load_study(study_file(tmp_path, qwen3_path))
    started = counting_starts(monkeypatch)
    outcome = runner.run_study(study)
    assert (outcome.total, outcome.done, outcome.ran, outcome.exit_code) == (4, 4, 4, 0)
    assert started == ["fast", "slow"]  # each engine once
    assert markers(study) == [("fast", "w1", 1), ("fast", "w1", 2), ("slow", "w1", 1), ("slow", "w1", 2)]
    run = layout.run_dir(*layout.study_run(study, RunKey("fast", "w1", 1)))
    for name in ("result.json", "result.records.jsonl", "console.txt", "engine.log", "memory.json", "prompts.json"):
        assert (run / name).is_file(), name
    result = json.loads((run / "result.json").read_text())
    assert result["completed"] == 8 and result["servelab"]["study"]["repeat"] == 1
    assert result["servelab"]["engine"]["name"] == "fast"
    out = capsys.readouterr().out
    assert "[study t] engine 2/2 slow · workload w1 · repeat 2/2 · 3 of 4 runs done" in out
    assert "[study t] 4 of 4 runs done" in out


def test_rerun_redoes_only_interrupted_runs_and_skips_finished_engines(tmp_path, qwen3_path, monkeypatch, capsys):
    study = load_study(study_file(tmp_path, qwen3_path))
    runner.run_study(study)
    kept = layout.run_dir(*layout.study_run(study, RunKey("slow", "w1", 1))) / "result.json"
    kept_stamp = kept.stat().st_mtime_ns
    redo = layout.run_dir(*layout.study_run(study, RunKey("slow", "w1", 2)))
    (redo / layout.RUN_MARKER).unlink()  # as if killed before the marker was written
    (redo / "leftover.txt").write_text("from the interrupted attempt")
    capsys.readouterr()
    started = counting_starts(monkeypatch)
    outcome = runner.run_study(study)
    assert (outcome.done, outcome.ran) == (4, 1)
    assert started == ["slow"]
    assert "engine fast: all 2 runs done; not started" in capsys.readouterr().out
    assert kept.stat().st_mtime_ns == kept_stamp
    assert not (redo / "leftover.txt").exists() and (redo / layout.RUN_MARKER).is_file()
    assert len(markers(study)) == 4


def test_nothing_left_to_do_starts_no_engine(tmp_path, qwen3_path, monkeypatch):
    study = load_study(study_file(tmp_path, qwen3_path))
    runner.run_study(study)
    started = counting_starts(monkeypatch)
    assert runner.run_study(study).ran == 0
    assert started == []


def test_a_changed_definition_is_not_mistaken_for_a_done_run(tmp_path, qwen3_path):
    path = study_file(tmp_path, qwen3_path)
    study = load_study(path)
    runner.run_study(study)
    path.write_text(path.read_text().replace('"--num-prompts", "8"', '"--num-prompts", "6"'))
    changed = load_study(path)
    assert {layout.status(*layout.study_run(changed, k)) for k in changed.runs()} == {"stale"}
    assert runner.run_study(changed).ran == 4
    folder = layout.run_dir(*layout.study_run(changed, RunKey("fast", "w1", 1)))
    result = json.loads((folder / "result.json").read_text())
    assert result["completed"] == 6


def test_the_marker_is_written_atomically(tmp_path):
    target = tmp_path / "run.json"
    layout.write_json_atomic(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary left behind
    assert target.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("sig, codes", [(signal.SIGINT, {130}), (signal.SIGTERM, {130, 143})])
def test_a_signal_mid_run_stops_the_engine_and_a_rerun_completes(tmp_path, qwen3_path, sig, codes):
    """Kill ``servelab study run`` during its 2nd run: no engine left, the 1st run kept,
    the 2nd redone on resume, nothing duplicated or lost. (SIGTERM: 143, or 130 when it
    lands while the bench holds the signal, which ends the run the way Ctrl-C does.)"""
    path = study_file(tmp_path, qwen3_path, itl_ms=40.0, prompts=8)  # ~1 s per run
    study = load_study(path)
    port = study.engines["fast"].spec.port
    argv = [sys.executable, "-m", "servelab.cli.main", "study", "run", str(path), "--no-report"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    second = layout.run_dir(*layout.study_run(study, RunKey("fast", "w1", 2)))
    assert wait_until(lambda: (second / "console.txt").exists(), 60), "the second run never started"
    time.sleep(0.3)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode in codes, out
    assert f"Completed runs are kept: `servelab study run {path}` resumes." in out
    assert not port_open(port)  # the engine is gone
    assert markers(study) == [("fast", "w1", 1)]
    first = (layout.run_dir(*layout.study_run(study, RunKey("fast", "w1", 1))) / "result.json").read_bytes()
    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "; 1 done before;" in resumed.stdout.splitlines()[0]
    assert markers(study) == [("fast", "w1", 1), ("fast", "w1", 2), ("slow", "w1", 1), ("slow", "w1", 2)]
    assert (layout.run_dir(*layout.study_run(study, RunKey("fast", "w1", 1))) / "result.json").read_bytes() == first
    for key in study.runs():
        result = json.loads((layout.run_dir(*layout.study_run(study, key)) / "result.json").read_text())
        assert result["completed"] == 8 and not result["servelab"]["interrupted"]


def test_an_engine_that_dies_during_a_run_is_reported_and_the_run_not_marked_done(tmp_path, qwen3_path,
                                                                                   monkeypatch, capsys):
    """Requests completed before it died: the run's result is kept but it is not a done run,
    and the study stops with the engine's last log lines (a dead engine cannot serve the rest)."""
    import psutil

    from servelab.errors import EngineError

    study = load_study(study_file(tmp_path, qwen3_path))
    port = study.engines["fast"].spec.port
    real, seen = session.execute, [0]

    def execute(args, **kwargs):
        outcome = real(args, **kwargs)
        if "context" in kwargs:  # a measured run, not the warm-up
            seen[0] += 1
            if seen[0] == 2:  # the engine dies as the 2nd run ends, after all its requests completed
                for proc in psutil.process_iter(["cmdline"]):
                    if str(port) in (proc.info["cmdline"] or []) and "mock" in proc.info["cmdline"]:
                        proc.kill()
                        proc.wait(10)
        return outcome
    monkeypatch.setattr(session, "execute", execute)
    with pytest.raises(EngineError, match="engine 'fast' died during the study"):
        runner.run_study(study)
    out = capsys.readouterr().out
    assert "the engine died during this run (8 requests had completed); the run is not marked done" in out
    assert markers(study) == [("fast", "w1", 1)]
    second = layout.run_dir(*layout.study_run(study, RunKey("fast", "w1", 2)))
    assert (second / "result.json").is_file()  # measured, kept
    assert not port_open(port)


def test_starts_restart_each_engine_and_number_repeats_across_starts(tmp_path, qwen3_path, monkeypatch, capsys):
    path = study_file(tmp_path, qwen3_path)
    path.write_text(path.read_text().replace('repeats = 2\n', 'repeats = 1\nstarts = 2\n'))
    study = load_study(path)
    assert (study.repeats, study.starts, study.total_repeats) == (1, 2, 2)
    assert [(k.engine, k.repeat, study.start_of(k)) for k in study.runs()] == [
        ("fast", 1, 1), ("fast", 2, 2), ("slow", 1, 1), ("slow", 2, 2)]
    started = counting_starts(monkeypatch)
    outcome = runner.run_study(study)
    assert outcome.exit_code == 0 and started == ["fast", "fast", "slow", "slow"]  # each engine twice
    out = capsys.readouterr().out
    assert "[study t] 4 runs (2 engines × their workloads × 1 repeats on each of 2 engine starts)" in out
    assert "[study t] engine 1/2 fast: starting (start 2/2) (1 runs to do)" in out
    assert "[study t] engine 1/2 fast · start 2/2 · workload w1 · repeat 2/2 · 1 of 4 runs done" in out
    second = json.loads((layout.run_dir(*layout.study_run(study, RunKey("fast", "w1", 2))) / "result.json").read_text())
    assert (second["servelab"]["study"]["start"], second["servelab"]["study"]["starts"]) == (2, 2)
    # a rerun resumes; nothing starts when every start's runs are done
    started.clear()
    assert runner.run_study(study).ran == 0 and started == []
