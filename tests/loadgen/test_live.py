"""The live panel: what it shows from counters, records and the engine's sample, when it is
on, and — in a real terminal (tmux) — that a bench against the mock draws it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from servelab.loadgen import live
from servelab.loadgen.pacer import Counters
from servelab.loadgen.shards import Live
from servelab.metrics.tally import Tally
from servelab.records import RequestRecord, SampleRequest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def tally_of(ttfts_ms: list[int], tokens: int = 4) -> Tally:
    """A tally whose request i was sent at 0 and had its first token at ttfts_ms[i]."""
    n = len(ttfts_ms) + 1
    tally = Tally([SampleRequest("p", 1, tokens, f"r{i}") for i in range(n)])
    for i, ms in enumerate(ttfts_ms):
        first = 1_000 + ms * 1_000_000
        tally.add(i, RequestRecord(f"r{i}", 1, tokens, 1_000, 1_000, 1_000, first + 10, (first,) * tokens,
                                   (1,) * tokens, tokens))
    return tally  # the last request has not ended


def test_rows_show_counters_records_engine_and_cpu():
    tally = tally_of(list(range(1, 101)))
    engine = {"src": "engine", "running": 7.0, "waiting": 2.0, "kv_usage": 0.375}
    panel = live.Panel(200, tally=tally, engine=lambda: engine)
    panel.start(Counters(dispatched=150, done=101, failed=1, in_flight=49))
    panel.stop()
    rows = dict(panel.rows())
    assert rows["progress"] == "101/200 (50%)"
    assert rows["requests"] == "sent 150 · in flight 49 · finished 100 · failed 1"
    assert rows["TTFT"] == "p50 50.5 ms · p99 99.0 ms (so far)"  # numpy's linear percentiles of 1…100
    assert rows["output tok/s"].endswith("(100 records made)")
    assert rows["engine"] == "running 7 · waiting 2 · KV 38%"
    assert "of a core now" in rows["client CPU"]


def test_lanes_taking_sessions_until_a_minimum_show_its_time_not_a_share_of_what_was_drawn(monkeypatch):
    """--agentic-locked with --max-sessions: the requests meant are known at the end (the sessions the
    lanes took), so the progress is the minimum's time gone, on the panel and on the plain line."""
    from servelab.loadgen.progress import Progress

    now = [130.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    panel = live.Panel(50_000, tally=tally_of([1, 2]), until_s=60.0)
    panel.counters, panel._t0 = Counters(done=2), 100.0  # started 30 s ago
    assert dict(panel.rows())["progress"] == "2 · taking sessions for 60 s (50%)"
    line = Progress(50_000, until_s=60.0)
    line.counters, line._t0, now[0] = Counters(done=2), 100.0, 190.0  # 90 s: past the minimum
    assert line.line().startswith("[bench] 2 done · taking sessions for 60 s (100%) · 0 in flight")


def test_past_the_exact_limit_percentiles_are_over_a_stride_and_marked(monkeypatch):
    monkeypatch.setattr(live, "EXACT_UP_TO", 10)
    panel = live.Panel(101, tally=tally_of(list(range(1, 101))))
    panel.counters = Counters()
    assert dict(panel.rows())["TTFT"].startswith("≈ p50 ")


def test_no_records_no_engine_said_in_words():
    panel = live.Panel(3, tally=tally_of([]), engine=lambda: None)
    panel.counters = Counters()
    rows = dict(panel.rows())
    assert rows["TTFT"] == "no records yet"
    assert rows["engine"] == "no sample (telemetry off, or none yet)"
    panel.engine = lambda: {"src": "engine", "error": "connection refused"}
    assert dict(panel.rows())["engine"] == "scrape failed: connection refused"


def test_one_line_per_worker_from_their_published_rows():
    rows = [[10, 8, 1, 2, 3_000_000, 2_500_000_000], [9, 7, 0, 2, 1_000_000, 4_000_000_000]]
    counters = Live(arrays=rows)
    counters.refresh()
    panel = live.Panel(20)
    panel.counters = counters
    got = dict(panel.rows())
    assert got["requests"] == "sent 19 · in flight 4 · finished 14 · failed 1"
    assert got["  worker 1"] == "sent 9 · in flight 2 · done 7 · failed 0 · lag 1.0 ms · CPU 4.0 s"
    assert got["client CPU"] == "busiest worker 4.0 s"


def test_the_frame_draws_every_row_aligned_names_bold_and_cut_not_wrapped():
    panel = live.Panel(5)
    panel.counters = Counters(done=5)
    lines = panel.frame()
    plain = [line.replace(live.BOLD, "").replace(live.PLAIN, "") for line in lines]
    assert plain[0].startswith("servelab bench · ") and len(lines) == 1 + len(panel.rows())
    assert plain[1] == "progress    5/5 (100%)"  # names padded to the longest ("client CPU"), two spaces
    assert lines[1] == f"{live.BOLD}progress  {live.PLAIN}  5/5 (100%)"
    for (name, _), line in zip(panel.rows(), plain[1:]):  # every value starts in one column
        assert line[:12].rstrip() == name and line[12] != " "
    narrow = [line.replace(live.BOLD, "").replace(live.PLAIN, "") for line in panel.frame(width=20)]
    assert max(len(line) for line in narrow) < 20 and any(line.endswith("…") for line in narrow)
    short = panel.frame(height=4)  # a terminal 4 lines tall: 3 lines, the last says what is left out
    assert len(short) == 3 and short[-1] == f"… {len(lines) - 2} more lines (a taller terminal shows them)"


def test_a_redraw_goes_back_over_the_last_frame(monkeypatch):
    import io

    stream = io.StringIO()
    panel = live.Panel(5, stream=stream)
    monkeypatch.setattr(live, "REFRESH_HZ", 100)
    panel.start(Counters())
    time.sleep(0.1)
    panel.stop()
    out = stream.getvalue()
    frames = out.count("\x1b[J")
    n = 1 + len(panel.rows())
    assert frames >= 2 and out.count(f"\x1b[{n}F") == frames - 1  # every frame but the first moves up over it
    assert out.endswith("\x1b[J") and "progress" in out.rsplit(f"\x1b[{n}F", 1)[-1]


def test_on_with_a_terminal_or_when_forced(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    monkeypatch.delenv("SERVELAB_LIVE", raising=False)
    assert live.wanted(Tty()) and not live.wanted(open(os.devnull))
    monkeypatch.setenv("SERVELAB_LIVE", "1")
    assert live.wanted(open(os.devnull))
    monkeypatch.setenv("SERVELAB_LIVE", "0")
    assert not live.wanted(Tty())


def _pane(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup.sh installs it)")
@pytest.mark.timing  # a frame of a 3 s run must be caught mid-run by a 0.25 s poll
def test_a_bench_in_a_real_terminal_draws_the_panel(mock_server, qwen3_path, tmp_path):
    mock = mock_server(ttft_ms=20, itl_ms=10)
    done = tmp_path / "done"
    bench = [sys.executable, "-m", "servelab.cli.main", "bench", "--backend", "vllm", "--base-url", mock.url,
             "--model", "mock", "--tokenizer", qwen3_path, "--dataset-name", "random", "--random-input-len", "16",
             "--random-output-len", "16", "--num-prompts", "120", "--request-rate", "40", "--max-concurrency", "16",
             "--no-telemetry"]
    command = f"env PYTHONPATH={shlex.quote(SRC)} {shlex.join(bench)} >/dev/null; touch {shlex.quote(str(done))}; " \
              "sleep 60"
    session = f"servelab-live-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k != "SERVELAB_LIVE"}  # on because the pane is a terminal
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "30", command], check=True,
                   env=env)
    try:
        seen, deadline = [], time.monotonic() + 90
        while not done.exists() and time.monotonic() < deadline:
            seen.append(_pane(session))
            time.sleep(0.25)
        final = _pane(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert done.exists(), final
    assert any("in flight" in s and "/120 (" in s and "120/120" not in s for s in seen), "no panel mid-run"
    assert "servelab bench" in final and "120/120 (100%)" in final, final
    assert "sent 120 · in flight 0 · finished 120 · failed 0" in final, final
    assert "(120 answered)" in final and "TTFT" in final, final


def test_with_a_glance_the_rows_come_from_it_not_from_records():
    from servelab.loadgen.glance import FAILED, OK, Glance

    glance = Glance(5)
    glance.state[:4] = [OK, OK, OK, FAILED]
    glance.ttft_ms[:3], glance.tokens[:3] = [10.0, 20.0, 30.0], [4, 5, 6]
    panel = live.Panel(5, tally=tally_of([]), glance=glance)  # no records made: the glance is read
    panel.counters = Counters(dispatched=5, done=4, failed=1, in_flight=1)
    rows = dict(panel.rows())
    assert rows["TTFT"] == "p50 20.0 ms · p99 29.8 ms (so far)"
    assert rows["output tok/s"].endswith("(4 answered)")
    assert dict(live.Panel(5, glance=Glance(5)).rows())["TTFT"] == "none answered yet"


def test_what_the_run_prints_meanwhile_goes_above_the_frame(monkeypatch):
    import io

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)  # the panel's terminal is the run's stderr
    monkeypatch.setattr(live, "REFRESH_HZ", 100)
    panel = live.Panel(5, stream=stream)
    panel.start(Counters())
    time.sleep(0.05)
    print("servelab: WARNING something", file=sys.stderr)
    print("no end yet", end="", file=sys.stderr)  # a line's start waits for its end, or for the stop
    time.sleep(0.05)
    panel.stop()
    assert sys.stderr is stream  # given back
    out = stream.getvalue()
    n = 1 + len(panel.rows())
    before, after = out.split("servelab: WARNING something\n")
    assert before.endswith(f"\x1b[{n}F\x1b[J")  # the frame erased, the line written where it stood
    assert after.startswith("servelab ") and "progress" in after  # and the frame drawn again under it
    assert "no end yet" in after and out.rstrip("\x1b[J").endswith("\n")


def test_a_terminal_too_short_to_cut_draws_the_frame_whole():
    panel = live.Panel(5)
    panel.counters = Counters()
    assert len(panel.frame(height=2)) == len(panel.frame()) == 1 + len(panel.rows())
