"""Issue 34 item 4: a run killed hard left its telemetry in the system's temp folder, `results
recover` did not bring it back, and `diagnose` then judged on no evidence. The scraper's file now
lies beside the run's records, the sidecar names it, and recovery rebuilds the timeline from it
(the client's view from the records); with no samples at all, diagnose says it cannot judge."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from net_helpers import wait_until

from servelab.cli.main import main
from servelab.results import records_file

DEAD_PID = 2**22 + 12345  # beyond pid_max's default: no process has it
T0 = 10**12  # the killed run's t0 on the perf_counter clock
SCRAPE = ".servelab-k1.scrape.jsonl"


def killed_run(folder: Path, n: int = 40, scrape: bool = True) -> None:
    """What a run killed after ``n`` requests leaves: its records part, its sidecar (naming the scrape
    file) and the scraper's file — the engine at max_num_seqs 2 with 6 waiting, every 0.25 s."""
    part = folder / ".servelab-k1.records.jsonl.part"
    part.write_text("".join(json.dumps(
        {"request_id": f"r{i}", "prompt_len": 4, "expected_output_len": 2, "intended_send_ms": 0.0,
         "dispatched_ms": 0.0, "sent_ms": 250.0 * (i // 2), "done_ms": 250.0 * (i // 2 + 1),
         "token_ms": [250.0 * (i // 2) + 100, 250.0 * (i // 2 + 1)], "token_counts": [1, 1], "output_tokens": 2,
         "error": None, "http_status": 200, "finished": True}) + "\n" for i in range(n)))
    header = {"servelab_records": 1, "pid": DEAD_PID, "requests_meant": 100, "wall_start": 1.7e9, "t0_perf_ns": T0,
              "servelab_version": "t", "argv": [], "saved": True, "append": False,
              "head": {"date": "", "backend": "vllm", "model_id": "m", "num_prompts": 100, "max_concurrency": 8},
              "result_file": {"label": None, "backend": "vllm", "request_rate": "inf", "max_concurrency": 8,
                              "model_id": "m", "result_filename": "r.json", "ramp": None},
              "percentile_metrics": ["ttft"], "metric_percentiles": [99.0], "goodput": {},
              "telemetry": {"scrape_file": SCRAPE, "interval_s": 0.25, "metrics_url": "http://127.0.0.1:1/metrics"}}
    records_file.sidecar_of(part).write_text(json.dumps(header))
    if scrape:
        lines = [{"src": "meta", "t_ns": T0 - 10**9, "gpu": {"status": "NVML unavailable (test)"}},
                 {"src": "engine-meta", "t_ns": T0 - 10**9, "names": {"running": "vllm:num_requests_running"},
                  "cache_config": {}}]
        lines += [{"src": "engine", "t_ns": T0 + k * 250_000_000 + 1000, "running": 2.0, "waiting": 6.0,
                   "kv_usage": 0.05} for k in range(n // 2)]
        (folder / SCRAPE).write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"src": "eng')  # a cut last line


def test_recover_rebuilds_the_timeline_and_diagnose_judges_by_it(tmp_path, capsys):
    killed_run(tmp_path)
    assert main(["results", "recover", str(tmp_path)]) == 0
    assert "timeline in " in capsys.readouterr().out
    (result_path,) = tmp_path.glob("*.json")
    result = json.loads(result_path.read_text())
    timeline = Path(result["servelab"]["telemetry"]["timeline_file"])
    assert timeline.is_file() and timeline.parent == tmp_path and not (tmp_path / SCRAPE).exists()
    assert result["servelab"]["telemetry"]["samples"]["engine"] == 20
    assert main(["diagnose", str(result_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] == "scheduler-cap" and d["timeline"] == str(timeline)  # running 2, 6 waiting
    # the client's view from the records: 2 in flight at a time, the rest dispatched at t0 and waiting
    assert d["checked"][0].startswith("client in flight mean 1.9, max 2 (cap 8), waiting for a slot")


def test_a_killed_run_without_telemetry_is_not_judged(tmp_path, capsys):
    killed_run(tmp_path, scrape=False)
    assert main(["results", "recover", str(tmp_path)]) == 0
    (result_path,) = tmp_path.glob("*.json")
    capsys.readouterr()
    assert main(["diagnose", str(result_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("servelab diagnosis: not-judged") and "Cannot judge" in out
    assert "raise the offered load" not in out and "no-limit-found" not in out


def test_a_sigkilled_bench_leaves_its_scrape_file_beside_its_records(mock_server, qwen3_path, tmp_path):
    mock = mock_server(output_len=4)
    cmd = [sys.executable, "-m", "servelab.cli.main", "bench", "--backend", "vllm", "--base-url", mock.url,
           "--model", "mock", "--tokenizer", qwen3_path, "--dataset-name", "random", "--random-input-len", "8",
           "--random-output-len", "4", "--num-prompts", "5000", "--request-rate", "50", "--max-concurrency", "8",
           "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        def ready() -> bool:  # some records flushed, and the scraper sampling beside them
            parts, scrapes = list(tmp_path.glob(".servelab-*.records.jsonl.part")), list(tmp_path.glob(SCRAPE_GLOB))
            return bool(parts and scrapes and parts[0].stat().st_size > 150 * 400
                        and scrapes[0].read_text().count('"src": "engine"') >= 8)
        assert wait_until(lambda: ready() or proc.poll() is not None, 120) and proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert wait_until(lambda: _scraper_gone(tmp_path), 30)  # it stops when its parent's pipe closes
    assert main(["results", "recover", str(tmp_path)]) == 0
    (result_path,) = tmp_path.glob("*.json")
    timeline = json.loads(result_path.read_text())["servelab"]["telemetry"]
    assert timeline["samples"]["engine"] >= 4 and Path(timeline["timeline_file"]).is_file()
    assert not list(tmp_path.glob(SCRAPE_GLOB))


SCRAPE_GLOB = ".servelab-*.scrape.jsonl"


def _scraper_gone(folder: Path) -> bool:
    """No scraper process still writes into ``folder`` (its command line names the file)."""
    out = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True).stdout.split()
    time.sleep(0.1)
    return not [p for p in out if int(p) != os.getpid()]
