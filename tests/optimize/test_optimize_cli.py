"""``servelab optimize`` on the command line: --json is the file's object, stable across a
resumed rerun; bad input is one line."""

import json

import pytest

from servelab.cli.main import main

ARGS = ["optimize", "--engine", "sim", "--simulate", "--dataset-name", "random", "--random-input-len", "128",
        "--random-output-len", "32", "--num-prompts", "24", "--max-concurrency", "4", "--budget-runs", "6",
        "--no-operating-point"]


def test_json_is_the_record_and_a_rerun_replays_it(qwen3_path, tmp_path, capsys):
    argv = [*ARGS, "--results", str(tmp_path), "--name", "j", "--tokenizer", qwen3_path, "--json", "--",
            "--max-num-seqs", "2"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first == json.loads((tmp_path / "j" / "optimize.json").read_text())
    assert first["schema"] == "servelab.optimize/1" and first["engine"]["simulated"] is True
    assert first["stopped_because"] == "budget: runs" and first["budget"]["runs_used"] == 6
    assert first["steps"][0]["change"] == {"kind": "flag", "name": "--max-num-seqs", "from": "2", "to": "4",
                                           "from_source": "engine args"}
    assert main(argv) == 0
    captured = capsys.readouterr()
    again = json.loads(captured.out)
    assert "replayed as recorded" in captured.err
    assert again["baseline"] == first["baseline"] and again["steps"] == first["steps"]
    assert again["final"] == first["final"]


def test_the_text_names_each_step_the_answer_and_the_file(qwen3_path, tmp_path, capsys):
    argv = [*ARGS, "--results", str(tmp_path), "--name", "t", "--tokenizer", qwen3_path, "--", "--max-num-seqs", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "SIMULATED: servelab's vLLM V1 scheduler model; these numbers are not measured" in out
    assert "step 1 [scheduler-cap] --max-num-seqs 2 (engine args) → 4" in out
    assert "serve: servelab serve --engine sim -- --max-num-seqs " in out
    assert f"summary: {tmp_path / 't' / 'optimize.json'}" in out
    note = tmp_path / "t" / "optimize.md"  # the write-up, from the record the command left
    assert f"report: {tmp_path / 't' / 'optimize.html'} and {note}" in out
    assert "### Step 1: --max-num-seqs 2 → 4 — kept" in note.read_text()


@pytest.mark.parametrize("extra,message", [
    (["--repeats", "1"], "--repeats must be at least 2"),
    (["--budget-runs", "1"], "--budget-runs 1 cannot pay for the baseline's 2 runs"),
    (["--objective", "goodput"], "--objective goodput needs --slo"),
])
def test_bad_input_is_one_line(tmp_path, capsys, extra, message):
    assert main([*ARGS, "--results", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("servelab: error: ") and message in err and err.count("\n") == 1


def test_simulate_needs_the_sim_engine(tmp_path, capsys):
    assert main([*ARGS[:1], *ARGS[3:], "--results", str(tmp_path)]) == 2
    assert "--simulate runs the simulated engine's fast mode" in capsys.readouterr().err


@pytest.mark.parametrize("extra,message", [
    (["--alternative-model", "a,sim"], "--alternative-model sim is the model already served"),
    (["--engine", "external", "--url", "http://127.0.0.1:9", "--alternative-model", "a"],
     "--alternative-model needs an engine servelab starts"),
])
def test_alternative_model_refusals_are_one_line(tmp_path, capsys, extra, message):
    args = [a for a in ARGS if a not in ("--engine", "sim", "--simulate")] if "external" in extra else ARGS
    assert main([*args, "--results", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("servelab: error: ") and message in err and err.count("\n") == 1


def test_an_engine_that_cannot_fit_stops_before_launching(tmp_path, capsys):
    """Step 1, the check before launching: the planner says the model does not fit this machine
    (a 70B model's 131 GiB of weights on a CPU build's host memory), so optimize stops with the
    planner's one line and nothing is started or written."""
    args = [a for a in ARGS if a not in ("--engine", "sim", "--simulate")]
    argv = [*args, "--engine", "vllm", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--results", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("servelab: error: meta-llama/Llama-3.1-70B-Instruct does not fit on ")
    assert "weights 131.42 GiB" in err and err.count("\n") == 1
    assert not any(tmp_path.rglob("*")), "a run folder was written before the plan check"


def test_another_definition_under_the_same_name_is_refused(qwen3_path, tmp_path, capsys):
    """Item 6 of issue 34: a second optimize with the same --name and other flags neither replaces the
    first's record and note nor reads its runs back as its own: one line naming --name and the ways out."""
    argv = [*ARGS, "--results", str(tmp_path), "--name", "j", "--tokenizer", qwen3_path, "--", "--max-num-seqs", "2"]
    assert main(argv) == 0
    (tmp_path / "j" / "optimize.md").write_text("the first's note, as its reader left it\n")
    kept = {f: (tmp_path / "j" / f).read_text() for f in ("optimize.json", "optimize.md", "optimize.html")}
    capsys.readouterr()
    assert main([*argv[:-3], "--repeats", "3", *argv[-3:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("servelab: error: --name j: ") and err.count("\n") == 1
    assert "rerun that command to resume it, or give another --name" in err
    assert {f: (tmp_path / "j" / f).read_text() for f in kept} == kept


def test_runs_reused_within_the_definition_are_said(qwen3_path, tmp_path, capsys):
    """A rerun whose record lost its baseline (interrupted before it was written) reads the baseline's
    runs back: said on screen, listed in the step, not counted in the budget."""
    argv = [*ARGS, "--results", str(tmp_path), "--name", "j", "--tokenizer", qwen3_path, "--", "--max-num-seqs", "2"]
    assert main(argv) == 0
    path = tmp_path / "j" / "optimize.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "baseline": None, "steps": []}))
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    again = json.loads(path.read_text())
    assert again["baseline"]["reused_runs"] == record["baseline"]["result"]["runs"]
    assert f"reused 2 run(s) this optimization measured before (same definition): " in out
    assert "Reused: 2 run(s) this optimization measured before" in (tmp_path / "j" / "optimize.md").read_text()


def test_help_says_what_the_same_name_does(capsys):
    with pytest.raises(SystemExit) as done:
        main(["optimize", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "rerunning the same command (same --name, engine, workload and optimize flags) resumes it" in text
    assert "the same --name with another definition is refused" in text
