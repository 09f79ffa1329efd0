"""Every early end accounted by the one rule (records.RunEnding), the result and the
records file agreeing: a circuit-broken run, a run stopped as over-saturated, a full disk."""

import json

from disk_helpers import filling_disk

from servelab.cli.main import main
from servelab.results import records_file


def bench(url, tok, tmp_path, *extra):
    return ["bench", "--backend", "vllm", "--base-url", url, "--model", "mock", "--tokenizer", tok,
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", "--disable-tqdm",
            "--no-telemetry", "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json", *extra]


def written(tmp_path) -> tuple[dict, list[dict]]:
    result = json.loads((tmp_path / "r.json").read_text())
    lines = [json.loads(x) for x in (tmp_path / "r.records.jsonl").read_text().splitlines()]
    return result, lines


def agree(result: dict, lines: list[dict]) -> dict:
    """The accounting adds up, and the records file holds exactly the requests it says ended."""
    e = result["servelab"]["ending"]
    assert e["completed"] + e["failed"] + e["cut"] + (e["never_sent"] or 0) == e["meant"] == result["num_prompts"]
    assert (result["completed"], result["failed"]) == (e["completed"], e["failed"])
    assert len(lines) == e["completed"] + e["failed"]
    assert sum(x["error"] is not None for x in lines) == e["failed"]
    return e


def test_a_circuit_broken_run_counts_and_writes_every_request(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=2, itl_ms=1, error_rate=0.5)
    rc = main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "400", "--request-rate", "100",
                    "--stop-on-errors", "10"))
    assert rc == 1  # the server was failing
    e = agree(*written(tmp_path))
    assert e["reason"] == "errors" and e["early"] and e["failed"] >= 10 and e["never_sent"] > 0
    out = capsys.readouterr().out
    assert "servelab: ended early (errors): of 400 requests" in out


def test_a_run_past_the_servers_capacity_stops_itself(mock_server, qwen3_path, tmp_path, capsys):
    mock = mock_server(ttft_ms=10, itl_ms=4, max_open=4)  # ~105 requests/s at most
    rc = main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "1000", "--request-rate", "300",
                    "--stop-when-saturated"))
    assert rc == 0
    result, lines = written(tmp_path)
    e = agree(result, lines)
    rules = result["servelab"]["stop_rules"]
    assert e["reason"] == "saturated" and rules["saturated"] and rules["evidence"]["ttft_ms"]["rising"]
    assert result["duration"] < 1000 / 105  # it did not run to the end


def test_a_full_disk_mid_run_ends_it_in_one_line_with_whole_lines_kept(mock_server, qwen3_path, tmp_path,
                                                                       monkeypatch, capsys):
    full_disk = filling_disk(20_000)
    real = records_file.RecordsFile.__init__
    monkeypatch.setattr(records_file.RecordsFile, "__init__",
                        lambda self, folder, header=None, writer=None: real(self, folder, header, full_disk))
    mock = mock_server(ttft_ms=2, itl_ms=1)
    rc = main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "2000", "--request-rate", "200"))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "disk full writing the records" in err[0]
    (part,) = tmp_path.glob(".servelab-*.records.jsonl.part")
    text = part.read_text()
    assert text.endswith("\n") and all(json.loads(x)["request_id"] for x in text.splitlines())
    assert not (tmp_path / "r.json").exists()  # no result, rather than a wrong one


def test_requests_waiting_for_a_client_slot_when_the_run_ends_were_never_sent(mock_server, qwen3_path, tmp_path,
                                                                               capsys):
    """All 400 released at t0 under a cap of 2: when the breaker ends the run, at most the 2
    in flight were sent and cut; the rest, waiting for a slot, were never sent — in the
    result, the records file and the console line alike."""
    mock = mock_server(ttft_ms=2, itl_ms=1, error_rate=0.5, seed=3)
    rc = main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "400", "--max-concurrency", "2",
                    "--stop-on-errors", "10"))
    assert rc == 1
    e = agree(*written(tmp_path))
    sent = len(mock.truth().requests)
    assert e["cut"] <= 2 and e["never_sent"] >= 400 - sent
    assert e["completed"] + e["failed"] + e["cut"] + e["never_sent"] == 400
    out = capsys.readouterr().out
    assert f"{e['cut']} cut before an answer, {e['never_sent']} never sent" in out


def test_stop_when_saturated_in_a_closed_loop_is_refused_in_one_line(mock_server, qwen3_path, tmp_path, capsys):
    """--request-rate inf under --max-concurrency: nothing outstanding ever rises, so the rule
    could never fire; refused before a request is sent, not accepted and silently inert."""
    mock = mock_server(ttft_ms=2, itl_ms=1)
    rc = main(bench(mock.url, qwen3_path, tmp_path, "--num-prompts", "50", "--max-concurrency", "4",
                    "--stop-when-saturated"))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--stop-when-saturated needs arrivals paced in time" in err[0]
    assert "a closed loop under --max-concurrency" in err[0] and not mock.truth().requests
