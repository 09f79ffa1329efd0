"""The lifecycle, fast: a tiny Python HTTP server (fake_engine.py) stands in for the engine."""

import signal
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from threading import Thread

import pytest
from engine_helpers import fake_spec, group_pids
from net_helpers import port_open, wait_until

from servelab.engines import EngineSpec, MemoryReport, guard, start_engine
from servelab.errors import EngineError


def test_ready_then_stop_frees_everything(tmp_path, port):
    with start_engine(fake_spec(port, "--ready-after", "0.5"), tmp_path, progress=False) as engine:
        pgid = engine.pid
        assert engine.base_url == f"http://127.0.0.1:{port}"
        assert engine.model == "fake-model"  # from /v1/models, not the spec
        assert engine.alive()
        assert engine.ready_s >= 0.5
        assert engine.memory_report == MemoryReport(
            kv_cache_tokens=46592, max_concurrency=22.75, max_concurrency_tokens=2048,
            num_gpu_blocks=2912, block_size=16)  # the last two from /metrics
        assert engine.last_log_lines(1) == [(
            "INFO [kv_cache_utils.py:1] GPU KV cache size: 46,592 tokens, "
            "Maximum concurrency for 2,048 tokens per request: 22.75x")]
        assert engine.log_path == tmp_path / "engine.log"
    assert not engine.alive()
    assert group_pids(pgid) == []
    assert not port_open(port)


def test_log_starts_with_what_ran(tmp_path, port):
    spec = fake_spec(port, env={"FAKE_FLAG": "a b"})
    with start_engine(spec, tmp_path, progress=False):
        pass
    header = (tmp_path / "engine.log").read_text().splitlines()[0]
    assert header.startswith("# servelab engine 'fake' (command): FAKE_FLAG='a b' ")
    assert header.endswith(f"fake_engine.py --port {port}")


def test_stop_kills_the_whole_group_including_a_grandchild(tmp_path, port):
    engine = start_engine(fake_spec(port, "--grandchild"), tmp_path, progress=False)
    pgid = engine.pid
    assert wait_until(lambda: len(group_pids(pgid)) == 2, 5)  # the server and its grandchild
    engine.stop()
    assert group_pids(pgid) == []
    assert not port_open(port)


@pytest.mark.timing  # the stop within 5 s of wall time
def test_stop_escalates_to_sigkill(tmp_path, port, monkeypatch):
    from servelab.engines.kinds import ENGINES

    monkeypatch.setattr(ENGINES["command"], "stop_grace_s", 0.5)
    engine = start_engine(fake_spec(port, "--ignore-term"), tmp_path, progress=False)
    started = time.monotonic()
    engine.stop()
    assert 0.5 <= time.monotonic() - started < 5
    assert group_pids(engine.pid) == []


def test_stop_is_idempotent(tmp_path, port):
    engine = start_engine(fake_spec(port), tmp_path, progress=False)
    engine.stop()
    engine.stop()
    with engine:
        pass
    assert not engine.alive()


def test_engine_dying_while_starting_reports_its_last_log_lines(tmp_path, port):
    spec = fake_spec(port, "--ready-after", "30", "--die-after", "0.3")
    with pytest.raises(EngineError) as caught:
        start_engine(spec, tmp_path, progress=False)
    message = str(caught.value)
    assert message.startswith("engine 'fake' exited with code 3 while starting; last log lines:")
    assert message.endswith("  | ERROR fake engine: CUDA out of memory (simulated)")
    assert not port_open(port)


def test_ready_timeout_stops_the_engine(tmp_path, port):
    pid_file = tmp_path / "pid"
    spec = fake_spec(port, "--ready-after", "60", "--grandchild", "--pid-file", str(pid_file),
                     ready_timeout_s=1.0)
    with pytest.raises(EngineError, match=r"engine 'fake' not ready after 1 s; last log lines:"):
        start_engine(spec, tmp_path, progress=False)
    assert group_pids(int(pid_file.read_text())) == []
    assert not port_open(port)


