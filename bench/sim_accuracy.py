"""How well the simulator predicts a real engine: calibrate its step model on some runs
of the embedded vLLM CPU engine (SmolLM2-135M), predict runs it did not see (other
loads, another --max-num-seqs), report the errors.

    python bench/sim_accuracy.py measure OUT_DIR   # starts the engine (under the engine lock)
    python bench/sim_accuracy.py fit OUT_DIR       # calibrate + predict, prints a Markdown table

Calibration: a Nelder–Mead search over (overhead, per-seq, per-token) step costs in ms,
minimizing the mean squared log-error of output throughput, median TPOT and mean TTFT
over the calibration runs, each predicted by ``servelab bench --simulate`` on the same
workload flags and the engine's own KV size and block size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import math
import sys
from pathlib import Path

from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import execute

# (name, engine --max-num-seqs or None for the default, concurrency, prompts, used for calibration)
RUNS = (
    ("c1", None, 1, 8, True),
    ("c8", None, 8, 32, True),
    ("c32", None, 32, 64, True),
    ("c4", None, 4, 16, False),
    ("c16", None, 16, 48, False),
    ("seqs4-c16", 4, 16, 32, False),
)
WORKLOAD = ["--dataset-name", "random", "--random-input-len", "128", "--random-output-len", "64",
            "--seed", "0", "--disable-tqdm", "--no-telemetry"]
KEYS = (("output_throughput", "output tok/s"), ("median_tpot_ms", "median TPOT ms"), ("mean_ttft_ms", "mean TTFT ms"))
CPU_DEFAULT_SEQS = 128  # vLLM's CPU default (design notes); the engine is started without the flag


def workload(conc: int, n: int) -> list[str]:
    return [*WORKLOAD, "--max-concurrency", str(conc), "--num-prompts", str(n)]


def measure(out: Path) -> None:
    from servelab.engines import embedded_engine_spec, start_engine

    out.mkdir(parents=True, exist_ok=True)
    with open("/tmp/servelab-engine.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for seqs in dict.fromkeys(r[1] for r in RUNS):
            spec = embedded_engine_spec(port=8391)
            if seqs is not None:
                spec = dataclasses.replace(spec, args=(*spec.args, "--max-num-seqs", str(seqs)))
            with start_engine(spec, out / f"engine-{seqs}") as engine:
                mr = engine.memory_report
                (out / "engine.json").write_text(json.dumps({"kv_tokens": mr.kv_cache_tokens,
                                                             "block_size": mr.block_size, "model": engine.model}))
                for name, s, conc, n, _ in RUNS:
                    if s == seqs:
                        argv = ["--base-url", engine.base_url, "--model", engine.model, *workload(conc, n),
                                "--save-result", "--result-dir", str(out), "--result-filename", f"{name}.json"]
                        execute(parse_bench_spec(argv))


def _cache_dataset() -> None:
    """Calibration replays the same few workloads hundreds of times: tokenizer and samples
    are prepared once each (they are the same for every step model)."""
    import functools

    from servelab.study import bench

    bench.load_tokenizer = functools.lru_cache(bench.load_tokenizer)
    bench.sample_requests = functools.lru_cache(bench.sample_requests)


def predict(out: Path, params: tuple[float, float, float], name: str, seqs, conc: int, n: int) -> dict:
    eng = json.loads((out / "engine.json").read_text())
    overhead, per_seq, per_token = params
    argv = ["--simulate", "--tokenizer", eng["model"], *workload(conc, n),
            "--sim-max-num-seqs", str(seqs or CPU_DEFAULT_SEQS), "--sim-max-num-batched-tokens", "2048",
            "--sim-kv-cache-tokens", str(eng["kv_tokens"]), "--sim-block-size", str(eng["block_size"] or 128),
            "--sim-step-overhead-ms", str(overhead), "--sim-step-per-seq-ms", str(per_seq),
            "--sim-step-per-token-ms", str(per_token)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return execute(parse_bench_spec(argv)).result


def loss(out: Path, params, runs) -> float:
    if min(params) < 0:
        return 1e9
    total = 0.0
    for name, seqs, conc, n, _ in runs:
        measured = json.loads((out / f"{name}.json").read_text())
        predicted = predict(out, params, name, seqs, conc, n)
        total += sum(math.log(predicted[k] / measured[k]) ** 2 for k, _ in KEYS)
    return total / len(runs)


def nelder_mead(f, x0, step, iters=60):
    """A plain Nelder–Mead (no scipy here); enough for three smooth parameters."""
    pts = [list(x0)] + [[x + (step[i] if i == j else 0) for j, x in enumerate(x0)] for i in range(len(x0))]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(len(pts)), key=vals.__getitem__)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centroid = [sum(p[j] for p in pts[:-1]) / (len(pts) - 1) for j in range(len(x0))]
        refl = [c + (c - w) for c, w in zip(centroid, pts[-1])]
        fr = f(refl)
        if fr < vals[0]:
            exp = [c + 2 * (c - w) for c, w in zip(centroid, pts[-1])]
            fe = f(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [c + 0.5 * (w - c) for c, w in zip(centroid, pts[-1])]
            fc = f(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                pts = [pts[0]] + [[b + 0.5 * (p - b) for b, p in zip(pts[0], q)] for q in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    best = min(range(len(pts)), key=vals.__getitem__)
    return pts[best], vals[best]


def fit(out: Path) -> None:
    _cache_dataset()
    calib = [r for r in RUNS if r[4]]
    params, err = nelder_mead(lambda p: loss(out, p, calib), (20.0, 0.5, 0.05), (10.0, 0.5, 0.05))
    (out / "step_model.json").write_text(json.dumps({
        "overhead_s": params[0] / 1e3, "per_seq_s": params[1] / 1e3, "per_token_s": params[2] / 1e3,
        "source": "calibrated on the embedded vLLM CPU engine (bench/sim_accuracy.py)"}, indent=1))
    print(f"step model: overhead {params[0]:.3f} ms, per seq {params[1]:.4f} ms, per token {params[2]:.5f} ms "
          f"(calibration loss {err:.4f})\n")
    print("| run | used for | " + " | ".join(f"{label} measured / simulated / error" for _, label in KEYS) + " |")
    print("|---|---|" + "---|" * len(KEYS))
    for name, seqs, conc, n, cal in RUNS:
        m = json.loads((out / f"{name}.json").read_text())
        p = predict(out, params, name, seqs, conc, n)
        cells = [f"{m[k]:.1f} / {p[k]:.1f} / {100 * (p[k] - m[k]) / m[k]:+.0f} %" for k, _ in KEYS]
        print(f"| {name} | {'calibration' if cal else 'prediction'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    {"measure": measure, "fit": fit}[sys.argv[1]](Path(sys.argv[2]))
