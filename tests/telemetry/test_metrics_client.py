"""``GET /metrics`` on one kept-alive connection; errors described in one short phrase."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from servelab.errors import ServerError
from servelab.telemetry.engine import MetricsClient, describe_error
from servelab.telemetry.scrape import EngineScraper


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, status: int = 200, close: bool = False, page: str | None = None) -> None:
        self.status, self.close, self.connections, self.page = status, close, 0, page
        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/metrics?x=1"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        body = (self.server.page or f"vllm:num_requests_running 3\n# path {self.path}\n").encode()
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(body)))
        if self.server.close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    servers = []

    def start(**kw) -> Server:
        servers.append(Server(**kw))
        return servers[-1]

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def test_one_connection_for_many_scrapes(server):
    srv = server()
    client = MetricsClient(srv.url, timeout_s=2.0)
    bodies = [client.get() for _ in range(5)]
    assert srv.connections == 1 and "# path /metrics?x=1" in bodies[-1]
    client.close()


def test_a_server_that_closes_each_time_still_answers(server):
    srv = server(close=True)
    client = MetricsClient(srv.url, timeout_s=2.0)
    assert all("num_requests_running" in client.get() for _ in range(3))
    assert srv.connections == 3


def test_every_failure_is_one_server_error_with_its_phrase(server):
    with pytest.raises(ServerError, match=r"^HTTP 404$") as status:
        MetricsClient(server(status=404).url, timeout_s=2.0).get()
    assert describe_error(status.value) == "HTTP 404"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ServerError, match=r"^unreachable \(Connection refused\)$") as refused:
        MetricsClient(f"http://127.0.0.1:{port}/metrics", timeout_s=2.0).get()
    assert isinstance(refused.value.__cause__, ConnectionRefusedError)  # the original, chained
    with socket.socket() as silent:  # accepts (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with pytest.raises(ServerError, match=r"^timed out$"):
            MetricsClient(f"http://127.0.0.1:{silent.getsockname()[1]}/metrics", timeout_s=0.2).get()


def test_a_reply_that_is_not_http_is_a_server_error():
    with socket.socket() as bad:
        bad.bind(("127.0.0.1", 0))
        bad.listen()

        def answer_garbage():
            for _ in range(2):  # the first try and its retry
                conn, _ = bad.accept()
                conn.recv(4096)
                conn.sendall(b"SSH-2.0-OpenSSH\r\n")
                conn.close()

        threading.Thread(target=answer_garbage, daemon=True).start()
        with pytest.raises(ServerError, match=r"^BadStatusLine: ") as caught:
            MetricsClient(f"http://127.0.0.1:{bad.getsockname()[1]}/metrics", timeout_s=2.0).get()
    assert describe_error(caught.value) == str(caught.value)
    assert describe_error(ValueError("a bug")) == "ValueError: a bug"


def test_a_malformed_page_is_one_error_sample_and_the_scraper_goes_on(server):
    srv = server(page="vllm:num_requests_running{engine=0} 3\n")  # label value not quoted
    scraper = EngineScraper(srv.url, timeout_s=2.0)
    [sample] = scraper.sample()
    assert sample["error"] == "malformed /metrics line 'vllm:num_requests_running{engine=0} 3'"
    srv.page = 'vllm:num_requests_running{engine="0"} 3\n'
    assert scraper.sample()[-1]["running"] == 3.0
