"""Throughput of the mock on one core (not a pytest file; run it by hand).

    python tests/mock/perf_mock.py [--server-cpu 1 --client-cpu 0]

The mock runs in a child process pinned to one core; this process is the load, pinned
to another, with a raw asyncio protocol that only finds the end of each response (so it
reads far faster than the mock writes). Events/s and lateness come from the mock's truth.

1. paced: 512 streams, TTFT 50 ms, ITL 10 ms, back-to-back requests for --seconds:
   events/s written, lateness (write − due) percentiles, mock CPU use.
2. zero delay: 64 streams × 1000 tokens at once, --rounds times, then back to back for
   --seconds: events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import numpy as np

from servelab.mock import MockConfig, lateness_ns, run_in_subprocess
from servelab.mock.server import new_event_loop

END = b"\r\n0\r\n\r\n"


class Loader(asyncio.Protocol):
    """Sends a streamed completion, reads to the chunked terminator, repeats."""

    def __init__(self, body: bytes, repeat_until: float, done: asyncio.Future, counter: list) -> None:
        self.req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
        self.until, self.done, self.counter, self.tail = repeat_until, done, counter, b""

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.req)

    def data_received(self, data: bytes) -> None:
        tail = (self.tail + data[-8:])[-8:]
        self.tail = tail
        if tail.endswith(END):
            self.counter[0] += 1
            self.tail = b""
            if time.monotonic() < self.until:
                self.transport.write(self.req)
            else:
                self.transport.close()
                if not self.done.done():
                    self.done.set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def load(port: int, conns: int, max_tokens: int, seconds: float) -> tuple[float, int]:
    loop = asyncio.get_running_loop()
    body = b'{"model":"mock","prompt":"the quick brown fox","max_tokens":%d,"stream":true}' % max_tokens
    until = time.monotonic() + seconds
    counter, futs = [0], []
    t0 = time.perf_counter()
    for _ in range(conns):
        fut = loop.create_future()
        await loop.create_connection(lambda f=fut: Loader(body, until, f, counter), "127.0.0.1", port)
        futs.append(fut)
    await asyncio.gather(*futs)
    return time.perf_counter() - t0, counter[0]


def cpu_seconds(pid: int, which: slice = slice(11, 13)) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/PID/stat)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[which]) / os.sysconf("SC_CLK_TCK")


def run_load(mock, conns: int, max_tokens: int, seconds: float) -> tuple[float, int, float]:
    pid = mock._proc.pid
    cpu0, sys0 = cpu_seconds(pid), cpu_seconds(pid, slice(12, 13))
    loop = new_event_loop()
    try:
        wall, done = loop.run_until_complete(load(mock.port, conns, max_tokens, seconds))
    finally:
        loop.close()
    cpu, sys_ = cpu_seconds(pid) - cpu0, cpu_seconds(pid, slice(12, 13)) - sys0
    print(f"  (mock CPU {cpu:.2f} s, of which kernel {sys_:.2f} s)")
    return wall, done, cpu


def paced(args) -> None:
    cfg = MockConfig(ttft_ms=50, itl_ms=10, port=0)
    # every request is sent at once and re-sent the moment it ends, so all 512 streams are
    # due at the same instant every 10 ms: the burst is the worst case for lateness.
    with run_in_subprocess(cfg, cpu=[args.server_cpu]) as mock:
        run_load(mock, args.streams, 100, 1.0)  # warm up: connections, caches
        mock.reset_truth()
        wall, done, cpu = run_load(mock, args.streams, args.tokens, args.seconds)
        truth = mock.truth()
    events = sum(len(r.event_ns) for r in truth.requests)
    late = np.array([x for r in truth.requests if r.finish == "ok" for x in lateness_ns(r, 50, 10)]) / 1e6
    print(f"paced: {args.streams} streams, ttft 50 ms, itl 10 ms, {args.tokens} tokens/request, {wall:.1f} s")
    print(f"  {done} requests, {events} events → {events / wall:,.0f} events/s; mock CPU {cpu / wall:.0%} of one core")
    print(f"  mock CPU per event {cpu / events * 1e6:.1f} µs → one free core could write ≈ {events / cpu:,.0f} events/s")
    print("  lateness ms: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f"
          % tuple(np.percentile(late, [50, 90, 99, 99.9, 100])))


def zero_delay(args) -> None:
    cfg = MockConfig(port=0)
    with run_in_subprocess(cfg, cpu=[args.server_cpu]) as mock:
        run_load(mock, 64, 1000, 0)  # warm up
        best = 0.0
        for _ in range(args.rounds):
            wall, done, cpu = run_load(mock, 64, 1000, 0)
            best = max(best, done * 1000 / wall)
            print(f"zero delay: 64 × 1000 tokens in {wall * 1e3:.0f} ms → {done * 1000 / wall:,.0f} events/s "
                  f"(mock CPU {cpu / wall:.0%})")
        wall, done, cpu = run_load(mock, 64, 1000, args.seconds)
        print(f"zero delay sustained: 64 streams × 1000 tokens back to back for {wall:.1f} s → "
              f"{done * 1000 / wall:,.0f} events/s (mock CPU {cpu / wall:.0%})")
    print(f"zero delay best single round: {best:,.0f} events/s")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--server-cpu", type=int, default=1)
    p.add_argument("--client-cpu", type=int, default=0)
    p.add_argument("--streams", type=int, default=512)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", choices=["paced", "zero"], default=None)
    args = p.parse_args()
    os.sched_setaffinity(0, {args.client_cpu})
    if args.only in (None, "paced"):
        paced(args)
    if args.only in (None, "zero"):
        zero_delay(args)


if __name__ == "__main__":
    main()