def test_exception_in_the_with_block_stops_the_engine(tmp_path, port):
    with pytest.raises(RuntimeError):
        with start_engine(fake_spec(port, "--grandchild"), tmp_path, progress=False) as engine:
            raise RuntimeError("benchmark failed")
    assert group_pids(engine.pid) == []
    assert not port_open(port)


def test_atexit_guard_tracks_live_engines(tmp_path, port):
    engine = start_engine(fake_spec(port), tmp_path, progress=False)
    assert engine in guard._live
    guard._stop_all()  # what atexit runs
    assert engine not in guard._live and group_pids(engine.pid) == []


def test_progress_prints_one_ready_line_when_not_a_terminal(tmp_path, port, capsys):
    with start_engine(fake_spec(port), tmp_path, progress=True):
        pass
    err = capsys.readouterr().err
    assert err.startswith("engine 'fake' ready in ") and err.endswith(" s\n") and "\r" not in err


def test_watchdog_kills_the_group_when_its_pipe_closes_without_goodbye(tmp_path, port):
    engine = start_engine(fake_spec(port, "--grandchild"), tmp_path, progress=False)
    try:
        engine._watchdog.stdin.close()  # what the kernel does when servelab is SIGKILLed
        assert wait_until(lambda: group_pids(engine.pid) == [], 10)
    finally:
        engine.stop()


def test_external_engine_has_no_process_and_stop_does_nothing(tmp_path, port):
    server = _models_server(port)
    try:
        spec = EngineSpec(name="ext", kind="external", url=f"http://127.0.0.1:{port}", ready_timeout_s=5)
        with start_engine(spec, tmp_path, progress=False) as engine:
            assert (engine.pid, engine.model) == (None, "served-elsewhere")
            assert engine.alive()
        assert port_open(port)  # not ours to stop
    finally:
        server.shutdown()


def test_external_engine_that_never_answers_times_out(tmp_path, port):
    spec = EngineSpec(name="ext", kind="external", url=f"http://127.0.0.1:{port}", ready_timeout_s=0.5)
    with pytest.raises(EngineError, match="not ready after"):
        start_engine(spec, tmp_path, progress=False)


def _models_server(port: int) -> HTTPServer:
    """An OpenAI-ish server without /health (404), like many external ones."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"data": [{"id": "served-elsewhere"}]}' if self.path == "/v1/models" else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", port), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_no_stray_signal_handlers_left_behind(tmp_path, port):
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with start_engine(fake_spec(port), tmp_path, progress=False):
        pass
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_a_server_that_took_the_port_while_the_engine_started_is_not_taken_for_it(tmp_path, port, monkeypatch):
    """The port was free at launch; another server bound it before the engine did. Its answer
    must not make the engine ready (servelab would measure the wrong server)."""
    from servelab.engines import process
    from servelab.engines.kinds import ENGINES

    monkeypatch.setattr(ENGINES["command"], "listens_itself", True)
    server = _models_server(port)
    monkeypatch.setattr(process, "port_in_use", lambda host, p: False)  # the race: taken after the check
    try:
        spec = fake_spec(port, "--no-listen")
        spec = EngineSpec(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__},
                             "ready_url": f"http://127.0.0.1:{port}/v1/models"})
        with pytest.raises(EngineError, match=f"port {port} answered, but from pid [0-9]+, not the engine"):
            start_engine(spec, tmp_path, progress=False)
    finally:
        server.shutdown()
        server.server_close()


def test_the_engines_own_listener_passes_the_check(tmp_path, port, monkeypatch):
    from servelab.engines.kinds import ENGINES

    monkeypatch.setattr(ENGINES["command"], "listens_itself", True)
    with start_engine(fake_spec(port, "--grandchild"), tmp_path, progress=False) as engine:
        assert engine.alive() and engine.model == "fake-model"
