"""Issue 34 item 2: the simulated A40 run whose queue the token budget held (every step at exactly
max_num_batched_tokens 2,048 for its first 9 s, up to 192 waiting) was diagnosed no-limit-found and
told to "send more until something queues". Each 2,048-token step takes longer than a sampler tick
there, so half the ticks end no step: those read the step still running, not "no step"."""

from __future__ import annotations

import json

from diag_timelines import client_at, make_timeline, run

from servelab.cli.main import main


def long_steps(i: int) -> dict:
    """A full 2,048-token step every other tick while 100 wait (ticks 0–19), then a decode tail
    with no queue and small steps each tick (ticks 20–79)."""
    steps = float(i // 2 + 1) if i < 20 else 10.0 + (i - 19)
    tokens = 2048.0 * min(steps, 10.0) + 60.0 * max(0.0, steps - 10.0)
    return {"running": 40.0, "waiting": 100.0 if i < 20 else 0.0, "kv_usage": 0.2,
            "iteration_tokens_sum": tokens, "iteration_tokens_count": steps}


def test_steps_longer_than_a_tick_hold_the_queue_for_every_tick_they_run():
    tl = make_timeline(n=80, engine=long_steps, client=client_at(40))
    tl.samples.insert(0, {"t_ms": -249.0, "src": "engine", "running": 0.0, "waiting": 0.0,
                          "iteration_tokens_sum": 0.0, "iteration_tokens_count": 0.0})
    top = run(tl, max_num_seqs=256, max_num_batched_tokens=2048, request_rate=float("inf")).top
    assert top.id == "scheduler-cap" and top.evidence["limit"] == "max_num_batched_tokens"
    assert top.evidence["bound"] == {"share": 0.25, "spans_s": [[0.0, 5.0]]}  # 20 of 80 ticks, not 10
    assert "--max-num-batched-tokens from 2048" in top.next


def test_a_queue_nothing_named_is_not_told_to_offer_more_load():
    """Requests queued for the whole run below max_num_seqs, steps far below the budget, room in the
    cache: nothing is named, and more load would only lengthen the queue."""
    engine = lambda i: {"running": 5.0, "waiting": 27.0, "kv_usage": 0.5, "iteration_tokens_sum": 100.0 * i,
                        "iteration_tokens_count": float(i)}
    d = run(make_timeline(client=client_at(32), engine=engine), max_concurrency=32, max_num_seqs=64,
            max_num_batched_tokens=2048)
    assert d.top.id == "no-limit-found" and "until something queues" not in d.top.next
    assert "more load would only lengthen the queue" in d.top.next


def test_the_issues_simulated_a40_run_is_the_token_budget_and_says_simulated(tmp_path, capsys):
    assert main(["bench", "--simulate", "--model", "Qwen/Qwen3-14B", "--gpu", "A40", "--dataset-name", "sharegpt",
                 "--num-prompts", "200", "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path),
                 "--result-filename", "r.json"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("servelab diagnosis:"))
    diagnosis = json.loads((tmp_path / "r.json").read_text())["servelab"]["diagnosis"]
    top = diagnosis["verdicts"][0]
    assert diagnosis["verdict"] == "scheduler-cap" and top["evidence"]["limit"] == "max_num_batched_tokens"
    assert top["evidence"]["max_num_batched_tokens"] == 2048 and top["evidence"]["waiting_max"] == 192
    assert "until something queues" not in top["next"]
    assert "— SIMULATED (no engine ran: " in line
    assert diagnosis["simulated"].startswith("no engine ran: ")
