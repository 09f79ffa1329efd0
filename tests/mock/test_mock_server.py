"""The in-process API (``MockServer`` on the caller's loop) and stdlib clients."""

import asyncio
import http.client
import json

from servelab.mock import MockConfig, MockServer, summarize


async def _stream_once(port: int, max_tokens: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"prompt": "a b c", "max_tokens": max_tokens, "stream": True}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nX-Request-Id: a1\r\n"
                 b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
    data = await reader.readuntil(b"\r\n0\r\n\r\n")
    writer.close()
    await writer.wait_closed()
    return data


def test_in_process_server_on_the_callers_loop():
    async def main():
        server = MockServer(MockConfig(port=0, ttft_ms=5, itl_ms=2))
        await server.start()
        try:
            data = await _stream_once(server.port, 6)
            return data, server.truth
        finally:
            await server.stop()

    data, truth = asyncio.run(main())
    assert data.count(b"data: ") == 7 and b"data: [DONE]" in data
    summary = summarize(truth)
    assert summary.finishes == {"ok": 1} and summary.output_tokens == {"a1": 6}
    assert summary.ttft_ns["a1"] >= 5_000_000 and len(summary.itl_ns) == 5


def test_stop_ends_open_streams_as_stopped():
    async def main():
        server = MockServer(MockConfig(port=0, ttft_ms=10_000))
        await server.start()
        task = asyncio.ensure_future(_stream_once(server.port, 3))
        while not server.running:
            await asyncio.sleep(0.005)
        await server.stop()
        await asyncio.gather(task, return_exceptions=True)
        return server.truth

    (req,) = asyncio.run(main()).requests
    assert req.finish == "stopped" and req.output_tokens == 0


def test_http_client_decodes_stream_and_reuses_connection(mock_server):
    mock = mock_server()
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    for max_tokens in (3, 5):
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
                           "stream": True})
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        events = [e for e in resp.read().decode().split("\n\n") if e]
        assert resp.status == 200 and events[-1] == "data: [DONE]"
        assert len(events) == max_tokens + 2  # role chunk, tokens, [DONE]
    sock = conn.sock
    conn.request("GET", "/v1/models")
    assert json.loads(conn.getresponse().read())["data"][0]["id"] == "mock"
    assert conn.sock is sock  # one connection throughout
    conn.close()


def test_a_client_that_shuts_its_side_is_gone_and_nothing_after_is_recorded_as_sent(mock_server):
    """As vLLM's server (uvicorn) takes it: EOF from the client ends its request as a disconnect."""
    import socket

    mock = mock_server(ttft_ms=50, itl_ms=20)
    body = json.dumps({"model": "mock", "prompt": "hi", "max_tokens": 50, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", mock.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"X-Request-Id: half\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        s.shutdown(socket.SHUT_WR)
        got = bytearray()
        while chunk := s.recv(1 << 16):
            got += chunk
    req = mock.truth().by_id()["half"]
    assert req.finish == "disconnect" and b"[DONE]" not in got
    assert got.count(b'"text"') == req.output_tokens < 50  # what the truth says was sent, was received
