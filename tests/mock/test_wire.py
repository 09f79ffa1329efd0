"""The mock's own sockets: kernel arrival stamps, flow control, closing."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from time import perf_counter_ns

import pytest

from servelab.mock import wire

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="SO_TIMESTAMPNS is Linux's")


def loops():
    import uvloop

    return [pytest.param(asyncio.new_event_loop, id="asyncio"), pytest.param(uvloop.new_event_loop, id="uvloop")]


class Recorder:
    def __init__(self) -> None:
        self.transport = None
        self.reads: list[tuple[bytes, int | None, int]] = []
        self.events: list[str] = []
        self.lost: list[object] = []
        self.close_on_eof = True

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes, wire_ns: int | None) -> None:
        self.reads.append((data, wire_ns, perf_counter_ns()))

    def eof_received(self) -> None:
        self.events.append("eof")
        if self.close_on_eof:
            self.transport.close()

    def pause_writing(self) -> None:
        self.events.append("pause")

    def resume_writing(self) -> None:
        self.events.append("resume")

    def connection_lost(self, exc) -> None:
        self.lost.append(exc)


def run_until(loop, cond, timeout=5.0) -> None:
    async def wait():
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.001)
    loop.run_until_complete(wait())


@pytest.fixture(params=loops())
def served(request):
    """(loop, the server side's Recorder, a connected client socket)."""
    loop = request.param()
    protocols: list[Recorder] = []
    listener = wire.Listener(loop, "127.0.0.1", 0, lambda: protocols.append(Recorder()) or protocols[-1])
    client = socket.create_connection(("127.0.0.1", listener.port))
    run_until(loop, lambda: protocols)
    yield loop, protocols[0], client
    client.close()
    listener.close()
    loop.close()


@linux_only
def test_a_request_read_late_keeps_the_time_it_arrived(served):
    loop, proto, client = served
    before = perf_counter_ns()
    client.sendall(b"GET / HTTP/1.1\r\n\r\n")
    after = perf_counter_ns()
    time.sleep(0.05)  # the loop is not running: the bytes wait in the socket, as on a busy mock
    run_until(loop, lambda: proto.reads)
    data, wire_ns, read_ns = proto.reads[0]
    assert data == b"GET / HTTP/1.1\r\n\r\n"
    # Loopback delivers (and the kernel stamps) inside the sender's send call, however
    # long a busy machine makes that call: the stamp is bracketed by it...
    assert before <= wire_ns <= after
    assert read_ns - wire_ns >= 50_000_000  # ...and the read came after the 50 ms sleep


def test_writes_past_the_high_water_mark_pause_and_resume_the_protocol(served):
    loop, proto, client = served
    block = bytes(range(256)) * 1024  # 16 MiB in all: more than loopback's socket buffers hold unread
    for _ in range(64):
        proto.transport.write(block)
    assert proto.events == ["pause"] and proto.transport.get_write_buffer_size() > wire.HIGH_WATER
    got = bytearray()
    client.setblocking(False)

    def drain() -> bool:
        try:
            got.extend(client.recv(1 << 20))
        except BlockingIOError:
            pass
        return len(got) == 64 * len(block)
    run_until(loop, drain)
    assert proto.events == ["pause", "resume"] and got == block * 64


def test_close_sends_what_was_queued_then_reports_the_loss(served):
    loop, proto, client = served
    proto.transport.write(b"x" * (4 << 20))
    proto.transport.close()
    assert proto.transport.is_closing() and proto.lost == []
    client.setblocking(False)
    got = bytearray()

    def drain() -> bool:
        try:
            chunk = client.recv(1 << 20)
        except BlockingIOError:
            return False
        got.extend(chunk)
        return not chunk  # EOF: the server closed after the last byte
    run_until(loop, drain)
    run_until(loop, lambda: proto.lost)
    assert len(got) == 4 << 20 and proto.lost == [None]


def test_the_client_closing_ends_the_connection(served):
    loop, proto, client = served
    client.sendall(b"bye")
    client.close()
    run_until(loop, lambda: proto.lost)
    assert [r[0] for r in proto.reads] == [b"bye"] and proto.transport.is_closing()


def test_a_reset_connection_is_lost_with_its_error(served):
    loop, proto, client = served
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    client.close()  # linger 0: RST
    run_until(loop, lambda: proto.lost)
    assert isinstance(proto.lost[0], ConnectionResetError)


def test_a_client_that_shuts_its_sending_side_still_gets_what_is_written_after(served):
    loop, proto, client = served
    proto.close_on_eof = False  # like the mock: finish the response in progress, then close
    client.sendall(b"GET / HTTP/1.1\r\n\r\n")
    client.shutdown(socket.SHUT_WR)
    run_until(loop, lambda: "eof" in proto.events)
    assert not proto.transport.is_closing()
    proto.transport.write(b"late answer")
    proto.transport.close()
    run_until(loop, lambda: proto.lost)
    client.settimeout(5)
    got = bytearray()
    while chunk := client.recv(1 << 16):
        got += chunk
    assert got == b"late answer"


def test_a_protocol_that_raises_aborts_its_connection_and_reports_it(served):
    loop, proto, client = served
    reported = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))

    def broken(data, wire_ns):
        raise ValueError("bug")
    proto.data_received = broken
    client.sendall(b"x")
    run_until(loop, lambda: proto.lost)
    assert isinstance(proto.lost[0], ValueError) and proto.transport.is_closing()
    assert reported[0]["message"] == "mock connection: broken failed"
    client.settimeout(5)
    assert client.recv(10) == b""  # the client sees the connection end, not a hang
