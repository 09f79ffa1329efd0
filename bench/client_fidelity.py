"""Is the client the bottleneck? servelab bench (telemetry on, as users run it, and off)
vs vllm bench serve, one run.

The mock server (which records when it received each request and wrote each
event) runs on one core; each client runs as its own process pinned to the
other, exactly as a user would start it. Printed per client:

  (a) ceiling   — output tok/s, 64 streams × 1000 tokens, no server delay
  (b) fidelity  — 512 streams, TTFT 50 ms / ITL 10 ms: error of mean and p99
                  TTFT and p99 ITL against the mock's truth, and the mean number
                  of requests open at the server over the steady window
  (c) start-up  — process launch to the first request arriving at the server
  (d) memory    — peak RSS of the client's whole process tree

Usage: .venv/bin/python bench/client_fidelity.py [--quick] [--no-vllm]
Targets (issue 2): ceiling ≥ 2× vLLM's client; mean TTFT error < 2 ms, p99 < 5 ms,
ITL p99 error < 2 ms, ≥ 500 open; start-up < 1 s; memory < 300 MB.
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

import psutil

from servelab.datasets.tokenizer import bundled_qwen3_tokenizer_path
from servelab.errors import ServelabError
from servelab.mock.config import MockConfig
from servelab.mock.launch import run_in_subprocess
from servelab.selftest.fidelity import Seen, compare

VENV_BIN = Path(sys.executable).parent


def client_cmd(which: str, url: str, n: int, conc: int, out_len: int, out_dir: Path) -> list[str]:
    common = ["--backend", "vllm", "--base-url", url, "--model", "mock", "--dataset-name", "random",
              "--random-input-len", "16", "--random-output-len", str(out_len), "--num-prompts", str(n),
              "--max-concurrency", str(conc), "--ignore-eos", "--tokenizer", str(bundled_qwen3_tokenizer_path()),
              "--request-id-prefix", f"{which}-", "--save-result", "--save-detailed",
              "--result-dir", str(out_dir), "--result-filename", f"{which}.json", "--disable-tqdm"]
    if which == "servelab":  # as users run it: telemetry on (scraping the mock's /metrics)
        return [str(VENV_BIN / "servelab"), "bench", *common]
    if which == "servelab-no-telemetry":
        return [str(VENV_BIN / "servelab"), "bench", *common, "--no-telemetry"]
    return [str(VENV_BIN / "vllm"), "bench", "serve", *common]


def peak_tree_rss(proc: subprocess.Popen, stop: threading.Event, out: list[int]) -> None:
    """Sample the RSS of the process and all its children every 20 ms."""
    try:
        root = psutil.Process(proc.pid)
    except psutil.Error:
        return
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
            out.append(sum(p.memory_info().rss for p in procs))
        except psutil.Error:
            pass
        time.sleep(0.02)


def run_client(cmd: list[str], cpu: int) -> tuple[int, int, str]:
    """Run pinned to ``cpu``; return (launch ns, peak tree RSS bytes, output)."""
    stop, samples = threading.Event(), []
    t_launch = time.perf_counter_ns()
    proc = subprocess.Popen(["taskset", "-c", str(cpu), *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    watcher = threading.Thread(target=peak_tree_rss, args=(proc, stop, samples), daemon=True)
    watcher.start()
    output, _ = proc.communicate(timeout=900)
    stop.set()
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"client failed ({proc.returncode}): {' '.join(cmd)}\n{output[-2000:]}")
    return t_launch, max(samples, default=0), output


def client_view(which: str, out_dir: Path) -> dict[str, Seen]:
    """request id -> what the tool saw, from each tool's own saved result."""
    if which.startswith("servelab"):
        view = {}
        result = json.loads((out_dir / f"{which}.json").read_text())
        t0 = result["servelab"]["t0_perf_ns"]
        for line in open(result["servelab"]["records_file"]):
            r = json.loads(line)
            if r["error"] is None:
                t = r["token_ms"]
                view[r["request_id"]] = Seen(r["ttft_ms"], [b - a for a, b in zip(t, t[1:])],
                                             t0 + round(r["sent_ms"] * 1e6), tuple(t0 + round(x * 1e6) for x in t))
        return view
    result = json.loads((out_dir / "vllm.json").read_text())
    return {f"vllm-{i}": Seen(ttft * 1e3, [g * 1e3 for g in itl], round(start * 1e9))
            for i, (ttft, itl, start) in enumerate(zip(result["ttfts"], result["itls"], result["start_times"])) if ttft}


