"""What one GPU reaches with torch alone, printed beside the planner's step model.

Issue 21: ground the speed model where a GPU is lent; the corpus of published vLLM runs stays the truth.

``measure`` (needs CUDA) times, on the GPU it runs on:
- memory: a copy and a read-only sum of a 4 GiB bf16 tensor (bytes moved / time);
- decode: every linear layer of a dense model's decode step (QKV, O, gate+up, down per layer, then
  the LM head) for M tokens, weights laid out per layer so nothing is reused from L2, captured in
  one CUDA graph (kernels only, as vLLM replays them) and also run eagerly (the launch cost that
  ``--enforce-eager`` pays); bytes are the GEMMs' weights, FLOPs 2 x M x weights;
- prefill: the same stack at 2048 and 8192 tokens (dense bf16 tensor throughput);
- fp8: ``torch._scaled_mm`` on the 8B model's gate+up shape (per-tensor scales), where torch has it;
- attention in decode: ``scaled_dot_product_attention`` of one query token against a KV cache
  (bytes of K and V read / time);
- moe (``--only moe`` runs this alone): Qwen3-30B-A3B's decode step at one token three ways, in one
  CUDA graph each: the dense step the planner assumes (the 8 routed experts' weights read by plain
  GEMMs, one [8 x 1536, 2048] and one [2048, 8 x 768] per layer); the routed experts read by a grouped
  GEMV (our own Triton kernel: one program per expert and block of outputs, the experts chosen on
  the GPU, nothing synchronised with the host, as a fused-MoE kernel runs at one token); and the
  same plus the router and the kernels routing adds (router GEMM, softmax, top-k, renormalising,
  the expert ids, the weighted sum; unfused torch ops). Not vLLM's kernels: what one reasonable
  implementation reaches (``--quick``: 16 experts, a 4,096-token vocabulary, 2 layers);
- energy: servelab's own NVML sampler (``telemetry.gpu``) at 10 Hz over a 10 s matmul load, the
  joules from the total-energy counter against the power samples integrated
  (``metrics.energy.cumulative_j``): the two sources a result's energy section names.
It writes one JSON (``--out``) with the GPU's name, clocks, driver and torch version.

``report FILE`` (anywhere) prints the figures beside the planner's datasheet peak and its fitted
efficiency for the GPU's family (``planner/data/fitted.json``), and the planner's predicted decode step
without its fixed costs (weights and FLOPs only) beside the measured kernels.

Usage:
  python3 bench/gpu_roofline.py measure --out roofline.json      (on a CUDA machine)
  python3 bench/gpu_roofline.py measure --quick --device cpu      (a logic check on tiny shapes)
  .venv/bin/python bench/gpu_roofline.py report bench/measured/h200-roofline-2026-12-04.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import threading
import time
from dataclasses import replace

DECODE_TOKENS = [1, 8, 32, 64, 128, 256, 512]
PREFILL_TOKENS = [2048, 8192]
DENSE = ["Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B"]
MOE = "Qwen/Qwen3-30B-A3B"
SECTIONS = ("memory", "attention", "fp8", "decode", "moe", "energy")


class Timer:
    """Seconds per call of fn: CUDA events over ``reps`` calls after ``warm`` calls (CPU: perf_counter)."""

    def __init__(self, torch, device: str) -> None:
        self.torch, self.cuda = torch, device == "cuda"

    def __call__(self, fn, reps: int = 10, warm: int = 3) -> float:
        for _ in range(warm):
            fn()
        if not self.cuda:
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            return (time.perf_counter() - start) / reps
        t = self.torch
        t.cuda.synchronize()
        begin, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1000 / reps


def memory_bandwidth(torch, timer, device: str, gib: float) -> dict:
    n = int(gib * 2**30) // 2
    x = torch.randn(n, dtype=torch.bfloat16, device=device)
    y = torch.empty_like(x)
    copy_s = timer(lambda: y.copy_(x))
    sum_s = timer(lambda: x.sum(dtype=torch.float32))
    out = {"bytes": 2 * n, "copy_gbs": 2 * 2 * n / copy_s / 1e9, "read_gbs": 2 * n / sum_s / 1e9}
    del x, y
    return out


def stack(torch, model, device: str, dtype) -> list:
    from servelab.planner.corpus.roofline import linear_shapes

    return [torch.randn(o, i, dtype=dtype, device=device) * 0.02 for o, i in linear_shapes(model)]


def run_stack(torch, weights, x_by_width):
    """Every linear layer once on the M-token input of its width (outputs are discarded: the
    step's data flow does not change the GEMMs' cost)."""
    f = torch.nn.functional.linear
    for w in weights:
        f(x_by_width[w.shape[1]], w)


def decode_stack(torch, timer, model, device: str, tokens: list[int], graphs: bool) -> list[dict]:
    dtype = torch.bfloat16
    weights = stack(torch, model, device, dtype)
    weight_bytes = sum(w.numel() for w in weights) * 2
    flops_per_token = 2 * sum(w.numel() for w in weights)
    rows = []
    for m in tokens:
        widths = {w.shape[1] for w in weights}
        xs = {k: torch.randn(m, k, dtype=dtype, device=device) for k in widths}
        reps = 3 if m >= 2048 else 10
        eager_s = timer(lambda: run_stack(torch, weights, xs), reps=reps)
        row = {"tokens": m, "eager_s": eager_s, "weight_bytes": weight_bytes, "flops": flops_per_token * m}
        if graphs:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                run_stack(torch, weights, xs)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run_stack(torch, weights, xs)
            row["graph_s"] = timer(graph.replay, reps=reps)
            del graph
        kernels = row.get("graph_s", eager_s)
        row["weight_gbs"] = weight_bytes / kernels / 1e9
        row["tflops"] = flops_per_token * m / kernels / 1e12
        rows.append(row)
        print(f"  {model.name} M={m}: graph {row.get('graph_s', float('nan')) * 1e3:.3f} ms, "
              f"eager {eager_s * 1e3:.3f} ms, {row['weight_gbs']:.0f} GB/s, {row['tflops']:.1f} TFLOP/s", flush=True)
        del xs
    del weights
    if device == "cuda":
        torch.cuda.empty_cache()
    return rows


def expert_gemv_kernel():
    """Our grouped GEMV for one token per (token, expert) pair: y[pair] = W[expert of pair] @ x[row of
    pair], each program one block of outputs of one pair, the expert id read on the GPU."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, w_ptr, ids_ptr, y_ptr, N, K, x_div, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pair = tl.program_id(0)
        offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        expert = tl.load(ids_ptr + pair).to(tl.int64)
        w_base = w_ptr + expert * N * K
        x_base = x_ptr + (pair // x_div) * K
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            offs_k = k0 + tl.arange(0, BLOCK_K)
            xv = tl.load(x_base + offs_k).to(tl.float32)
            w = tl.load(w_base + offs_n[:, None] * K + offs_k[None, :]).to(tl.float32)
            acc += tl.sum(w * xv[None, :], axis=1)
        tl.store(y_ptr + pair * N + offs_n, acc.to(tl.bfloat16))

    return kernel


class ExpertGemv:
    """y[pairs, N] from x[rows, K] and w[experts, N, K] at ids[pairs], pair p reading row p // x_div:
    our Triton kernel on CUDA; elsewhere a gather and a batched product (the logic check). The
    reference, a plain loop over pairs, is what both are checked against."""

    def __init__(self, torch, device: str, block_n: int = 16, block_k: int = 256) -> None:
        self.torch, self.block_n, self.block_k = torch, block_n, block_k
        self.kernel = expert_gemv_kernel() if device == "cuda" else None

    def fits(self, n: int, k: int) -> bool:
        """The kernel reads whole tiles (no masks): the tile must divide the matrix."""
        return n % self.block_n == 0 and k % self.block_k == 0

    def __call__(self, x, w, ids, y, x_div: int) -> None:
        n, k = w.shape[1], w.shape[2]
        if self.kernel is None:
            rows = x[self.torch.arange(ids.numel(), device=x.device) // x_div]
            y.copy_(self.torch.bmm(w[ids.long()], rows.unsqueeze(-1)).squeeze(-1))
            return
        if not self.fits(n, k):
            raise ValueError(f"tile {self.block_n}x{self.block_k} does not divide {n}x{k}")
        self.kernel[(ids.numel(), n // self.block_n)](x, w, ids, y, n, k, x_div,
                                                       BLOCK_N=self.block_n, BLOCK_K=self.block_k)


def reference_gemv(x, w, ids, x_div: int):
    """The loop ExpertGemv is checked against: one matrix-vector product per pair."""
    return [w[int(ids[pair])] @ x[pair // x_div] for pair in range(ids.numel())]


def relative_error(y, reference) -> float:
    worst = max(float((row.float() - ref.float()).abs().max()) for row, ref in zip(y, reference))
    return worst / max(float(ref.float().abs().max()) for ref in reference)


def moe_decode(torch, timer, model, device: str, quick: bool) -> dict:
    """The MoE model's decode step at one token, three ways (module docstring); seconds per step."""
    f = torch.nn.functional
    dtype = torch.bfloat16
    if quick:
        model = replace(model, experts=16, vocab=4096)
    layers = 2 if quick else model.layers
    experts, top, inter, hidden = model.experts, model.active_experts, model.moe_intermediate, model.hidden
    q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim

    def randn(*shape):
        return torch.randn(*shape, dtype=dtype, device=device) * 0.02

    attn = [(randn(q + 2 * kv, hidden), randn(hidden, q)) for _ in range(layers)]
    router = [randn(experts, hidden) for _ in range(layers)]
    w_gu = [randn(experts, 2 * inter, hidden) for _ in range(layers)]
    w_d = [randn(experts, hidden, inter) for _ in range(layers)]
    dense = [(randn(top * 2 * inter, hidden), randn(hidden, top * inter)) for _ in range(layers)]
    head = randn(model.vocab, hidden)
    x = torch.randn(1, hidden, dtype=dtype, device=device)
    xq = torch.randn(1, q, dtype=dtype, device=device)
    xi = torch.randn(1, top * inter, dtype=dtype, device=device)
    ids = torch.randperm(experts, device=device)[:top].to(torch.int32)
    y_gu = torch.empty(top, 2 * inter, dtype=dtype, device=device)
    y_d = torch.empty(top, hidden, dtype=dtype, device=device)
    gemv = ExpertGemv(torch, device)
    h = torch.randn(top, inter, dtype=dtype, device=device)

    def check() -> float:
        """Both projections of the first layer against the reference loop, with the tile in use."""
        gemv(x, w_gu[0], ids, y_gu, top)
        gemv(h, w_d[0], ids, y_d, 1)
        return max(relative_error(y_gu, reference_gemv(x, w_gu[0], ids, top)),
                   relative_error(y_d, reference_gemv(h, w_d[0], ids, 1)))

    def attention_and_head(i):
        f.linear(x, attn[i][0])
        f.linear(xq, attn[i][1])

    def planner_step():
        for i in range(layers):
            attention_and_head(i)
            f.linear(x, dense[i][0])
            f.linear(xi, dense[i][1])
        f.linear(x, head)

    def grouped_step():
        for i in range(layers):
            attention_and_head(i)
            gemv(x, w_gu[i], ids, y_gu, top)
            gemv(f.silu(y_gu[:, :inter]) * y_gu[:, inter:], w_d[i], ids, y_d, 1)
        f.linear(x, head)

    def routed_step():
        for i in range(layers):
            attention_and_head(i)
            logits = f.linear(x, router[i])
            weights, chosen = torch.topk(torch.softmax(logits.float(), dim=-1), top, dim=-1)
            weights = weights / weights.sum(dim=-1, keepdim=True)
            gemv(x, w_gu[i], chosen.view(-1).to(torch.int32), y_gu, top)
            gemv(f.silu(y_gu[:, :inter]) * y_gu[:, inter:], w_d[i], chosen.view(-1).to(torch.int32), y_d, 1)
            (y_d.float() * weights.view(-1, 1)).sum(dim=0)
        f.linear(x, head)

    def timed(fn) -> float:
        if device != "cuda":
            return timer(fn, reps=1, warm=0)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return timer(graph.replay, reps=20)

    bytes_attention = 2 * (layers * (attn[0][0].numel() + attn[0][1].numel()) + head.numel())
    bytes_experts = 2 * layers * (dense[0][0].numel() + dense[0][1].numel())
    out = {"model": model.name, "layers": layers, "experts": experts, "tokens": 1,
           "weight_bytes": bytes_attention + bytes_experts, "expert_bytes": bytes_experts,
           "block_n": gemv.block_n, "block_k": gemv.block_k}
    if device == "cuda":  # the kernel's best tile for this shape, on every layer's gate+up
        tiles = {}
        for bn in (8, 16, 32, 64):
            for bk in (128, 256, 512):
                gemv.block_n, gemv.block_k = bn, bk
                if not (gemv.fits(2 * inter, hidden) and gemv.fits(hidden, inter)):
                    continue
                tiles[f"{bn}x{bk}"] = timer(lambda: [gemv(x, w_gu[i], ids, y_gu, top) for i in range(layers)], reps=5)
        best = min(tiles, key=tiles.get)
        gemv.block_n, gemv.block_k = (int(v) for v in best.split("x"))
        out["tiles_s"] = tiles
    out.update(block_n=gemv.block_n, block_k=gemv.block_k, kernel_vs_reference=check())
    out["planner_s"] = timed(planner_step)
    out["grouped_s"] = timed(grouped_step)
    out["routed_s"] = timed(routed_step)
    print(f"  {model.name} one token: planner's dense step {out['planner_s'] * 1e3:.3f} ms, grouped experts "
          f"{out['grouped_s'] * 1e3:.3f} ms, with routing {out['routed_s'] * 1e3:.3f} ms "
          f"(kernel vs reference {out['kernel_vs_reference']:.1e}; tile {gemv.block_n}x{gemv.block_k})", flush=True)
    del attn, router, w_gu, w_d, dense, head
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def fp8_gemm(torch, timer, device: str) -> list[dict]:
    """bf16 against fp8 (e4m3, per-tensor scales) on Qwen3-8B's gate+up: 24576 x 4096."""
    if device != "cuda" or not hasattr(torch, "_scaled_mm"):
        return []
    n, k = 24576, 4096
    out = []
    w16 = torch.randn(n, k, dtype=torch.bfloat16, device=device) * 0.02
    w8 = (w16 * 50).to(torch.float8_e4m3fn)
    one = torch.ones((), dtype=torch.float32, device=device)
    for m in [16, 64, 256, 2048, 8192]:
        x16 = torch.randn(m, k, dtype=torch.bfloat16, device=device)
        x8 = x16.to(torch.float8_e4m3fn)
        bf16_s = timer(lambda: torch.nn.functional.linear(x16, w16), reps=20)
        try:
            fp8_s = timer(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one,
                                                   out_dtype=torch.bfloat16), reps=20)
        except (RuntimeError, TypeError) as exc:
            out.append({"tokens": m, "error": str(exc).splitlines()[0][:200]})
            continue
        out.append({"tokens": m, "bf16_s": bf16_s, "fp8_s": fp8_s, "flops": 2 * m * n * k,
                    "bf16_tflops": 2 * m * n * k / bf16_s / 1e12, "fp8_tflops": 2 * m * n * k / fp8_s / 1e12,
                    "bf16_weight_gbs": 2 * n * k / bf16_s / 1e9, "fp8_weight_gbs": n * k / fp8_s / 1e9})
        print(f"  fp8 M={m}: bf16 {bf16_s * 1e6:.1f} us, fp8 {fp8_s * 1e6:.1f} us", flush=True)
    return out


def attention_decode(torch, timer, device: str, quick: bool) -> list[dict]:
    """One query token per request against a bf16 KV cache, Qwen3-8B's 32 query and 8 KV heads of 128."""
    f = torch.nn.functional.scaled_dot_product_attention
    out = []
    cases = [(4, 256)] if quick else [(1, 4096), (32, 1024), (32, 4096), (128, 2048)]
    for batch, context in cases:
        q = torch.randn(batch, 32, 1, 128, dtype=torch.bfloat16, device=device)
        k = torch.randn(batch, 8, context, 128, dtype=torch.bfloat16, device=device)
        v = torch.randn_like(k)
        try:
            s = timer(lambda: f(q, k, v, enable_gqa=True), reps=20)
        except (RuntimeError, TypeError) as exc:
            out.append({"batch": batch, "context": context, "error": str(exc).splitlines()[0][:200]})
            continue
        kv_bytes = 2 * k.numel() * 2
        out.append({"batch": batch, "context": context, "s": s, "kv_bytes": kv_bytes, "kv_gbs": kv_bytes / s / 1e9})
        print(f"  attention B={batch} L={context}: {s * 1e6:.1f} us, {kv_bytes / s / 1e9:.0f} GB/s", flush=True)
        del q, k, v
    return out


def energy_check(torch, seconds: float) -> dict:
    """servelab's NVML sampler over a matmul load: counter joules against integrated power."""
    from servelab.metrics.energy import COUNTER, POWER, cumulative_j, joules_between
    from servelab.telemetry.gpu import open_gpus

    gpus, why = open_gpus()
    if gpus is None:
        return {"error": why}
    samples: list[tuple[float, dict]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.perf_counter(), gpus.sample()[0]))
            time.sleep(0.1)

    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    thread = threading.Thread(target=sample)
    thread.start()
    time.sleep(1.0)  # idle first: the window holds a rise
    start = time.perf_counter()
    products = 0
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        products += 20
    busy = time.perf_counter() - start
    time.sleep(1.0)
    stop.set()
    thread.join()
    gpus.close()
    t0 = samples[0][0]
    t = [s[0] - t0 for s in samples]
    energy = [s[1]["energy_j"] for s in samples]
    power = [s[1]["power_w"] for s in samples]
    counter = cumulative_j(t, energy, power)
    integrated = cumulative_j(t, [None] * len(t), power)
    a_s, b_s = t[1], t[-2]
    out = {"samples": len(t), "busy_s": busy, "products": products, "tflops": products * 2 * 8192**3 / busy / 1e12,
           "window_s": b_s - a_s, "max_power_w": max(p for p in power if p is not None),
           "sources": [counter[2] if counter else None, integrated[2] if integrated else None],
           "counter_j": joules_between(counter, a_s, b_s) if counter and counter[2] == COUNTER else None,
           "integrated_j": joules_between(integrated, a_s, b_s) if integrated and integrated[2] == POWER else None,
           "sm_clock_mhz": [s[1]["sm_clock_mhz"] for s in samples][::5], "power_w": power[::5]}
    print(f"  energy: counter {out['counter_j']} J, integrated {out['integrated_j']} J over {out['window_s']:.1f} s",
          flush=True)
    return out


def environment(torch, device: str) -> dict:
    env = {"torch": torch.__version__, "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
           "device": device}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=torch.cuda.get_device_name(0), sms=p.multi_processor_count,
                   memory_gib=p.total_memory / 2**30, capability=f"{p.major}.{p.minor}")
        try:
            from servelab.telemetry.gpu import gpu_check
            env["gpu_check"] = gpu_check()
        except Exception as exc:  # noqa: BLE001 - recorded, the measurement goes on
            env["gpu_check"] = {"error": repr(exc)}
    return env


def measure(args) -> int:
    import torch

    from servelab.planner.models import find_model

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_roofline: no CUDA device (torch.cuda.is_available() is False); use --device cpu --quick "
              "for a logic check", file=sys.stderr)
        return 2
    timer = Timer(torch, args.device)
    result = {"environment": environment(torch, args.device)}
    print(json.dumps(result["environment"], default=str)[:600], flush=True)
    only = set(args.only or SECTIONS)
    if "memory" in only:
        result["memory"] = memory_bandwidth(torch, timer, args.device, 0.0625 if args.quick else 4.0)
        print(f"  memory: {result['memory']}", flush=True)
    if "attention" in only:
        result["attention"] = attention_decode(torch, timer, args.device, args.quick)
    if "fp8" in only:
        result["fp8"] = fp8_gemm(torch, timer, args.device)
    if "decode" in only:
        result["decode"] = {}
        for name in ["Qwen/Qwen3-0.6B"] if args.quick else DENSE:
            model = find_model(name)
            tokens = [1, 8] if args.quick else DECODE_TOKENS + PREFILL_TOKENS
            result["decode"][name] = decode_stack(torch, timer, model, args.device, tokens, args.device == "cuda")
    if "moe" in only:
        result["moe"] = moe_decode(torch, timer, find_model(MOE), args.device, args.quick)
    if "energy" in only and args.device == "cuda" and not args.quick:
        result["energy"] = energy_check(torch, 10.0)
    text = json.dumps(result, indent=1, default=str)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


def report(args) -> int:
    from servelab.planner.corpus.roofline import planner_kernels_s
    from servelab.planner.gpus import find_gpu
    from servelab.planner.models import find_model
    from servelab.planner.speed_model import fitted_speed

    with open(args.file) as f:
        data = json.load(f)
    env = data["environment"]
    name = env.get("gpu", "")
    gpu = find_gpu(name.replace("NVIDIA ", "")) if name else None
    if gpu is None:
        print(f"gpu_roofline: {args.file}: GPU {name!r} is not in the planner's table", file=sys.stderr)
        return 2
    eff = fitted_speed().efficiency(gpu)
    bw, tf = gpu.bandwidth_gbs, gpu.bf16_tflops
    print(f"{name} ({env.get('date')}, torch {env['torch']}); datasheet {bw:.0f} GB/s, {tf:.0f} dense bf16 TFLOP/s; "
          f"planner's fitted efficiency for its family: bandwidth {eff.bw_eff if eff else 'none'}, "
          f"compute {eff.compute_eff if eff else 'none'}")
    m = data.get("memory")
    if m:
        print(f"\nmemory: copy {m['copy_gbs']:.0f} GB/s ({m['copy_gbs'] / bw:.1%}), read {m['read_gbs']:.0f} GB/s "
              f"({m['read_gbs'] / bw:.1%} of the datasheet)")
    if data.get("decode"):
        print("\n| model | tokens | kernels (graph) ms | eager ms | weights GB/s | % of datasheet bw | TFLOP/s | "
              "% of datasheet | planner (weights+FLOPs) ms | planner / measured |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for model_name, rows in data.get("decode", {}).items():
            model = find_model(model_name)
            for r in rows:
                kernels = r.get("graph_s", r["eager_s"])
                planned = planner_kernels_s(model, gpu, eff, r["tokens"])
                print(f"| {model_name.split('/')[-1]} | {r['tokens']} | {kernels * 1e3:.3f} | {r['eager_s'] * 1e3:.3f} | "
                      f"{r['weight_gbs']:.0f} | {r['weight_gbs'] / bw:.1%} | {r['tflops']:.1f} | {r['tflops'] / tf:.1%} | "
                      f"{planned * 1e3:.3f} | {planned / kernels:.2f} |")
    if data.get("fp8"):
        print("\n| fp8 tokens | bf16 us | fp8 us | bf16 TFLOP/s | fp8 TFLOP/s | fp8 / bf16 time |")
        print("|---|---|---|---|---|---|")
        for r in data["fp8"]:
            if "error" in r:
                print(f"| {r['tokens']} | {r['error']} |||||")
                continue
            print(f"| {r['tokens']} | {r['bf16_s'] * 1e6:.1f} | {r['fp8_s'] * 1e6:.1f} | {r['bf16_tflops']:.0f} | "
                  f"{r['fp8_tflops']:.0f} | {r['fp8_s'] / r['bf16_s']:.2f} |")
    if data.get("attention"):
        print("\n| attention batch | context | us | KV GB/s | % of datasheet |")
        print("|---|---|---|---|---|")
        for r in data["attention"]:
            if "error" not in r:
                print(f"| {r['batch']} | {r['context']} | {r['s'] * 1e6:.1f} | {r['kv_gbs']:.0f} | {r['kv_gbs'] / bw:.1%} |")
    moe = data.get("moe")
    if moe:
        from servelab.planner.speed_model import moe_kernel

        layers = moe["layers"]
        print(f"\n{moe['model']}, one token, {layers} layers in one CUDA graph: the dense step the planner assumes "
              f"{moe['planner_s'] * 1e3:.3f} ms ({moe['weight_bytes'] / moe['planner_s'] / 1e9:.0f} GB/s of weights); "
              f"routed experts by our grouped GEMV (tile {moe['block_n']}x{moe['block_k']}) "
              f"{moe['grouped_s'] * 1e3:.3f} ms ({moe['grouped_s'] / moe['planner_s'] - 1:+.1%}); with routing's kernels "
              f"{moe['routed_s'] * 1e3:.3f} ms: {(moe['routed_s'] - moe['grouped_s']) / layers * 1e6:.1f} us a layer. "
              f"The planner's fused-MoE kernels, from vLLM's kernel benchmarks: {moe_kernel()[0] * 1e6:.1f} us a "
              f"layer and the experts read at {moe_kernel()[1]:.0%} of the datasheet")
    e = data.get("energy")
    if e and e.get("counter_j") and e.get("integrated_j"):
        print(f"\nenergy over {e['window_s']:.1f} s of a matmul load ({e['tflops']:.0f} TFLOP/s, peak "
              f"{e['max_power_w']:.0f} W): counter {e['counter_j']:.0f} J, power integrated "
              f"{e['integrated_j']:.0f} J ({e['integrated_j'] / e['counter_j'] - 1:+.1%})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time the kernels on this machine's GPU")
    m.add_argument("--out", help="JSON file to write")
    m.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    m.add_argument("--quick", action="store_true", help="tiny shapes (a logic check)")
    m.add_argument("--only", nargs="+", choices=SECTIONS, help="measure these sections alone (default: all)")
    r = sub.add_parser("report", help="print a measurement beside the planner's model")
    r.add_argument("file")
    args = parser.parse_args(argv)
    return measure(args) if args.command == "measure" else report(args)


if __name__ == "__main__":
    sys.exit(main())
