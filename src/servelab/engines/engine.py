"""A running engine: launch, wait ready, report memory, stop — and never orphan it.

    with start_engine(spec, log_dir) as engine:
        engine.base_url, engine.model, engine.memory_report
    # here every process of the engine's group is gone and its port is free

``start_engine`` launches at call time and returns the engine, which is its own
context manager; ``stop()`` is idempotent for callers that cannot use ``with``.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import threading
from pathlib import Path

from servelab.engines import guard, process
from servelab.engines.kinds import EngineKind, kind_of
from servelab.engines.memory import (MemoryReport, parse_cache_config_info, parse_memory_report,
                                     parse_stated_args, with_cache_info)
from servelab.engines.ready import http_get, last_lines, probes_pass, served_model, wait_ready
from servelab.engines.spec import EngineSpec
from servelab.engines.vllm import served_dtype, vllm_build
from servelab.errors import EngineError, InputError

ENGINE_LOG = "engine.log"  # the engine's output, written in the folder it is started with

PORT_FREE_WAIT_S = 5.0


class Engine:
    """Handle on one started engine. Attributes are set once ready; read-only by convention."""

    def __init__(self, spec: EngineSpec, kind: EngineKind, log_path: Path) -> None:
        self.spec, self.kind, self.log_path = spec, kind, log_path
        self.base_url = spec.base_url
        self.model = spec.model
        self.memory_report = MemoryReport()
        self.stated_args: dict = {}  # what vLLM's log says it was given (memory.parse_stated_args)
        self.ready_s: float | None = None
        self._proc: subprocess.Popen | None = None
        self._watchdog: subprocess.Popen | None = None
        self._stopped = False
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The engine's leader pid, which is also its process-group id; None for external."""
        return self._proc.pid if self._proc else None

    def alive(self) -> bool:
        if self._stopped:
            return False
        if self._proc is None:  # external: alive while it answers
            return probes_pass(self.kind.probes(self.spec))
        return self._proc.poll() is None

    def last_log_lines(self, n: int = 20) -> list[str]:
        return last_lines(self.log_path, n)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<Engine {self.spec.name} {self.spec.kind} {self.base_url} pid={self.pid}>"

    def stop(self) -> None:
        """Stop the whole process group, verify it is gone and the port free. Idempotent."""
        with self._lock, guard.signals_deferred():
            if self._stopped:
                return
            self._stopped = True
            try:
                self._stop_process()
            finally:
                guard.untrack(self)

    def _stop_process(self) -> None:
        if self._proc is None:
            return
        survivors = process.stop_group(self._proc, self.kind.stop_grace_s)
        # Dismissed only once the group is gone: until then it is our net if we die mid-stop.
        if self._watchdog is not None and not survivors:
            guard.dismiss(self._watchdog)
        if survivors:
            raise EngineError(f"engine {self.spec.name!r}: processes survived SIGKILL: {process.describe(survivors)}")
        if not process.wait_port_free(self.spec.host, self.spec.port, PORT_FREE_WAIT_S):
            raise EngineError(f"engine {self.spec.name!r} stopped but port {self.spec.port} is still in use")


def start_engine(spec: EngineSpec, log_dir: Path, progress: bool = True) -> Engine:
    """Launch ``spec``, wait until it answers, read its memory report.

    Raises InputError before launching (bad spec, port taken, model missing) and
    EngineError if it dies or times out while starting; either way nothing is left running.
    """
    spec = kind_of(spec).resolve(spec)
    kind = kind_of(spec)
    argv = kind.command(spec)
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    engine = Engine(spec, kind, log_dir / ENGINE_LOG)
    env = {**kind.environment(spec), **spec.env}
    _write_header(engine.log_path, spec, argv, env)
    try:
        if argv is not None:
            _launch(engine, argv, env)
        _become_ready(engine, progress)
    except BaseException:  # Ctrl-C and SIGTERM (Terminated) too: stop what we started
        engine.stop()
        raise
    return engine


def _launch(engine: Engine, argv: list[str], extra_env: dict[str, str]) -> None:
    spec = engine.spec
    if process.port_in_use(spec.host, spec.port):
        raise InputError(f"port {spec.port} on {spec.host} is already in use; choose another with --port")
    # Unbuffered: Python engines' prints reach the log (and the progress line) as they happen.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra_env}
    try:
        engine._proc = process.launch(argv, env, engine.log_path)
    except OSError as exc:  # not found, not executable
        raise EngineError(f"engine {spec.name!r}: cannot run {argv[0]}: {exc}") from None
    guard.track(engine)
    engine._watchdog = guard.start_watchdog(engine._proc.pid, engine.kind.stop_grace_s)


def _become_ready(engine: Engine, progress: bool) -> None:
    spec, proc = engine.spec, engine._proc
    exited = proc.poll if proc else (lambda: None)
    engine.ready_s = wait_ready(spec.name, engine.kind.probes(spec), spec.ready_timeout_s,
                                exited, engine.log_path, progress)
    if proc is not None and engine.kind.listens_itself:
        _answered_by_ours(engine)
    engine.model = served_model(engine.base_url, spec.model)
    engine.memory_report = _memory_report(engine)
    engine.stated_args = parse_stated_args(_log_text(engine))


def _answered_by_ours(engine: Engine) -> None:
    """The server that answered is the one servelab started, not one that took the port while it
    was starting (the port was free at launch; the engine then failed to bind, or has yet to)."""
    spec = engine.spec
    pid = process.port_listener(spec.port)
    if pid is not None and not process.in_group(pid, engine._proc.pid):
        raise EngineError(
            f"engine {spec.name!r}: port {spec.port} answered, but from pid {pid}, not the engine servelab "
            f"started: another server took the port while it was starting (its log: {engine.log_path})")


def _memory_report(engine: Engine) -> MemoryReport:
    report = parse_memory_report(_log_text(engine))
    status, body = http_get(f"{engine.base_url}/metrics")
    if status == 200:
        report = with_cache_info(report, parse_cache_config_info(body.decode("utf-8", "replace")))
    if engine.spec.kind == "vllm" and vllm_build() == "cpu":  # the dtype servelab chose, and why
        dtype, why = served_dtype(engine.spec.args)
        report = dataclasses.replace(report, dtype=dtype, dtype_reason=why)
    return report


def _log_text(engine: Engine) -> str:
    try:
        return engine.log_path.read_text(errors="replace")
    except OSError:  # an external engine's log is a header servelab wrote; a log removed is no report
        return ""


def _write_header(log_path: Path, spec: EngineSpec, argv: list[str] | None, env: dict[str, str]) -> None:
    # One line saying what ran (and with which extra environment), so a log read
    # months later can be reproduced. Truncates: the log is this run's, whole.
    what = shlex.join(argv) if argv else f"external server at {spec.base_url} (no process, no log)"
    assignments = "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(env.items()))
    log_path.write_text(f"# servelab engine {spec.name!r} ({spec.kind}): {assignments}{what}\n")
