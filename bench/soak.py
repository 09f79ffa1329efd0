"""A long bench at a steady, realistic rate: does anything grow but what must?

``servelab bench`` is started as a user starts it (records streamed to disk, telemetry on)
against the mock in its own process (TTFT 50 ms, ITL 10 ms, 64 tokens out, Poisson
arrivals at --rate), for --minutes. Every --every-s this script samples the client's RSS
and open file descriptors (psutil) and how many requests the mock has seen (its truth);
after the run, the schedule lag of each request (``schedule_lag_ms`` in the records file:
sent later than intended) is summarised per minute.

The bound checked (metrics/tally.py's columns, the only state a run keeps per request):
RSS may grow between the first sample after warm-up (WARM_REQUESTS) and the last sample
before the last request by at most
    seen × (75 B + 4 B × output tokens) + 4 MiB (one block of the gap pool) + 16 MiB (allocator slack),
``seen`` the requests the mock saw in between. Descriptors are flat when the last quarter's
most is within 8 of the first quarter's; lag is steady when the last minute's p99 is within
2× (+1 ms) of the first full minute's.

Usage: PYTHONPATH=src .venv/bin/python bench/soak.py [--minutes 15] [--rate 20] [--every-s 30] [-- BENCH FLAGS]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_soak import dataset_flags  # noqa: E402  (1,000 short custom prompts, oversampled)

from servelab.datasets.tokenizer import bundled_qwen3_tokenizer_path  # noqa: E402
from servelab.mock.config import MockConfig  # noqa: E402
from servelab.mock.launch import run_in_subprocess  # noqa: E402

OUTPUT_LEN = 64
PER_REQUEST_B = 75  # the tally's columns per request (metrics/tally.py)
PER_TOKEN_B = 4  # one uint32 gap per token
POOL_BLOCK_B = 4 << 20
SLACK_B = 16 << 20
# Warm-up, not counted: the client opens its pool of connections (~1,024 with no
# --max-concurrency) at the start, and each allocates its buffers on first use, so RSS
# climbs until about that many requests have gone out (seen: ~10 kB a request, flat after)
WARM_REQUESTS = 2_000


def bench_cmd(url: str, n: int, rate: float, out: Path, extra: list[str]) -> list[str]:
    flags = dataset_flags("custom", out)
    flags[flags.index("--custom-output-len") + 1] = str(OUTPUT_LEN)
    return [sys.executable, "-m", "servelab.cli.main", "bench", "--backend", "vllm", "--base-url", url,
            "--model", "mock", "--tokenizer", str(bundled_qwen3_tokenizer_path()), *flags,
            "--num-prompts", str(n), "--request-rate", str(rate), "--seed", "1", "--disable-tqdm",
            "--save-result", "--result-dir", str(out), "--result-filename", "soak.json", *extra]


def sample(proc: psutil.Process, mock, began: float) -> dict:
    return {"t_s": time.monotonic() - began, "rss_mb": proc.memory_info().rss / 2**20, "fds": proc.num_fds(),
            "seen": len(mock.truth().requests)}


def soak(minutes: float, rate: float, every_s: float, extra: list[str]) -> tuple[list[dict], dict, list[dict]]:
    """The samples, the result, and the per-minute lag summary of one run."""
    out = Path(tempfile.mkdtemp(prefix="servelab-soak-"))
    n = int(rate * minutes * 60)
    with run_in_subprocess(MockConfig(port=0, ttft_ms=50, itl_ms=10)) as mock:
        began = time.monotonic()
        child = subprocess.Popen(bench_cmd(mock.url, n, rate, out, extra), stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        proc, samples = psutil.Process(child.pid), []
        while child.poll() is None:
            try:
                samples.append(sample(proc, mock, began))
                s = samples[-1]
                print(f"  {s['t_s']:7.0f} s  RSS {s['rss_mb']:7.1f} MB  fds {s['fds']:4d}  requests seen {s['seen']:7d}",
                      flush=True)
            except psutil.NoSuchProcess:
                break
            time.sleep(every_s)
        text = child.communicate()[0]
    if child.returncode != 0:
        raise SystemExit(f"bench failed ({child.returncode}):\n{text[-2000:]}")
    result = json.loads((out / "soak.json").read_text())
    lags = per_minute_lag(Path(result["servelab"]["records_file"]))
    shutil.rmtree(out, ignore_errors=True)
    return samples, result, lags


def per_minute_lag(records: Path) -> list[dict]:
    """p50 / p99 / max schedule lag (ms) of the requests intended in each minute of the run."""
    rows = [json.loads(line) for line in records.open()]
    minute = np.array([r["intended_send_ms"] for r in rows]) // 60_000
    lag = np.array([r["schedule_lag_ms"] for r in rows])
    return [{"minute": int(m), "requests": int((minute == m).sum()),
             **{k: float(f(lag[minute == m])) for k, f in (("p50", np.median), ("p99", p99), ("max", np.max))}}
            for m in np.unique(minute)]


def p99(x: np.ndarray) -> float:
    return float(np.percentile(x, 99))


def verdicts(samples: list[dict], lags: list[dict]) -> list[str]:
    """The three checks, each a line saying what was compared."""
    last_seen = max(s["seen"] for s in samples)
    running = samples[: next(i for i, s in enumerate(samples) if s["seen"] == last_seen) + 1]
    steady = [s for s in running if s["seen"] >= WARM_REQUESTS] or running[-2:]
    first, last = steady[0], steady[-1]
    seen = last["seen"] - first["seen"]
    bound_mb = (seen * (PER_REQUEST_B + PER_TOKEN_B * OUTPUT_LEN) + POOL_BLOCK_B + SLACK_B) / 2**20
    grew = last["rss_mb"] - first["rss_mb"]
    quarter = max(1, len(steady) // 4)
    fds_early, fds_late = max(s["fds"] for s in steady[:quarter]), max(s["fds"] for s in steady[-quarter:])
    full = [m for m in lags if m["requests"] >= 0.9 * max(x["requests"] for x in lags)]
    lag0, lag1 = full[0]["p99"], full[-1]["p99"]
    return [f"memory: RSS grew {grew:.1f} MB over {seen:,} requests; bound {bound_mb:.1f} MB "
            f"({seen:,} × ({PER_REQUEST_B} + {PER_TOKEN_B} × {OUTPUT_LEN}) B + 4 + 16 MiB): "
            f"{'within' if grew <= bound_mb else 'OVER'}",
            f"descriptors: most {fds_early} in the first quarter, {fds_late} in the last: "
            f"{'flat' if fds_late <= fds_early + 8 else 'GROWING'}",
            f"schedule lag: p99 {lag0:.2f} ms in minute {full[0]['minute']}, {lag1:.2f} ms in minute "
            f"{full[-1]['minute']}: {'steady' if lag1 <= 2 * lag0 + 1 else 'GROWING'}"]


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--rate", type=float, default=20.0, help="requests per second (Poisson)")
    ap.add_argument("--every-s", type=float, default=30.0)
    ap.add_argument("bench_flags", nargs="*", help="more `servelab bench` flags (after --), e.g. -- --no-telemetry")
    args = ap.parse_args()
    print(f"soak: {args.minutes:g} min at {args.rate:g} req/s, {OUTPUT_LEN} tokens out, mock TTFT 50 ms ITL 10 ms")
    samples, result, lags = soak(args.minutes, args.rate, args.every_s, args.bench_flags)
    print(f"completed {result['completed']:,}, failed {result['failed']}")
    for m in lags:
        print(f"  minute {m['minute']:3d}: {m['requests']:6d} requests, schedule lag p50 {m['p50']:.2f} "
              f"p99 {m['p99']:.2f} max {m['max']:.2f} ms")
    lines = verdicts(samples, lags)
    print("\n".join(lines))
    return 0 if not any(w in line for line in lines for w in ("OVER", "GROWING")) else 1


if __name__ == "__main__":
    sys.exit(main())
