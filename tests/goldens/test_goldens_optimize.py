"""Goldens of ``servelab optimize`` on the simulator's fast mode, generated on b7366a5 before
issue 33 moves the tuners' shared parts (the simulated engine from flags, the knob list, the
serve command, the NaN-free JSON, the SLO text, the ladder) below ``sweep/`` and ``optimize/``.

As the live goldens (test_goldens.py): the output's line structure with every number masked,
the files written, the key paths of every JSON file, the exit code; the report (optimize.md)
as structure too. The lines that name the answer (serve, client, next, the operating point and its ladder) are deterministic in
the fast mode and kept exact. Regenerate: SERVELAB_REGEN_GOLDEN=1 (the regenerating run fails).
"""

from __future__ import annotations

import re

import pytest
from golden_io import check, files_under, json_keys_by_name, replace_all, run, structure, transcript
from test_goldens import PRUNE, masked_argv

WORKLOAD = ["--dataset-name", "random", "--random-input-len", "256", "--random-output-len", "32",
            "--num-prompts", "24", "--max-concurrency", "8", "--sim-step-overhead-ms", "20"]
ENGINE = ["--", "--max-num-seqs", "2", "--kv-cache-tokens", "2048", "--step-overhead-ms", "20"]

CASES = {
    "throughput": ["--budget-runs", "12", "--simulate-first"],
    "goodput": ["--objective", "goodput", "--slo", "ttft:2000,e2el:3000", "--budget-runs", "14"],
}

ANSWER = re.compile(r"^(\s*(serve|client|next)|operating point|\[optimize \S+\] operating point):")
# when the run started (the report's header): an hour like "T10" is not a number to structure()
WHEN = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?")


@pytest.mark.parametrize("name", CASES)
def test_optimize_simulated(name, where, capsys):
    argv = ["optimize", "--engine", "sim", "--simulate", "--results", "results", "--tokenizer", where["tok"],
            *WORKLOAD, *CASES[name], *ENGINE]
    code, out, err = run(capsys, argv)
    assert code == 0, f"exit {code}:\n{out}\n{err}"
    out = replace_all(out, where["literals"])
    folder = where["tmp"] / "results"
    text = transcript(masked_argv(argv, where), code, structure(out), None)
    text += "--- answer, exact\n" + "\n".join(line for line in out.splitlines() if ANSWER.match(line)) + "\n"
    text += "--- files\n" + "\n".join(files_under(folder)) + "\n"
    text += "--- json keys\n" + json_keys_by_name(folder, PRUNE)
    report = WHEN.sub("<DATE>", replace_all((folder / "optimize" / "optimize.md").read_text(encoding="utf-8"),
                                            where["literals"]))
    text += "--- optimize.md\n" + structure(report) + "\n"
    check(f"optimize_{name}.txt", text)
