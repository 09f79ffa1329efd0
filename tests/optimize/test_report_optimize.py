"""The optimize note (optimize/report.py, report_text.py, report_method.py, report_page.py) from hand-written
optimize.json files that follow the contract: a throughput run with kept, reverted and simulated
steps; a latency objective; an interrupted run with no operating point; an external engine where
only the client was tuned. (Named test_report_optimize.py: tests/cli/test_report.py holds the
basename.)"""

import json
import re
import shutil
from pathlib import Path

import pytest

from servelab.cli import main
from servelab.errors import InputError
from servelab.optimize.report import build_note, write_report
from servelab.optimize.report_text import final_result

DATA = Path(__file__).parent / "data"


def folder_of(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(DATA / f"report_{name}.json", folder / "optimize.json")
    return folder


def written(tmp_path: Path, name: str) -> tuple[str, str]:
    html, md = write_report(folder_of(tmp_path, name))
    assert (html.name, md.name) == ("optimize.html", "optimize.md")
    return md.read_text(), html.read_text()


def md_table_after(md: str, heading: str) -> list[list[str]]:
    """The first pipe table after ``heading``, as rows of cells (header first, rule dropped)."""
    lines = md[md.index(heading):].splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("|"))
    block = [x for x in lines[start:] if x.startswith("|")][:next(
        (i for i, x in enumerate(lines[start:]) if not x.startswith("|")), None)]
    rows = [[c.strip() for c in x.strip("|").split(" | ")] for x in block]
    return [rows[0], *rows[2:]]


def test_throughput_note_walks_baseline_steps_final_and_next(tmp_path):
    md, html = written(tmp_path, "throughput")
    assert ("- Output throughput 31.2 tok/s at the baseline (client concurrency 16) → 71.4 tok/s with the final "
            "configuration (client concurrency 16) (2.29×, +128.8 %) under the same workload. Latency cost: mean "
            "TPOT +150.4 % against the baseline.\n") in md  # the operating point is the final client's load
    assert ("- 4 change(s) tried after the baseline: 2 kept, 1 reverted, 1 only ranked on the simulator "
            "(SIMULATED, not measured).") in md
    assert "- Stopped because: no untried change for the verdict." in md
    assert ("- Budget: 8 of 12 measured runs (each repeat counts one), 14.2 of 30.0 minutes; 3 engine start(s); "
            "4 simulated run(s), not counted.") in md
    table = md_table_after(md, "## Steps")
    assert table[0][:3] == ["step", "verdict", "change"] and "gain (output tok/s)" in table[0]
    assert [r[0] for r in table[1:]] == ["baseline", "1", "2", "3", "4"]
    assert table[1][3:6] == ["31.2 ± 0.3", "14,800 ± 150", "60.1 ± 0.3"]  # mean ± half-range where values exist
    assert table[3][3] == "71.4"
    assert "- cells: mean ± half-range over the repeats where each repeat's value was recorded" in md
    assert [r[-1] for r in table[1:]] == ["start", "kept (better)", "kept (better)", "not measured (SIMULATED)",
                                          "reverted (within noise)"]
    assert table[1 + 1][2] == "--max-num-seqs 2 → 8" and table[1 + 1][-2] == "1.87× (+86.9 %)"
    assert table[4 + 1][2] == "VLLM_CPU_KVCACHE_SPACE=4 → 8" and table[4 + 1][-2] == "1.01× (+1.0 %)"
    assert "### Step 3: --max-num-seqs 16 → 32 — not measured — SIMULATED" in md
    assert "Predicted: 73.9 output tok/s" in md and "noise band ±10 % → not judged" in md
    assert "noise band ±10 % → within noise" in md
    assert "Why: +1.0 %, ranges overlap: reverted." in md
    assert "Configuration: engine --max-num-seqs 2; env VLLM_CPU_KVCACHE_SPACE=4; client --max-concurrency 16" in md
    assert "request_rate=inf, seed=0;" in md  # null is how JSON carries inf
    assert ("```\nVLLM_CPU_KVCACHE_SPACE=4 vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --max-num-seqs 16 "
            "--dtype float32\n```") in md
    assert "Client: --max-concurrency 16, --workers default" in md
    assert md_table_after(md, "## Final configuration")[1] == ["out tok/s", "31.2", "71.4", "2.29× (+128.8 %)"]
    points = md_table_after(md, "## Operating point")
    assert [r[0] for r in points[1:]] == ["2", "4", "8", "16", "32"]
    assert points[4][-1] == "← operating point (knee)" and all(r[-1] == "" for r in points[1:] if r[0] != "16")
    assert "servelab scale --replicas 2 --model HuggingFaceTB/SmolLM2-135M-Instruct --max-concurrency 16" in md
    assert "SIMULATED steps are predictions" in md  # a simulated step brings the simulator's error with it
    assert len(re.findall(r'<svg[^>]*class="plot"', html)) == 1 and "operating point: concurrency 16" in html
    assert '<span class="sim">SIMULATED</span>' in html and '<tr class="mark">' in html


