"""The raw HTTP client against scripted servers: framing, keep-alive, failures."""

import asyncio

from servelab.client.http import Pool


def chunked(*pieces: bytes) -> bytes:
    out = b""
    for p in pieces:
        out += f"{len(p):x}\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n\r\n"


HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


async def serve(replies, *, split=None, close_after=False):
    """A server answering each request with the next scripted reply, written in
    slices of ``split`` bytes with a pause between them."""
    seen = []

    async def handle(reader, writer):
        while replies:
            head = await reader.readuntil(b"\r\n\r\n")
            length = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")]
            body = await reader.readexactly(length[0]) if length else b""
            seen.append((head, body, writer))  # the writer itself, so two connections never share an id
            data = replies.pop(0)
            step = split or len(data)
            for i in range(0, len(data), step):
                writer.write(data[i:i + step])
                await writer.drain()
                if split:
                    await asyncio.sleep(0.002)
            if close_after:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


def run(coro):
    return asyncio.run(coro)


def test_chunked_stream_split_at_every_byte_is_reassembled():
    async def main():
        body = chunked(b"data: a\n\n", b"data: [DONE]\n\n")
        server, port, _ = await serve([HEAD_CHUNKED + body], split=7)
        pool = Pool(f"http://127.0.0.1:{port}")
        resp = await pool.request("POST", "/v1/completions", b"{}")
        pool.close(); server.close()
        return resp

    resp = run(main())
    assert resp.status == 200 and resp.error is None and not resp.closed_early
    assert resp.body() == b"data: a\n\ndata: [DONE]\n\n"
    times = [t for t, _ in resp.reads]
    assert times == sorted(times) and times[-1] > times[0]  # stamped as they arrived


def test_keep_alive_reuses_one_connection_and_sends_host_and_length():
    async def main():
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        server, port, seen = await serve([ok, ok])
        pool = Pool(f"http://127.0.0.1:{port}")
        a = await pool.request("POST", "/x", b"12345", {"X-Request-Id": "r1"})
        b = await pool.request("GET", "/y")
        pool.close(); server.close()
        return a, b, seen, port

    a, b, seen, port = run(main())
    assert a.body() == b"ok" and b.body() == b"ok"
    assert seen[0][2] == seen[1][2]  # same connection
    head = seen[0][0].decode()
    assert head.startswith("POST /x HTTP/1.1\r\n") and f"Host: 127.0.0.1:{port}" in head
    assert "X-Request-Id: r1" in head and seen[0][1] == b"12345"


def test_server_closing_after_each_response_is_not_a_failure():
    """A server that says ``Connection: close`` and closes after every response (some proxies
    do): each request succeeds, none is counted failed, and the pool opens a new connection
    for the next one instead of keeping the closed one."""
    async def main():
        reply = HEAD_CHUNKED.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n") + chunked(b"data: x\n\n")
        server, port, seen = await serve([reply] * 3, close_after=True)
        pool = Pool(f"http://127.0.0.1:{port}")
        responses, kept = [], []
        for _ in range(3):
            responses.append(await pool.request("POST", "/v1/completions", b"{}"))
            kept.append(len(pool._idle))  # connections the pool would hand to the next request
        pool.close(); server.close()
        return responses, kept, seen

    responses, kept, seen = run(main())
    assert [(r.status, r.error, r.closed_early, r.body()) for r in responses] == [(200, None, False, b"data: x\n\n")] * 3
    assert kept == [0, 0, 0]  # the closed connection was dropped, not kept for reuse
    assert len(seen) == 3 and len({id(writer) for _, _, writer in seen}) == 3  # one new connection per request


def test_body_until_close_and_mid_stream_close():
    async def main():
        until_close = b"HTTP/1.1 200 OK\r\n\r\ndata: a\n\n"
        server, port, _ = await serve([until_close], close_after=True)
        pool = Pool(f"http://127.0.0.1:{port}")
        a = await pool.request("POST", "/v1/completions", b"{}")
        server.close()
        cut = HEAD_CHUNKED + b"9\r\ndata: a\n\n\r\n"  # no terminating chunk
        server, port, _ = await serve([cut], close_after=True)
        pool2 = Pool(f"http://127.0.0.1:{port}")
        b = await pool2.request("POST", "/v1/completions", b"{}")
        pool.close(); pool2.close(); server.close()
        return a, b

    a, b = run(main())
    assert a.error is None and not a.closed_early and a.body() == b"data: a\n\n"
    assert b.closed_early and b.body() == b"data: a\n\n"


def test_refused_connection_is_an_error_value_not_an_exception():
    async def main():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close(); await server.wait_closed()
        return await Pool(f"http://127.0.0.1:{port}").request("GET", "/health")

    resp = run(main())
    assert resp.status == 0 and "ConnectionRefusedError" in resp.error


def test_error_status_with_json_body():
    async def main():
        body = b'{"error": {"message": "bad"}}'
        reply = b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        server, port, _ = await serve([reply])
        pool = Pool(f"http://127.0.0.1:{port}")
        resp = await pool.request("POST", "/v1/completions", b"{}")
        pool.close(); server.close()
        return resp

    resp = run(main())
    assert resp.status == 400 and resp.reason == "Bad Request" and resp.body().endswith(b'"bad"}}')
