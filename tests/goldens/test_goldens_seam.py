"""Goldens for the runs the first goldens did not cover, written before issue 33 moves the
Driver seam (measure/drivers.py) and splits loadgen/drive.py: ``bench --multi-turn`` and
``bench --workers 2``, both against the mock with fixed timings. As test_goldens.py's mock
case: counts exact, every measured time masked, the result's keys listed.

Regenerate: SERVELAB_REGEN_GOLDEN=1 (the regenerating run fails; review the diff).
"""

from __future__ import annotations

import json

from golden_io import (check, dump, files_under, key_paths, mask_ids, replace_all, run,
                       structure, transcript)
from test_goldens import BLOCK_START, EXACT_FIELDS, PRUNE, mask_bench_console


CONVERSATIONS = [
    {"id": "a", "turns": ["alpha one", "alpha two", "alpha three"]},
    {"id": "b", "turns": ["beta one", "beta two"]},
    {"turns": [{"prompt": "gamma one", "output_tokens": 3}]},
]


def golden(name: str, argv: list[str], code: int, out: str, where, server_url: str, extra: tuple = ()) -> None:
    lit = {**where["literals"], server_url: "<MOCK_URL>"}
    assert BLOCK_START in out and "servelab diagnosis:" in out
    out = "\n".join(structure(line) if line.startswith("servelab: mean TTFT by turn") else line
                    for line in out.splitlines())  # each turn's TTFT is measured: masked
    text = transcript([replace_all(a, lit) for a in argv], code, mask_bench_console(replace_all(out, lit)), None)
    text += "--- files\n" + "\n".join(files_under(where["tmp"])) + "\n"
    result = json.loads((where["tmp"] / "out" / "r.json").read_text())
    exact = {k: result[k] for k in EXACT_FIELDS}
    for key in ("prompt_tokens_source", "interrupted", "rules", "ending", *extra):
        exact[f"servelab.{key}"] = result["servelab"][key]
    if "multi_turn" in extra:
        for row in exact["servelab.multi_turn"]["ttft_by_turn"]:  # measured times: masked
            row.update({k: "<T>" for k in row if k.endswith("_ms")})
    records = [json.loads(x) for x in open(result["servelab"]["records_file"])]
    exact["records"] = sorted(f"{r.get('conversation_id', '-')}/{r.get('turn', '-')} "
                              f"{r['request_id'].rsplit('-', 1)[-1]} {r.get('output_tokens')}"
                              for r in records if "request_id" in r)
    text += "--- result, exact\n" + dump(exact)
    text += "--- result keys\n" + "\n".join(sorted(key_paths(result, prune=PRUNE))) + "\n"
    check(f"{name}.txt", mask_ids(text))


def test_bench_multi_turn_against_the_mock(mock_server, where, capsys):
    server = mock_server(ttft_ms=2, itl_ms=1)
    path = where["tmp"] / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS))
    argv = ["bench", "--backend", "openai-chat", "--base-url", server.url, "--model", "mock", "--tokenizer",
            where["tok"], "--dataset-name", "custom", "--dataset-path", str(path), "--num-prompts", "3",
            "--disable-shuffle", "--custom-output-len", "6", "--multi-turn", "--multi-turn-think-time", "0.01",
            "--disable-tqdm", "--max-concurrency", "2", "--save-result", "--result-dir", str(where["tmp"] / "out"),
            "--result-filename", "r.json"]
    code, out, _ = run(capsys, argv)
    assert code == 0
    golden("bench_mock_multi_turn", argv, code, out, where, server.url, ("multi_turn",))


def test_bench_workers_against_the_mock(mock_server, where, capsys):
    server = mock_server(ttft_ms=2, itl_ms=1)
    argv = ["bench", "--backend", "vllm", "--base-url", server.url, "--model", "mock", "--tokenizer", where["tok"],
            "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "8", "--disable-tqdm",
            "--num-prompts", "12", "--request-rate", "200", "--max-concurrency", "4", "--seed", "3", "--workers", "2",
            "--save-result", "--result-dir", str(where["tmp"] / "out"), "--result-filename", "r.json"]
    code, out, _ = run(capsys, argv)
    assert code == 0
    golden("bench_mock_workers", argv, code, out, where, server.url)
