"""Integration: `servelab scale --replicas 2` on the REAL embedded engine, one core each.

Two vLLM CPU starts (~30 s and ~3.5 GB each) and a short workload. Each replica must be
bound to its own core, both measured in one common window, and after the run no
process of either engine may be left.
"""

import json

from engine_marks import EMBEDDED_ENGINE
from net_helpers import free_ports, port_open

from servelab.cli.main import main
from servelab.engines.process import group_members

pytestmark = EMBEDDED_ENGINE


def test_two_embedded_replicas_in_one_window(tmp_path, one_real_engine_at_a_time):
    base = free_ports(2)
    argv = ["scale", "--replicas", "2", "--repeats", "2", "--port", str(base), "--results", str(tmp_path),
            "--warmup", "2", "--disable-tqdm", "--dataset-name", "random", "--random-input-len", "32",
            "--random-output-len", "24", "--random-range-ratio", "0.5", "--num-prompts", "12",
            "--max-concurrency", "2"]
    assert main(argv) == 0
    result = json.loads((tmp_path / "scale" / "scale.json").read_text())
    binds = [e["env"]["VLLM_CPU_OMP_THREADS_BIND"] for e in result["engines"]]
    assert len(set(binds)) == 2  # each replica on its own core(s)
    window = result["together"]["window"]
    assert window["length_s"] > 0 and window["start_s"] < window["end_s"]
    assert all(r["output_tok_s"] > 0 and r["in_window"]["tokens"] > 0 for r in result["together"]["replicas"])
    assert 0.3 < result["efficiency"] < 1.5
    # the API server is each engine's leader: its pid is the group's id
    leaders = [api_server_pid(e["log"]) for e in result["engines"]]
    assert all(leaders) and not any(group_members(pid) for pid in leaders)
    assert not any(port_open(base + i) for i in range(2))


def api_server_pid(log: str) -> int | None:
    for line in open(log, encoding="utf-8", errors="replace"):
        if "(APIServer pid=" in line:
            return int(line.split("(APIServer pid=")[1].split(")")[0])
    return None
