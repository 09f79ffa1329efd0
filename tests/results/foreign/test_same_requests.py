"""Three servelab runs and three ``vllm bench serve`` runs of the same requests against the same
mock, 200 requests each (fixtures/same_requests/run.sh, vLLM 0.32.0+cpu's client), judged by
compare's noise rule. (At 40 requests, an earlier set, P99 TTFT came out "worse" for vLLM's
client on this busy machine: a 40-request tail rests on its largest one or two.)"""

from pathlib import Path

from servelab.reports import verdict as v
from servelab.reports.compare import build_tables
from servelab.results.runs import load_runs

SAME = Path(__file__).parent / "fixtures" / "same_requests"


def verdicts(*folders: str) -> dict[str, dict[str, str]]:
    [table] = build_tables(load_runs([SAME / f for f in folders]))
    return {row.metric.label: {c: cmp.verdict for c, cmp in row.versus.items() if cmp} for row in table.rows}


def test_vllm_bench_serve_and_servelab_are_the_same_on_every_row_they_share():
    got = {label: vs["vllm_c4"] for label, vs in verdicts("servelab_c4", "vllm_c4").items() if "vllm_c4" in vs}
    assert len(got) == 12  # throughputs, TTFT, TPOT, ITL (mean, median, P99); steady rows are servelab's alone
    assert got == dict.fromkeys(got, v.NOISE)


def test_another_max_concurrency_is_different():
    got = verdicts("servelab_c4", "vllm_c1")
    assert {label: got[label]["vllm_c1"] for label in ("total tok/s", "output tok/s", "req/s")} == \
        dict.fromkeys(("total tok/s", "output tok/s", "req/s"), v.WORSE)


def test_real_vllm_results_are_marked_as_vllms_by_their_markers():
    from servelab.results.foreign.shape import foreign_of

    runs = load_runs([SAME / "vllm_c4", SAME / "servelab_c4"])
    assert [(foreign_of(r.result) or {}).get("tool") for r in runs] == ["vllm bench serve"] * 3 + [None] * 3