def test_markdown_tables_paste_as_tables(tmp_path):
    md, _ = written(tmp_path, "throughput")
    blocks = re.findall(r"(?:^\|.*\|\n)+", md, flags=re.M)
    assert len(blocks) == 3  # steps, baseline vs final, operating points
    for block in blocks:
        lines = block.splitlines()
        assert re.fullmatch(r"\|(:?-+:?\|)+", lines[1]), lines[1]
        assert len({x.count(" | ") for x in lines if not x.startswith("|:") and not x.startswith("|-")}) == 1


def test_latency_objective_reports_ttft_and_the_latency_floor(tmp_path):
    md, _ = written(tmp_path, "latency")
    assert md.splitlines()[4] == ("- Mean TTFT 420 ms → 262 ms (0.62×, −37.6 %) under the same load. Why this "
                                  "objective: finite --request-rate 2 below capacity: throughput is flat, optimising "
                                  "mean TTFT.")
    assert "gain (mean TTFT)" in md_table_after(md, "## Steps")[0]
    assert "noise band ±20 % → better" in md and "noise band ±20 % → within noise" in md
    assert "--kv-cache-dtype (unset) → fp8" in md
    assert "Floor used: 20 %." in md  # the floor the loop used, as it wrote it
    assert "Budget: 9 (no limit) measured runs" in md and "21.5 of 45.0 minutes" in md
    assert md_table_after(md, "## Operating point")[0][0] == "request rate (req/s)"
    assert "SIMULATED" not in md


def test_interrupted_run_without_operating_point(tmp_path):
    md, html = written(tmp_path, "interrupted")
    assert md.startswith("# SIMULATED · Optimising Qwen/Qwen3-14B on the sim engine (cut)\n")  # the sim engine: every number is a prediction
    assert "- Stopped because: interrupted." in md
    assert "- Interrupted: this is the best verified configuration so far, not a finished answer." in md
    assert ("Not measured: the run stopped (interrupted) before the load sweep on the final configuration.") in md
    assert "No operating point: the load this configuration serves" in md
    assert "**plan check**: not run" in md and "Budget: 0 of 10 measured runs" in md
    assert ("| 1        | kv-capacity | --gpu-memory-utilization 0.8 → 0.92 (with --max-num-seqs), with "
            "--max-num-batched-tokens 2048 → 4096 |") in md  # raised together; paired with the limit it moved to
    assert "<svg" not in html and "<figure>" not in html


def test_external_engine_only_the_client_side(tmp_path):
    md, html = written(tmp_path, "external")
    assert "The engine is external (servelab cannot restart it): only the client's side" in md
    assert "The engine was not started by servelab: there is no serve line" in md
    assert "```\n\n```" not in md and '<pre class="cmd"></pre>' not in html
    assert [r[2] for r in md_table_after(md, "## Steps")[1:]] == [
        "-", "client --max-concurrency 4 → 16", "client --workers 1 → 2"]
    assert "Client: --max-concurrency 16, --workers 1" in md
    assert "external: never restarted, its configuration untouched" in md
    assert "The engine's own settings were not tried" in md
    assert "servelab scale --replicas 2 --ready-url http://10.0.0.7:8000 --max-concurrency 16" in md


