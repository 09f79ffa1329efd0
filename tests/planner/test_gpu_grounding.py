"""The one GPU measurement in the repository (bench/gpu_roofline.py on a lent H200, 2026-12-04):
the report reads it, and the overlap exponent the simulator and the roofline use is the one that
measurement fits."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
from pathlib import Path

from servelab.planner import find_model
from servelab.sim.model import OVERLAP, overlapped

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ROOT / "bench" / "measured" / "h200-roofline-2026-12-04.json"


def roofline_script():
    spec = importlib.util.spec_from_file_location("gpu_roofline", ROOT / "bench" / "gpu_roofline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def errors(p: float, compute_eff: float = 0.68) -> list[float]:
    """|log(predicted / measured)| of the GEMM stacks above one token: each model's bandwidth taken at
    one token, one compute efficiency (0.68, read off the same file's prefill rows: an in-sample fit,
    which checks that the exponent describes this measurement, not that it carries to another GPU),
    combined with exponent p."""
    data, script = json.loads(MEASURED.read_text()), roofline_script()
    out = []
    for name, rows in data["decode"].items():
        params = sum(o * i for o, i in script.linear_shapes(find_model(name)))
        bandwidth = rows[0]["weight_gbs"] * 1e9
        for r in rows[1:]:
            predicted = overlapped(2 * params / bandwidth, 2 * params * r["tokens"] / (989e12 * compute_eff), p)
            out.append(abs(math.log(predicted / r["graph_s"])))
    return out


def test_the_measured_overlap_fits_the_h200_gemms_and_adding_does_not():
    assert len(errors(OVERLAP)) == 24  # 3 models x 8 token counts above one
    assert statistics.median(errors(OVERLAP)) < 0.02 and max(errors(OVERLAP)) < 0.07
    assert statistics.median(errors(1.0)) > 0.10 and max(errors(1.0)) > 0.35


def test_the_report_prints_the_measurement_beside_the_planner(capsys):
    assert roofline_script().main(["report", str(MEASURED)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200" in out and "| Qwen3-32B | 8192 |" in out
    assert "counter 7181 J, power integrated 7424 J (+3.4%)" in out
