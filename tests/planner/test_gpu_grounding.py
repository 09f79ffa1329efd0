"""The one GPU measurement in the repository (bench/gpu_roofline.py on a lent H200, 2026-12-04, read
from bench/measured/): the figures docs/planner.md cites are in it, and the overlap exponent the
simulator and the roofline use is the one that measurement fits. The harness itself (torch, a Triton
kernel) is checked on the CPU by ``bench/gpu_roofline.py measure --quick --device cpu`` (bench/README.md)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from servelab.planner import find_gpu, find_model
from servelab.planner.corpus.roofline import linear_shapes, planner_kernels_s
from servelab.planner.speed_model import fitted_speed
from servelab.sim.model import OVERLAP, overlapped

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "bench" / "measured" / "h200-roofline-2026-12-04.json"


def errors(p: float, compute_eff: float = 0.68) -> list[float]:
    """|log(predicted / measured)| of the GEMM stacks above one token: each model's bandwidth taken at
    one token, one compute efficiency (0.68, read off the same file's prefill rows: an in-sample fit,
    which checks that the exponent describes this measurement, not that it carries to another GPU),
    combined with exponent p."""
    data = json.loads(MEASURED.read_text())
    out = []
    for name, rows in data["decode"].items():
        params = sum(o * i for o, i in linear_shapes(find_model(name)))
        bandwidth = rows[0]["weight_gbs"] * 1e9
        for r in rows[1:]:
            predicted = overlapped(2 * params / bandwidth, 2 * params * r["tokens"] / (989e12 * compute_eff), p)
            out.append(abs(math.log(predicted / r["graph_s"])))
    return out


def test_the_measured_overlap_fits_the_h200_gemms_and_adding_does_not():
    assert len(errors(OVERLAP)) == 24  # 3 models x 8 token counts above one
    assert statistics.median(errors(OVERLAP)) < 0.02 and max(errors(OVERLAP)) < 0.07
    assert statistics.median(errors(1.0)) > 0.10 and max(errors(1.0)) > 0.35


def test_the_measurement_holds_the_figures_the_docs_cite_and_the_planner_reads_beside_them():
    data = json.loads(MEASURED.read_text())
    assert data["environment"]["gpu"] == "NVIDIA H200"
    energy = data["energy"]
    assert (round(energy["counter_j"]), round(energy["integrated_j"])) == (7181, 7424)
    assert round(energy["integrated_j"] / energy["counter_j"] - 1, 3) == 0.034
    # what the report prints beside Qwen3-32B: the planner's GEMM-only step over the measured kernels
    gpu, rows = find_gpu("H200"), {r["tokens"]: r for r in data["decode"]["Qwen/Qwen3-32B"]}
    eff = fitted_speed().efficiency(gpu)
    ratios = {n: planner_kernels_s(find_model("Qwen3-32B"), gpu, eff, n) / rows[n]["graph_s"] for n in (1, 8192)}
    assert (round(ratios[1], 2), round(ratios[8192], 2)) == (1.06, 0.79)


MOE = ROOT / "bench" / "measured" / "h200-moe-2026-12-04.json"


def test_the_h200_moe_measurement_backs_the_per_layer_cost_the_planner_takes_from_vllms_benchmarks():
    """On the H200 our grouped GEMV read the routed experts about as fast as plain GEMMs read the
    same bytes (within 10 %), and routing's small kernels added 20-60 us a layer: a fixed cost per
    MoE layer beside a read near the dense one is what an MoE step adds, as vLLM's published
    kernel series imply (speed_model.MOE_KERNEL_SERIES)."""
    from servelab.planner.speed_model import moe_kernel

    m = json.loads(MOE.read_text())["moe"]
    assert m["layers"] == 48 and m["kernel_vs_reference"] < 0.01
    assert m["grouped_s"] / m["planner_s"] < 1.10
    routing_per_layer = (m["routed_s"] - m["grouped_s"]) / m["layers"]
    assert 20e-6 < routing_per_layer < 50e-6
    # vLLM's series put the fixed cost within a factor of two of what our kernels' routing took
    assert 0.5 < routing_per_layer / moe_kernel()[0] < 2