def measure(which: str, cpus: tuple[int, int], quick: bool) -> dict:
    client_cpu, mock_cpu = cpus
    out = Path(tempfile.mkdtemp(prefix=f"fidelity-{which}-"))
    fig: dict = {"client": which}
    with run_in_subprocess(MockConfig(port=0), cpu=[mock_cpu]) as mock:
        run_client(client_cmd(which, mock.url, 64, 64, 200 if quick else 1000, out), client_cpu)
        fig["ceiling_tok_s"] = json.loads((out / f"{which}.json").read_text())["output_throughput"]
    conc = 128 if quick else 512
    with run_in_subprocess(MockConfig(ttft_ms=50, itl_ms=10, port=0), cpu=[mock_cpu]) as mock:
        t_launch, rss, _ = run_client(client_cmd(which, mock.url, 4 * conc, conc, 100, out), client_cpu)
        truth = mock.truth()
    f = compare(client_view(which, out), truth, conc)
    fig.update(fidelity=f.to_dict(), peak_rss_mb=rss / 2**20,
               startup_s=(min(r.arrived_ns for r in truth.requests) - t_launch) / 1e9)
    shutil.rmtree(out, ignore_errors=True)
    return fig


def _opt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def table(figs: list[dict]) -> str:
    rows = [("(a) ceiling, output tok/s", lambda f: f"{f['ceiling_tok_s']:,.0f}"),
            ("(b) mean TTFT error (ms)", lambda f: f"{f['fidelity']['ttft_mean_err_ms']:+.2f}"),
            ("(b) p99 TTFT error (ms)", lambda f: f"{f['fidelity']['ttft_p99_err_ms']:+.2f}"),
            ("(b) p99 ITL error (ms)", lambda f: f"{f['fidelity']['itl_p99_err_ms']:+.2f}"),
            ("(b) request delivery p99 (ms)", lambda f: _opt(f["fidelity"].get("request_delivery_p99_ms"))),
            ("(b) event delivery p99 (ms)", lambda f: _opt(f["fidelity"].get("event_delivery_p99_ms"))),
            ("(b) mock read p99 (ms, in truth)", lambda f: _opt(f["fidelity"].get("mock_read_delay_p99_ms"))),
            ("(b) open at server (mean)", lambda f: f"{f['fidelity']['server_open_mean']:.1f} / {f['fidelity']['concurrency']}"),
            ("(c) launch → first request (s)", lambda f: f"{f['startup_s']:.2f}"),
            ("(d) peak RSS, process tree (MB)", lambda f: f"{f['peak_rss_mb']:.0f}")]
    head = f"| {'figure':<32} | " + " | ".join(f"{f['client']:>21}" for f in figs) + " |"
    lines = [head, "|" + "-" * 34 + "|" + "|".join("-" * 23 for _ in figs) + "|"]
    lines += [f"| {name:<32} | " + " | ".join(f"{get(f):>21}" for f in figs) + " |" for name, get in rows]
    by = {f["client"]: f for f in figs}
    if "vllm" in by and by["vllm"]["ceiling_tok_s"]:
        lines.append(f"ceiling ratio servelab / vllm: {by['servelab']['ceiling_tok_s'] / by['vllm']['ceiling_tok_s']:.2f}×")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    ap.add_argument("--no-vllm", action="store_true", help="skip vllm bench serve")
    args = ap.parse_args()
    allowed = sorted(os.sched_getaffinity(0))
    cpus = (allowed[0], allowed[-1])
    clients = ["servelab", "servelab-no-telemetry"]
    clients += [] if args.no_vllm or not (VENV_BIN / "vllm").exists() else ["vllm"]
    try:
        figs = [measure(c, cpus, args.quick) for c in clients]
    except ServelabError as exc:  # e.g. no request matched the truth: no figure to print
        raise SystemExit(f"client_fidelity: error: {exc}") from None
    print(table(figs))
    print(json.dumps(figs, indent=1))


if __name__ == "__main__":
    main()
