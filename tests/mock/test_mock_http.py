"""The mock's HTTP parsing and vLLM dialect, without a socket."""

import json

import pytest

from servelab.errors import InputError
from servelab.mock import MockConfig
from servelab.mock.dialect import Wire, estimate_prompt_tokens
from servelab.mock.http import BadRequest, parse_request


def _raw(body=b'{"a":1}', extra=""):
    return bytearray(b"POST /v1/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n%b\r\n%b"
                     % (len(body), extra.encode(), body))


def test_parse_waits_for_head_and_body():
    raw = _raw()
    for cut in (10, len(raw) - 1):
        assert parse_request(raw[:cut]) == (None, 0)
    req, used = parse_request(raw)
    assert used == len(raw)
    assert (req.method, req.path, req.body, req.keep_alive) == ("POST", "/v1/completions", b'{"a":1}', True)
    assert req.headers["host"] == "h"


def test_parse_pipelined_and_connection_close():
    raw = _raw(extra="Connection: close\r\n") + _raw(b"{}")
    first, used = parse_request(raw)
    second, used2 = parse_request(raw[used:])
    assert not first.keep_alive and second.keep_alive and second.body == b"{}"
    assert used + used2 == len(raw)


@pytest.mark.parametrize("raw,status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
])
def test_parse_rejects(raw, status):
    with pytest.raises(BadRequest) as exc:
        parse_request(bytearray(raw))
    assert exc.value.status == status


def test_wire_events_are_single_chunks_of_valid_json():
    wire = Wire(chat=False, rid='cmpl-"q"', model="m", created=7)
    ev = wire.content(0, 2, "stop")
    size, _, rest = ev.partition(b"\r\n")
    assert int(size, 16) == len(rest) - 2 and rest.endswith(b"\n\n\r\n")
    obj = json.loads(rest[len(b"data: "):-4])
    assert obj["id"] == 'cmpl-"q"' and obj["choices"][0]["text"] == " the quick"
    assert wire.middle(11, 1) == wire.content(11, 1, None)


def test_prompt_token_estimate():
    assert estimate_prompt_tokens("a b  c") == 3
    assert estimate_prompt_tokens([5, 6, 7, 8]) == 4
    assert estimate_prompt_tokens(["a b", "c"]) == 3
    assert estimate_prompt_tokens([{"role": "user", "content": [{"type": "text", "text": "x y"}]}]) == 2


@pytest.mark.parametrize("kw", [
    {"error_rate": 1.5}, {"failure_kinds": ("boom",)}, {"tokens_per_event": 0},
    {"output_len": (5, 2)}, {"max_open": 0}, {"ttft_ms": -1},
])
def test_config_rejects(kw):
    with pytest.raises(InputError):
        MockConfig(**kw)


def test_config_dict_roundtrip():
    cfg = MockConfig(output_len=(2, 9), failure_kinds=("abort", "stall"), max_open=3)
    assert MockConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
