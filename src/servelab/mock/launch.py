"""Run the mock beside a test or a benchmark: in a thread, or in a child process.

A thread is simplest for functional tests. A subprocess is the one to measure a client
against: in a thread the mock and the client share one interpreter lock, so each would
slow the other and both clocks would lie. Both handles have ``.port``, ``.url``,
``.truth()``, ``.reset_truth()`` and ``.stop()``, and work as context managers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from servelab.errors import ServerError
from servelab.mock.config import MockConfig
from servelab.mock.server import MockServer, new_event_loop
from servelab.mock.truth import Truth

LISTENING = "servelab mock: listening on "


class _Handle:
    port: int
    host: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class ThreadHandle(_Handle):
    """The mock on its own event loop in a daemon thread of this process."""

    def __init__(self, config: MockConfig, timeout_s: float = 10.0) -> None:
        self.server = MockServer(config)
        self.host = config.host
        self._loop = new_event_loop()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="servelab-mock", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout_s) or self._error is not None:
            raise ServerError(f"mock server did not start: {self._error}")
        self.port = self.server.port

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self.server.start())
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
            self._started.set()
            return
        self._started.set()
        self._loop.run_forever()
        self._loop.close()

    def _call(self, fn, timeout_s: float = 30.0):
        async def run():
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout_s)

    def truth(self) -> Truth:
        """A consistent snapshot, taken on the server's own loop."""
        return self._call(lambda: self.server.truth)

    def reset_truth(self) -> None:
        self._call(self.server.reset_truth)

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)


class ProcessHandle(_Handle):
    """The mock in a child process (``python -m servelab.mock``); the truth comes over
    HTTP from ``GET /_servelab/truth``. ``cpu`` pins it to those cores (Linux)."""

    def __init__(self, config: MockConfig, cpu: list[int] | None = None, timeout_s: float = 30.0) -> None:
        self.host = config.host
        env = dict(os.environ, PYTHONPATH=_src_path())
        argv = [sys.executable, "-m", "servelab.mock", json.dumps(config.to_dict())]
        pre = (lambda: os.sched_setaffinity(0, cpu)) if cpu else None
        self._proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True, preexec_fn=pre)
        self.port = self._read_port(timeout_s)

    def _read_port(self, timeout_s: float) -> int:
        timer = threading.Timer(timeout_s, self._proc.kill)
        timer.start()
        try:
            line = self._proc.stdout.readline()
        finally:
            timer.cancel()
        if not line.startswith(LISTENING):
            self._proc.kill()
            raise ServerError(f"mock process did not start (said {line!r})")
        return int(line[len(LISTENING):].split()[0].rsplit(":", 1)[1])

    def _request(self, method: str, path: str) -> bytes:
        req = urllib.request.Request(self.url + path, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.read()

    def truth(self) -> Truth:
        return Truth.from_dict(json.loads(self._request("GET", "/_servelab/truth")))

    def reset_truth(self) -> None:
        self._request("POST", "/_servelab/truth/reset")

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc.stdout.close()


def run_in_thread(config: MockConfig) -> ThreadHandle:
    return ThreadHandle(config)


def run_in_subprocess(config: MockConfig, cpu: list[int] | None = None) -> ProcessHandle:
    return ProcessHandle(config, cpu)


def _src_path() -> str:
    """The folder holding the ``servelab`` package, put first on the child's path so the
    child runs this very code, installed or not."""
    src = str(Path(__file__).resolve().parents[2])
    rest = os.environ.get("PYTHONPATH")
    return src + (os.pathsep + rest if rest else "")


def serve_until_signal(config: MockConfig, truth_file: str | None = None) -> int:
    """Run in the foreground: print where it listens, stop on SIGINT/SIGTERM, then
    write the truth to ``truth_file`` (JSON). Used by ``servelab mock``."""
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(config, truth_file))
    finally:
        loop.close()
    return 0


async def _serve(config: MockConfig, truth_file: str | None) -> None:
    server = MockServer(config)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"{LISTENING}{server.url} (model {config.model}, ttft {config.ttft_ms:g} ms, "
          f"itl {config.itl_ms:g} ms)", flush=True)
    await stop.wait()
    await server.stop()
    if truth_file:
        Path(truth_file).write_text(json.dumps(server.truth_dict(), separators=(",", ":")))