def test_a_note_while_the_loop_runs(tmp_path):
    """The loop rewrites optimize.json after every step and calls write_report: from its first write
    (no baseline, no final, no stop) to a baseline with nothing verified after it."""
    folder = folder_of(tmp_path, "throughput")
    doc = json.loads((folder / "optimize.json").read_text())
    doc.update(baseline=None, steps=[], final=None, operating_point=None, next=None, stopped_because=None)
    doc["objective"]["why"] = "set after the baseline"
    (folder / "optimize.json").write_text(json.dumps(doc))
    md = write_report(folder)[1].read_text()
    assert "- No baseline finished: nothing was measured to compare with." in md
    assert "- Still running: this note is rewritten after every step; below is the answer so far." in md
    assert "No configuration has been verified yet." in md and "No scale command was recorded." in md
    assert "Not measured yet: the load sweep on the final configuration comes after the last change." in md
    baseline = json.loads((DATA / "report_throughput.json").read_text())["baseline"]
    (folder / "optimize.json").write_text(json.dumps({**doc, "baseline": baseline}))
    md = write_report(folder)[1].read_text()
    assert "- Output throughput 31.2 tok/s at the baseline (client concurrency 16); no change verified yet." in md
    assert [r[0] for r in md_table_after(md, "## Steps")[1:]] == ["baseline"]


def test_final_result_is_the_run_of_the_final_configuration():
    doc = json.loads((DATA / "report_throughput.json").read_text())
    assert final_result(doc)["mean_ttft_ms"] == 640.0  # step 2's, not step 4's (reverted) nor the baseline's
    doc["final"]["from_step"] = 1
    assert final_result(doc)["mean_ttft_ms"] == 4100.0  # the step the loop names
    del doc["final"]["from_step"]
    assert final_result(doc)["mean_ttft_ms"] == 640.0  # else the last step that ran the same configuration
    doc["final"]["client"] = {"max_concurrency": 99, "workers": None}
    assert final_result(doc) is None


def test_page_is_self_contained_and_escaped(tmp_path):
    folder = folder_of(tmp_path, "throughput")
    doc = json.loads((folder / "optimize.json").read_text())
    doc["engine"]["model"] = "<script>alert(1)</script>"
    doc["steps"][0]["diagnosis_after"]["evidence"].append("a <b>bold</b> claim")
    (folder / "optimize.json").write_text(json.dumps(doc))
    html = write_report(folder)[0].read_text()
    assert "<script" not in html and "&lt;script&gt;" in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched


@pytest.mark.parametrize("edit, message", [
    (lambda d: "not json", "unreadable"),
    (lambda d: {**d, "schema": "servelab.optimize/0"}, "schema 'servelab.optimize/0', expected 'servelab.optimize/1'"),
    (lambda d: {k: v for k, v in d.items() if k != "budget"}, "missing field 'budget'"),
    (lambda d: {**d, "steps": [{k: v for k, v in d["steps"][0].items() if k != "result"}]},
     "field 'result' is missing"),
    (lambda d: {**d, "steps": "none"}, "a field has the wrong shape"),
])
def test_bad_optimize_json_is_one_line_naming_it(tmp_path, edit, message):
    folder = folder_of(tmp_path, "throughput")
    edited = edit(json.loads((folder / "optimize.json").read_text()))
    (folder / "optimize.json").write_text(edited if isinstance(edited, str) else json.dumps(edited))
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        write_report(folder)
    assert str(folder / "optimize.json") in str(caught.value) and "\n" not in str(caught.value)


