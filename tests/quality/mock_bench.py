"""``servelab bench`` of a custom dataset of N numbered prompts against the mock, for the quality
tests that read the mock's truth: the prompts' file and the command, in one place."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.cli.main import main

PROMPTS = "prompts.jsonl"  # beside the result: the fixture writes it, bench reads it


def write_prompts(folder: Path, n: int, text: str) -> Path:
    """``n`` prompts, ``text`` formatted with each one's number (another --seed sends them in another order)."""
    path = folder / PROMPTS
    path.write_text("".join(json.dumps({"prompt": text.format(i)}) + "\n" for i in range(n)))
    return path


def bench(url: str, tok: str, out: Path, *extra: str, n: int, output_len: int, backend: str = "vllm") -> int:
    """The bench's exit code; its result is ``out``."""
    return main(["bench", "--backend", backend, "--base-url", url, "--model", "mock", "--tokenizer", tok,
                 "--dataset-name", "custom", "--dataset-path", str(out.parent / PROMPTS),
                 "--custom-output-len", str(output_len), "--num-prompts", str(n), "--max-concurrency", "8",
                 "--disable-tqdm", "--save-result", "--result-dir", str(out.parent), "--result-filename", out.name,
                 *extra])
