"""An engine's ``/metrics``: fetch it, and turn it into timeline fields via ``names``.

``MetricsClient.get`` is the boundary with ``http.client``: whatever goes wrong there
(refused, timed out, a non-200 answer, a broken reply) leaves it as one ``ServerError``
whose message is the short phrase a timeline records ("HTTP 404", "timed out",
"unreachable (Connection refused)"), the original chained as its cause.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.parse

from servelab.errors import ServerError
from servelab.telemetry import names
from servelab.telemetry.prometheus import Exposition, parse


class MetricsClient:
    """``GET /metrics`` over one kept-alive connection: the engine accepts a
    connection once, not four times a second. Direct, like the bench client: no
    proxy from the environment (a proxy would time the wrong hop). ``insecure``
    skips TLS checks, as the bench's ``--insecure`` does."""

    def __init__(self, url: str, timeout_s: float, insecure: bool = False) -> None:
        u = urllib.parse.urlsplit(url)
        self.https, self.host, self.port = u.scheme == "https", u.hostname or "127.0.0.1", u.port
        self.target = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self.timeout_s, self.insecure = timeout_s, insecure
        self.conn: http.client.HTTPConnection | None = None

    def get(self) -> str:
        """The body; ``ServerError`` on failure. One retry on a fresh connection, for a
        kept-alive one the server closed meanwhile (a non-200 answer is not retried)."""
        for attempt in (1, 2):
            try:
                return self._get()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt == 2:
                    raise ServerError(_failure(exc)) from exc
        raise AssertionError("unreachable")

    def _get(self) -> str:
        self.conn = self.conn or self._connect()
        self.conn.request("GET", self.target, headers={"Accept": "text/plain"})
        response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise ServerError(f"HTTP {response.status}")
        return body.decode("utf-8", "replace")

    def _connect(self) -> http.client.HTTPConnection:
        if not self.https:
            return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        context = ssl._create_unverified_context() if self.insecure else ssl.create_default_context()
        return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s, context=context)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _failure(exc: OSError | http.client.HTTPException) -> str:
    if isinstance(exc, TimeoutError):  # socket.timeout is TimeoutError, an OSError: test it first
        return "timed out"
    if isinstance(exc, OSError):
        return f"unreachable ({exc.strerror or exc})"
    return f"{type(exc).__name__}: {exc}"  # a reply http.client could not read (BadStatusLine …)


def describe_error(exc: BaseException) -> str:
    """A failed scrape in one phrase: a ServerError's own (the fetch, or a page that is not
    Prometheus text); anything else is a bug, named by its type."""
    return str(exc) if isinstance(exc, ServerError) else f"{type(exc).__name__}: {exc}"


def fields(expo: Exposition) -> tuple[dict[str, float], dict[str, str]]:
    """(field -> value, field -> the exposed name it came from), for every field present."""
    values: dict[str, float] = {}
    used: dict[str, str] = {}
    for table in (names.GAUGES, names.COUNTERS):
        for field, candidates in table.items():
            found = _first(expo, candidates)
            if found is not None:
                used[field], series = found
                values[field] = _combine(field, series)
    return values, used


def _first(expo: Exposition, candidates) -> tuple[str, list[float]] | None:
    for candidate in candidates:
        name, want = (candidate, {}) if isinstance(candidate, str) else candidate
        series = [v for labels, v in expo.get(name) if all(labels.get(k) == x for k, x in want.items())]
        if series:
            return name, series
    return None


def _combine(field: str, series: list[float]) -> float:
    """One value from a name's label sets (see ``names.MEAN_FIELDS``)."""
    if field in names.MEAN_FIELDS:
        return sum(series) / len(series)
    return sum(series)


def cache_config(expo: Exposition) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info`` that say how big the KV cache is."""
    series = expo.get(names.CACHE_CONFIG_INFO)
    if not series:
        return {}
    labels = series[0][0]
    return {k: labels[k] for k in names.CACHE_CONFIG_LABELS if k in labels and labels[k] != "None"}


def _wanted() -> frozenset[str]:
    out = {names.CACHE_CONFIG_INFO}
    for table in (names.GAUGES, names.COUNTERS):
        for candidates in table.values():
            out.update(c if isinstance(c, str) else c[0] for c in candidates)
    return frozenset(out)


WANTED = _wanted()


def sample(text: str) -> tuple[dict[str, float], dict[str, str], dict[str, str]]:
    """Parse one scrape: (values, names used, cache config labels)."""
    expo = parse(text, keep=WANTED)
    values, used = fields(expo)
    return values, used, cache_config(expo)
