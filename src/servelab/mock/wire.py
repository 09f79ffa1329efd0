"""The mock's sockets, read with the kernel's arrival stamp of every read.

Why not the loop's own transports: at 512 streams the mock's core is busy, so a request
can sit in the socket buffer for milliseconds before ``data_received`` runs. Stamping it
then would hand that wait to whoever is measured against the truth — the client — though
the client had sent it on time. Linux stamps each segment as it arrives
(``SO_TIMESTAMPNS``) and gives the stamp of the last one consumed with ``recvmsg``; the
loop's transports read with ``recv`` and drop it, so the mock drives its sockets itself
through ``add_reader``/``add_writer`` (which uvloop and asyncio both offer).

A stamp is on CLOCK_REALTIME; it is moved to ``perf_counter_ns`` (CLOCK_MONOTONIC) by the
offset between the two clocks read when the bytes are read (microseconds to milliseconds
later): only a clock step inside that gap could skew it.

``Listener`` accepts; ``SocketTransport`` is the small part of ``asyncio.Transport`` the
mock uses (write with flow control, close) and calls its protocol's ``connection_made``,
``data_received(data, wire_ns)``, ``eof_received`` (the client will send nothing more; it
may still read), ``pause_writing``/``resume_writing`` and ``connection_lost``. ``wire_ns``
is None where the kernel gave no stamp. An exception from the protocol aborts the
connection (as asyncio's transports do), never leaves it hanging.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
import sys
import time
from time import perf_counter_ns

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
_STAMP = struct.Struct("@qq")  # struct timespec
_ANC_SIZE = socket.CMSG_SPACE(_STAMP.size) if hasattr(socket, "CMSG_SPACE") else 0
READ_SIZE = 256 * 1024
HIGH_WATER = 64 * 1024  # bytes queued for a client before the protocol is told to pause
LOW_WATER = HIGH_WATER // 4  # ... and drained to before it is told to resume
ACCEPTS_PER_WAKE = 64
# Out of descriptors or memory: the connection stays in the backlog; stop listening a moment
# rather than spin on a readable listener (what asyncio does too).
ACCEPT_BACKOFF = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
ACCEPT_PAUSE_S = 1.0


def enable_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp arriving data; False where it cannot (not Linux)."""
    if SO_TIMESTAMPNS is None or not _ANC_SIZE:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def stamp_to_perf_ns(ancdata: list) -> int | None:
    """The kernel's arrival stamp in a ``recvmsg`` answer, on the ``perf_counter_ns`` clock."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            sec, nsec = _STAMP.unpack_from(data)
            offset = time.time_ns() - perf_counter_ns()
            return sec * 1_000_000_000 + nsec - offset
    return None


class SocketTransport:
    __slots__ = ("_loop", "_sock", "_fd", "_protocol", "_buf", "_paused", "_closing", "_closed", "_stamps")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol) -> None:
        self._loop, self._sock, self._fd, self._protocol = loop, sock, sock.fileno(), protocol
        self._buf = bytearray()
        self._paused = self._closing = self._closed = False
        self._stamps = enable_stamps(sock)
        protocol.connection_made(self)
        loop.add_reader(self._fd, self._read_ready)

    def is_closing(self) -> bool:
        return self._closing

    def get_extra_info(self, name: str, default=None):
        """asyncio's Transport API, the part the mock asks: the client's address (``peername``)."""
        if name != "peername":
            return default
        try:
            return self._sock.getpeername()
        except OSError:
            return default

    def get_write_buffer_size(self) -> int:
        return len(self._buf)

    def write(self, data: bytes) -> None:
        if self._closing:
            return
        if not self._buf:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._abort(exc)
                return
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
            self._loop.add_writer(self._fd, self._write_ready)
        self._buf += data
        if not self._paused and len(self._buf) > HIGH_WATER:
            self._paused = True
            self._call(self._protocol.pause_writing)

    def close(self) -> None:
        """Stop reading; close once what was written has gone out."""
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        if not self._buf:
            self._finish(None)

    def _read_ready(self) -> None:
        try:
            data, anc, _flags, _addr = self._sock.recvmsg(READ_SIZE, _ANC_SIZE if self._stamps else 0)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._abort(exc)
            return
        if not data:  # the client shut its sending side: nothing more will come; it may still read
            self._loop.remove_reader(self._fd)
            self._call(self._protocol.eof_received)
            return
        self._call(self._protocol.data_received, data, stamp_to_perf_ns(anc) if anc else None)

    def _call(self, method, *args) -> None:
        try:
            method(*args)
        except Exception as exc:  # a protocol bug must not leave the client hanging
            self._abort(exc)
            self._loop.call_exception_handler({"message": f"mock connection: {method.__name__} failed",
                                               "exception": exc})

    def _write_ready(self) -> None:
        try:
            sent = self._sock.send(self._buf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._abort(exc)
            return
        del self._buf[:sent]
        if self._paused and len(self._buf) <= LOW_WATER and not self._closing:
            self._paused = False
            self._call(self._protocol.resume_writing)
        if self._buf:
            return
        self._loop.remove_writer(self._fd)
        if self._closing:
            self._finish(None)

    def abort(self) -> None:
        """Close now, dropping what was not sent."""
        if not self._closed:
            self._abort(None)

    def _abort(self, exc: Exception | None) -> None:
        self._closing = True
        self._buf.clear()
        self._loop.remove_reader(self._fd)
        self._finish(exc)

    def _finish(self, exc: Exception | None) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.remove_writer(self._fd)
        self._sock.close()
        self._loop.call_soon(self._protocol.connection_lost, exc)


class Listener:
    """A listening socket that hands each accepted connection to ``factory()``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int, factory, backlog: int = 4096):
        family, kind, proto, _name, addr = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]  # "": every interface
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            enable_stamps(sock)  # inherited by accepted sockets; set again on each to be sure
            sock.bind(addr)
            sock.listen(backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._loop, self._sock, self._factory = loop, sock, factory
        self.port = sock.getsockname()[1]
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                conn, _addr = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in ACCEPT_BACKOFF:
                    fd = self._sock.fileno()
                    self._loop.remove_reader(fd)
                    self._loop.call_later(ACCEPT_PAUSE_S, self._listen_again, fd)
                return  # anything else (a connection reset before accept): it is gone; go on
            conn.setblocking(False)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            SocketTransport(self._loop, conn, self._factory())

    def _listen_again(self, fd: int) -> None:
        if self._sock.fileno() == fd:  # not closed meanwhile
            self._loop.add_reader(fd, self._accept)

    def close(self) -> None:
        if self._sock.fileno() >= 0:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
