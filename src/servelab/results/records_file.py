"""The per-request records file, written as requests complete, so that servelab killed
hard (SIGKILL, OOM, power loss) loses at most a short tail of its run.

While the run goes on, lines go to a hidden ``.servelab-*.records.jsonl.part`` and a
sidecar ``….part.json`` beside it says what they are: written when the file is opened
(the run's spec, the requests meant, servelab's version, the flush policy, the pid) and
again at the first record (t0 on the perf_counter clock and its wall-clock anchor), and then, at most every ``FLUSH_S``,
with the number of requests the run has sent (``sent``): after a kill, the requests not sent
by that count are the ones never sent. Its error is bounded by that period: a request begun
in the last ``FLUSH_S`` before the kill is counted as never sent, and one a sender had begun
but not yet written counted as sent.
``servelab results recover DIR`` (results/recover.py) reads the pair back. ``close``
gives the records their final name and removes the sidecar; ``discard`` removes both.

Flush policy: lines are kept here and written to the file (one ``os.write``: whole lines
only) every ``FLUSH_RECORDS`` records or ``FLUSH_S`` seconds, whichever comes first; a run
calls ``tick`` every 0.1 s so a quiet tail is written too. The OS holds what was written
through a kill of the process; ``fsync`` every ``FSYNC_S`` covers power loss. With the
digest's age (records are made at most ``FLUSH_S`` after their response ended, in the
run that writes this file), a kill loses at most the requests answered in the last
~1 s, and never more than ``FLUSH_RECORDS`` written-but-unflushed lines.

A write that fails (ENOSPC, EIO) truncates the file back to its last whole line, keeps
the reason in ``failure`` and writes nothing more; the run's tick sees it and ends the
run (reason "disk full"), and the run says it in one line.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from servelab.metrics.summary import NS_PER_MS
from servelab.records import RequestRecord
from servelab.metrics.tally import Tally

FLUSH_RECORDS = 256
FLUSH_S = 0.5
FSYNC_S = 5.0
PART_PREFIX, PART_SUFFIX = ".servelab-", ".records.jsonl.part"
SIDECAR_SUFFIX = ".json"  # the sidecar is the part's name plus this
FLUSH_POLICY = {"records": FLUSH_RECORDS, "seconds": FLUSH_S, "fsync_s": FSYNC_S,
                "loses_at_most": f"the requests answered in the last ~{2 * FLUSH_S:g} s (digest age + flush), "
                                 f"and at most {FLUSH_RECORDS} unflushed lines"}
# bytes a record line takes, for the free-space check: its fixed keys, plus its token times
LINE_BYTES, TOKEN_BYTES = 600, 12


def record_dict(r: RequestRecord, t0_ns: int) -> dict:
    """One JSONL line: every instant in ms from t0, plus the derived latencies."""
    ms = lambda t: round((t - t0_ns) / NS_PER_MS, 4)  # noqa: E731
    return {
        "request_id": r.request_id, "prompt_len": r.prompt_len, "expected_output_len": r.expected_output_len,
        "prompt_len_source": r.prompt_len_source,
        "output_tokens": r.output_tokens, "output_tokens_source": r.output_tokens_source,
        "intended_send_ms": ms(r.intended_ns), "dispatched_ms": ms(r.dispatched_ns),
        "sent_ms": ms(r.sent_ns), "done_ms": ms(r.done_ns),
        "schedule_lag_ms": r.lag_ns / NS_PER_MS, "client_queue_ms": r.queue_ns / NS_PER_MS,
        "ttft_ms": r.ttft_ns / NS_PER_MS if r.success else None,
        "e2el_ms": r.e2el_ns / NS_PER_MS if r.success else None,
        "token_ms": [ms(t) for t in r.token_ns], "token_counts": list(r.token_counts),
        "error": r.error, "http_status": r.http_status, "finished": r.finished,
        **_turn_keys(r), **_reasoning_keys(r), **({"trace_id": r.trace_id} if r.trace_id else {}),
    }


def _turn_keys(r: RequestRecord) -> dict:
    """Multi-turn records say which conversation and turn they were (0-based)."""
    return {} if r.turn is None else {"conversation_id": r.conversation_id, "turn": r.turn}


def _reasoning_keys(r: RequestRecord) -> dict:
    """Only for streams that carried reasoning: when it began and when the answer did."""
    if not r.first_reasoning_ns:
        return {}
    answer = (r.first_answer_ns - r.sent_ns) / NS_PER_MS if r.first_answer_ns else None
    return {"ttft_reasoning_ms": (r.first_reasoning_ns - r.sent_ns) / NS_PER_MS, "ttft_answer_ms": answer}


def sidecar_of(part: Path) -> Path:
    return part.with_name(part.name + SIDECAR_SUFFIX)


def check_room(folder: str | Path, requests: int, tokens_each: int) -> None:
    """Before a run: the folder can be written and holds the records expected; else one line."""
    from servelab.errors import InputError

    folder = Path(folder)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the results folder {folder}: {exc.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"the results folder {folder} is not writable")
    need = requests * (LINE_BYTES + TOKEN_BYTES * max(tokens_each, 1))
    free = shutil.disk_usage(folder).free
    if free < need:
        raise InputError(f"not enough space in {folder} for this run's records: {free / 1e6:.1f} MB free, "
                         f"~{need / 1e6:.1f} MB expected ({requests} requests)")


class RecordsFile:
    """Records appended as they complete, one JSON line each (see the module's docstring).
    ``header``: what the sidecar says of the run; ``writer``: os.write, or a test's."""

    def __init__(self, folder: str | Path, header: dict | None = None, writer=os.write) -> None:
        os.makedirs(folder, exist_ok=True)
        self.fd, tmp = tempfile.mkstemp(prefix=PART_PREFIX, suffix=PART_SUFFIX, dir=folder)
        self.tmp, self.writer = Path(tmp), writer
        self.header = {"servelab_records": 1, "pid": os.getpid(), "flush": FLUSH_POLICY, **(header or {})}
        self.lines: list[str] = []
        self.written = 0  # bytes on disk, all whole lines
        self.count = 0  # lines written or waiting
        self.failure: str | None = None
        self.last_flush = self.last_sync = self.last_sent = time.monotonic()
        self._write_sidecar()

    def _write_sidecar(self) -> None:
        write_atomic(sidecar_of(self.tmp), json.dumps(self.header))

    def write(self, r: RequestRecord, t0_ns: int) -> None:
        if self.count == 0:  # t0 is known from the first record on: anchor it to the wall clock
            self.header.update(t0_perf_ns=t0_ns, wall_start=time.time() - (time.perf_counter_ns() - t0_ns) / 1e9)
            self._write_sidecar()
        self.count += 1
        if self.failure is None:
            self.lines.append(json.dumps(record_dict(r, t0_ns)) + "\n")
            if len(self.lines) >= FLUSH_RECORDS or time.monotonic() - self.last_flush >= FLUSH_S:
                self.flush()

    def tick(self, sent: int | None = None) -> str | None:
        """Every 0.1 s while the run goes on: write a quiet tail, and the count of requests
        ``sent`` so far (when known); the failure, if a write failed."""
        if self.lines and time.monotonic() - self.last_flush >= FLUSH_S:
            self.flush()
        if sent is not None and sent != self.header.get("sent") and time.monotonic() - self.last_sent >= FLUSH_S:
            self.sent(sent)
        return self.failure

    def sent(self, n: int) -> None:
        """The sidecar's count of requests sent (``results recover``'s never-sent)."""
        self.last_sent = time.monotonic()
        self.header["sent"] = n
        try:
            self._write_sidecar()
        except OSError:  # a full disk: the records' own write says it; the older count stays
            pass

    def flush(self) -> None:
        """Write the waiting lines at once; on failure cut the file back to its last whole line."""
        data, self.lines = "".join(self.lines).encode(), []
        self.last_flush = time.monotonic()
        try:
            view = memoryview(data)
            while view:
                view = view[self.writer(self.fd, view):]
            self.written += len(data)
            if self.last_flush - self.last_sync >= FSYNC_S:
                os.fsync(self.fd)
                self.last_sync = self.last_flush
        except OSError as exc:
            os.ftruncate(self.fd, self.written)
            os.lseek(self.fd, self.written, os.SEEK_SET)
            name = "disk full" if exc.errno == errno.ENOSPC else "cannot write"
            self.failure = f"{name} writing the records ({exc.strerror or exc}) in {self.tmp.parent}"

    def close(self, path: Path) -> None:
        self.flush()
        os.close(self.fd)
        os.chmod(self.tmp, 0o644)  # mkstemp's 0600 is for the hidden part; results are shared files
        try:
            os.replace(self.tmp, path)
        except OSError:  # another file system
            shutil.move(self.tmp, path)
        sidecar_of(self.tmp).unlink(missing_ok=True)

    def keep(self) -> Path:
        """The run failed but what it wrote is kept (a full disk): the part, for recovery."""
        if self.failure is None:
            self.flush()
        os.close(self.fd)
        return self.tmp

    def discard(self) -> None:
        os.close(self.fd)
        self.tmp.unlink(missing_ok=True)
        sidecar_of(self.tmp).unlink(missing_ok=True)


def write_atomic(path: Path, text) -> None:
    """``text`` (a string, or its pieces) as ``path``, whole or not at all: a temporary file
    beside it, then a rename."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines([text] if isinstance(text, str) else text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RecordSink:
    """A bench's ``records.RecordSink``: every record of the run, once, as it is made — by
    this process's run or returned by a worker or a Ray shard — into the run's ``tally``
    (what the summary and the result are computed from) and the records file. Whoever
    made it reads ``tally`` after the run."""

    def __init__(self, tally: Tally, file: RecordsFile | None = None) -> None:
        self.tally, self.file = tally, file
        self.begun = None  # from t0: how many requests the run has sent so far (pacer.Counters.begun)

    def watch(self, begun) -> None:
        """At t0: the run's count of requests sent, for the records file's sidecar."""
        self.begun = begun

    def add(self, i: int, r: RequestRecord, t0_ns: int) -> None:
        self.tally.add(i, r)
        if self.file is not None:
            self.file.write(r, t0_ns)

    def tick(self) -> str | None:
        """The run's periodic hook: the records file's flush; a reason to end the run, if any."""
        if self.file is None:
            return None
        return self.file.tick(self.begun() if self.begun is not None else None)
