"""The corpus of published measurements: it loads, every row is sourced, and the split holds."""

from pathlib import Path

import pytest

from servelab.errors import InputError
from servelab.planner.corpus.rows import HERE, fit_rows, load_corpus

# The split as committed before any fit (planner/corpus/rows.py): changing the rule or the
# grouping moves rows between fit and held-out, which this pins.
HELD_OUT = {
    "vllm10511-llama3-8b-h100-tp1", "vllm10511-llama3-8b-h100-tp2",
    "recipes12-qwen3coder480b-fp8-h20-default", "recipes12-qwen3coder480b-fp8-h20-095",
    "kyuz0-qwen3-4b-bf16-strixhalo",
    "tt340a-128-128-c1", "tt340a-128-1024-c1", "tt340a-1024-128-c1", "tt340a-2048-128-c1",
    "vllm20469-qwen3-14b-awq-a100-16k",
    # Added with three groups dated 2025-07-10..09-03 (a block of three slots in between the committed
    # groups, so no committed row changed side): the third of them, Qwen3-30B-A3B on A100.
    *(f"tt340c-{p}-{o}-c1" for p, o in ((128, 128), (128, 1024), (1024, 128), (2048, 128), (3072, 128), (4096, 128))),
    # Added with three memory groups dated 2025-04-02..05-07 (again a block of three slots in between):
    # the first of them falls on a held-out position, Qwen2.5-32B on 2xL40S.
    "vllm15815-qwen25-32b-l40s-tp2",
    # gpustack's performance lab (2025-11-13): the Qwen3-14B A100-80GB rows join vllm20469's group, whose date
    # ("not recorded") sorted after every dated one, so it stays at its position; three new groups follow it
    # (Qwen3-14B H100, Qwen3-32B A100-80GB, Qwen3-32B H100), the third held out. No committed row changed side.
    *(f"gpustack-q3-14b-a100-{w}-cinf" for w in ("sharegpt", "sharegpt-fp8", "sharegpt-awq", "32000-100",
                                                  "4000-200", "2000-100")),
    *(f"gpustack-q3-32b-h100-{w}-cinf" for w in ("sharegpt", "32000-100", "4000-200", "2000-100", "128-4")),
    # gpustack's quantization page (2025-11-20, after every earlier group): Qwen3-8B on A100-80GB, H100, RTX 4090;
    # the third held out.
    "gpustackq-q3-8b-bf16-4090-sharegpt-cinf", "gpustackq-q3-8b-awq-4090-sharegpt-cinf",
}
# Memory rows added after the first fit (2026-12-03): three new groups and a row of an existing one.
ADDED_LATER = {"vllm15815-qwen25-32b-l40s-tp2", "vllm14447-dsr1-awq-3090-tp16", "vllm17327-qwen3-30b-a3b-w4a16-3090",
               "vllm10517-llama8b-3090-35k"}
# The rows the first fit saw (commit 8e9d545): growing the corpus must never move one into the held-out set.
FIRST_FIT_HELD_OUT = {
    "vllm10511-llama3-8b-h100-tp1", "vllm10511-llama3-8b-h100-tp2",
    "recipes12-qwen3coder480b-fp8-h20-default", "recipes12-qwen3coder480b-fp8-h20-095",
    "kyuz0-qwen3-4b-bf16-strixhalo",
    "tt340a-128-128-c1", "tt340a-128-1024-c1", "tt340a-1024-128-c1", "tt340a-2048-128-c1",
    "vllm20469-qwen3-14b-awq-a100-16k",
}
FIRST_FIT_IDS_PREFIXES = ("vllm", "oracle", "lmcache", "recipes", "kyuz0", "servelab", "tt125", "tt143", "tt340a",
                          "tt340b", "tt394")


def test_every_row_names_its_source_and_version():
    corpus = load_corpus()
    for row in corpus.memory + corpus.speed:
        assert row.source.url.startswith(("https://", "servelab:")), row.id
        assert row.source.date and row.source.vllm_version, row.id
    assert len(corpus.memory) == 20 and len(corpus.speed) == 75


def test_the_split_is_the_committed_one():
    assert load_corpus().held_out_ids == HELD_OUT


def test_growing_the_corpus_kept_every_first_fit_row_on_its_side():
    corpus = load_corpus()
    first = [r.id for r in corpus.memory + corpus.speed
             if r.id.startswith(FIRST_FIT_IDS_PREFIXES) and r.id not in ADDED_LATER]
    assert len(first) == 43
    assert {i for i in first if i in corpus.held_out_ids} == FIRST_FIT_HELD_OUT


def test_a_fit_refuses_held_out_rows():
    corpus = load_corpus()
    assert all(not corpus.held_out(row) for row in fit_rows(corpus, [r for r in corpus.speed
                                                                     if not corpus.held_out(r)]))
    with pytest.raises(InputError, match="held-out rows may not be fitted: tt340a-128-128-c1"):
        fit_rows(corpus, corpus.speed)


def test_output_rate_from_request_rate_where_only_that_was_printed():
    row = next(r for r in load_corpus().speed if r.id == "tt143-128-1024-c1")
    assert row.output_tok_s == pytest.approx(0.032 * 1024)


def _copy_with(tmp_path: Path, old: str, new: str) -> Path:
    for name in ("memory.toml", "speed.toml"):
        (tmp_path / name).write_text((HERE / name).read_text(encoding="utf-8").replace(old, new, 1),
                                     encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("old, new, message", [
    ('gpu_memory_utilization = 0.90', 'gpu_memory_utilisation = 0.90',
     "memory.toml, row 'vllm10517-llama8b-3090-20k': unknown field 'gpu_memory_utilisation'"),
    ('kv_gib = 3.81', 'kv_gib = "3.81"', "measured.kv_gib is unknown or not a number"),
    ('vllm_version = "0.6.x V0', 'vllm_versio = "0.6.x V0', "unknown field 'vllm_versio'"),
    ('dataset = "fixed"', 'dataset = "mystery"', "workload.dataset must be one of fixed, random, sharegpt"),
])
def test_a_bad_row_is_one_line_naming_file_row_and_field(tmp_path, old, new, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_corpus(_copy_with(tmp_path, old, new))
