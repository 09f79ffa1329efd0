"""Integration: the REAL embedded engine (vLLM's CPU build + SmolLM2-135M), diagnosed.

Two engine starts (~30 s each on 2 cores) and two short runs (~35 s and ~12 s):

* ``--max-num-seqs 2`` under 32 client streams: scheduler-cap, running 2, waiting up to 30.
* the default config under 2 client streams: client-concurrency-cap.

Each takes the shared engine lock (``one_real_engine_at_a_time``): on 2 cores, two
engines starting at once take minutes and skew what is measured.
"""

from __future__ import annotations

import dataclasses

from engine_marks import EMBEDDED_ENGINE
from net_helpers import free_port

pytestmark = EMBEDDED_ENGINE


def bench_on_engine(tmp_path, engine_args: tuple[str, ...], argv: list[str]):
    from servelab.engines import embedded_engine_spec, start_engine
    from servelab.flags.bench_serve import parse_bench_spec
    from servelab.measure.run import execute
    from servelab.measure.facts import engine_context

    base = embedded_engine_spec(port=free_port())
    spec = dataclasses.replace(base, args=(*base.args, *engine_args))
    with start_engine(spec, tmp_path / "engine", progress=False) as engine:
        args = parse_bench_spec(["--backend", "vllm", "--base-url", engine.base_url, "--model", engine.model,
                                 "--tokenizer", engine.model, "--dataset-name", "random", "--seed", "1",
                                 "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path),
                                 "--result-filename", "r.json", *argv])
        return execute(args, context={"engine": engine_context(engine)})


def test_max_num_seqs_2_under_32_streams_is_a_scheduler_cap(tmp_path, capsys, one_real_engine_at_a_time):
    outcome = bench_on_engine(tmp_path, ("--max-num-seqs", "2"),
                              ["--random-input-len", "32", "--random-output-len", "16", "--num-prompts", "96",
                               "--max-concurrency", "32"])
    print(capsys.readouterr().out)  # shown with -s: the console block and the diagnosis
    diagnosis = outcome.result["servelab"]["diagnosis"]
    top = diagnosis["verdicts"][0]
    assert "cpu-compute-bound" not in [v["id"] for v in diagnosis["verdicts"]]  # a pinned batch (issue 34)
    assert outcome.exit_code == 0 and diagnosis["verdict"] == "scheduler-cap"
    assert top["evidence"]["max_num_seqs"] == 2
    if top["evidence"].get("inferred_from"):
        # The API server can go silent under this load on 2 cores (CI once got answers only in the
        # run's last second): the cap is then seen from the client's count, saying why, never from a
        # sliver of drain (issue: that read "1 running, 0 waiting" and blamed the client's cap).
        # CI has seen both: answers covering 4% of the run, and one answer, from before the queue formed.
        unseen = next(x for x in diagnosis["not_checked"] if x.startswith("engine /metrics: "))
        assert top["level"] == "medium" and unseen.removeprefix("engine /metrics: ") in top["summary"]
        assert top["evidence"]["client_in_flight_max"] == 32
        return
    assert top["level"] == "high" and top["evidence"]["running_max"] == 2
    # The queue fills to at most 32 in flight − 2 running. The median is lower than 30 and depends on the
    # machine: ramp-up and drain are kept, and requests still in vLLM's frontend (tokenizing, on 2 busy
    # cores) are in flight for the client but not yet "waiting" in the engine — CI saw a median of 22.
    assert 25 <= top["evidence"]["waiting_max"] <= 30
    assert top["evidence"]["waiting_median"] >= 5 * top["evidence"]["running_max"]  # a queue far longer than the batch
    assert "max_num_seqs 2" in top["summary"]
    assert (tmp_path / "r.timeline.jsonl").is_file()


def test_default_engine_under_2_streams_is_the_clients_cap(tmp_path, capsys, one_real_engine_at_a_time):
    outcome = bench_on_engine(tmp_path, (), ["--random-input-len", "32", "--random-output-len", "32",
                                             "--num-prompts", "16", "--max-concurrency", "2"])
    print(capsys.readouterr().out)
    verdicts = outcome.result["servelab"]["diagnosis"]["verdicts"]
    cap = next(v for v in verdicts if v["id"] == "client-concurrency-cap")
    assert outcome.exit_code == 0
    if "engine_waiting_mean" in cap["evidence"]:
        assert cap["evidence"]["engine_waiting_mean"] < 0.5 and cap["evidence"]["kv_usage_max"] < 0.1
    else:  # the API server starved (CI: answers for 42% of the loaded time): its view is left out, and said why
        unseen = next(x for x in outcome.result["servelab"]["diagnosis"]["not_checked"]
                      if x.startswith("engine /metrics: "))
        assert unseen.removeprefix("engine /metrics: ") in cap["summary"] and cap["level"] == "medium"
    # the client's cap pins the batch (14 requests wait for a slot): never cpu-compute-bound (issue 34 item 1)
    assert "cpu-compute-bound" not in [v["id"] for v in verdicts]
    if outcome.result["servelab"]["machine"]["busy_fraction"] >= 0.9:
        # full cores are said beside the cap (a larger batch may use them better), or others starved them
        assert verdicts[0]["id"] in ("client-concurrency-cap", "host-contention") and "engine knobs" not in cap["next"]
    else:  # high when the engine's idle scheduler was seen; medium (asserted above) when it was not
        assert verdicts[0] is cap and (cap["level"] == "high") == ("engine_waiting_mean" in cap["evidence"])