def test_servelab_report_writes_the_note_again(tmp_path, capsys):
    folder = folder_of(tmp_path, "external")
    assert main.main(["report", str(folder)]) == 0
    assert capsys.readouterr().out == f"report:   {folder / 'optimize.html'}\nmarkdown: {folder / 'optimize.md'}\n"
    (folder / "optimize.json").write_text("{}")
    assert main.main(["report", str(folder)]) == 2
    assert capsys.readouterr().err == (f"servelab: error: {folder / 'optimize.json'}: schema None, "
                                       "expected 'servelab.optimize/1'\n")


EXAMPLE = DATA / "example_optimize.json"  # the loop's own output, committed by its branch (a sim run)


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="the optimize branch's example is not merged yet")
def test_the_loops_example_renders(tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    note = build_note(doc, EXAMPLE)
    assert len(note.steps.rows) == len(doc["steps"]) + (1 if doc.get("baseline") else 0)
    (tmp_path / "optimize.json").write_text(EXAMPLE.read_text())
    md = write_report(tmp_path)[1].read_text()
    assert f"Stopped because: {doc['stopped_because']}." in md


def test_a_kept_model_change_reads_as_the_checkpoint_served(tmp_path):
    md, html = written(tmp_path, "model")
    change = "model Qwen/Qwen3-8B → Qwen/Qwen3-8B-AWQ (engine restarted)"
    rows = md_table_after(md, "## Steps")
    assert rows[3][2] == change and rows[3][-1] == "kept (better)"
    assert f"### Step 2: {change} — kept" in md
    assert "vllm serve Qwen/Qwen3-8B-AWQ --max-num-seqs 64" in md and "vllm serve Qwen/Qwen3-8B-AWQ" in html
    assert "Model: Qwen/Qwen3-8B-AWQ, served instead of Qwen/Qwen3-8B (the same requests" in md


def section(md: str, heading: str) -> str:
    start = md.index(heading)
    return md[start:md.index("\n#", start + 1)]


def test_each_step_shows_its_own_diagnosis_evidence(tmp_path):
    """Item 8 of issue 34: under a step, the evidence of its own runs, not the one it acted on."""
    md, _ = written(tmp_path, "throughput")
    step1 = section(md, "### Step 1:")
    assert "- evidence: running at 8 of max_num_seqs 8 for 90 % of the run" in step1
    assert "max_num_seqs 2" not in step1 and "Acted on: scheduler-cap, the diagnosis of the best" in step1
    assert "- evidence: running at 16 of max_num_seqs 16" in section(md, "### Step 2:")


def test_the_summary_states_the_operating_point_at_its_load(tmp_path):
    """Item 9: the final at the client's load and the operating point at its own, in the first paragraph."""
    folder = folder_of(tmp_path, "throughput")
    doc = json.loads((folder / "optimize.json").read_text())
    doc["operating_point"].update(load=32, output_tok_s=73.0)
    (folder / "optimize.json").write_text(json.dumps(doc))
    md = write_report(folder)[1].read_text()
    first = md.splitlines()[4]
    assert "→ 71.4 tok/s with the final configuration (client concurrency 16)" in first
    assert "At its operating point, concurrency 32, it measured 73.0 tok/s (2.34× the baseline)." in first


def test_no_operating_point_asked_is_said_as_asked(tmp_path):
    folder = folder_of(tmp_path, "interrupted")
    doc = json.loads((folder / "optimize.json").read_text())
    (folder / "optimize.json").write_text(json.dumps({**doc, "operating_point_skipped": "--no-operating-point"}))
    md = write_report(folder)[1].read_text()
    assert "Not measured: --no-operating-point was asked (no load ladder on the final configuration)." in md
    assert "Not measured: the run stopped" not in md and "No operating point (--no-operating-point)" in md


def test_the_default_name_is_not_the_title():
    from servelab.optimize.report import title

    doc = json.loads((DATA / "report_external.json").read_text())
    assert title({**doc, "name": "optimize"}) == "Optimising meta-llama/Llama-3.1-8B-Instruct on the external engine"
    assert title({**doc, "engine": {"kind": "command", "model": "command"}}) == "Optimising the command engine (theirs)"
