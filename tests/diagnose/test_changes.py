"""The knob table and the diagnosis's next-step sentences never disagree: every sentence
names exactly the changes ``servelab optimize`` would try for that verdict."""

import re

import pytest

from servelab.diagnose import changes, rules

FLAG = re.compile(r"(--[a-z][a-z-]+|VLLM_[A-Z_]+)")


def named(text: str) -> set[str]:
    return set(FLAG.findall(text))


def tried(remedy: changes.Remedy) -> set[str]:
    return {c.said_as for c in remedy.changes} | {f for c in remedy.changes for f in c.also}


ENTRIES = [(kind, key) for kind, table in changes.TABLE.items() for key, r in table.items() if r.says]


@pytest.mark.parametrize("kind,key", ENTRIES)
def test_each_sentence_names_exactly_the_changes_tried(kind, key):
    remedy = changes.remedy(kind, key)
    assert named(remedy.says) == tried(remedy), f"{kind} {key}: the sentence and the table disagree"


def test_the_rules_take_their_sentences_from_the_table():
    assert rules.KNOWN_CAP["vllm"][1] is changes.remedy("vllm", "scheduler-cap:max_num_seqs").says
    assert rules.KNOWN_CAP["llamacpp"][1] is changes.remedy("llamacpp", "scheduler-cap:slots").says
    assert rules.PLATEAU_NEXT["vllm"] is changes.remedy("vllm", "scheduler-cap:plateau").says
    assert rules.PLATEAU_NEXT["llamacpp"] is changes.remedy("llamacpp", "scheduler-cap:plateau").says
    assert rules._raise_concurrency(4) == changes.says("vllm", "client-concurrency-cap").format(c=4, c2=8, c4=16)


def test_every_verdict_an_engine_can_limit_on_has_an_entry_or_is_a_stop():
    # the keys the optimizer looks up; a verdict absent here is a stop ("no untried change")
    for kind in ("vllm", "vllm-cpu", "sim"):
        for key in ("scheduler-cap:max_num_seqs", "scheduler-cap:max_num_batched_tokens", "kv-capacity",
                    "client-concurrency-cap", "client-bound"):
            assert changes.remedy(kind, key).changes, (kind, key)
    assert changes.remedy("vllm-cpu", "kv-capacity").changes[0].name == "VLLM_CPU_KVCACHE_SPACE"
    assert changes.remedy("llamacpp", "scheduler-cap:slots").changes[0].also == ("--ctx-size",)
    assert all(c.kind == changes.CLIENT for r in changes.TABLE["external"].values() for c in r.changes)


def test_key_of_splits_the_scheduler_cap_by_its_limit():
    assert changes.key_of("scheduler-cap", {"limit": "max_num_batched_tokens"}) == \
        "scheduler-cap:max_num_batched_tokens"
    assert changes.key_of("kv-capacity", {}) == "kv-capacity"
    assert changes.key_of("client-concurrency-cap", {}, cpu_full=True) == "client-concurrency-cap:cpu"


def test_the_cpu_builds_max_num_seqs_is_cited_at_vllms_cpu_default():
    """vLLM 0.32's API server defaults to 128 sequences on its CPU build (256 on a GPU under 70 GiB):
    EngineArgs.get_batch_defaults. A step from the CPU engine's unstated cap starts from 128."""
    for key in ("scheduler-cap:max_num_seqs", "scheduler-cap:plateau", "gpu-underutilized"):
        cpu = {c.name: c.default for c in changes.remedy("vllm-cpu", key).changes}
        gpu = {c.name: c.default for c in changes.remedy("vllm", key).changes}
        assert (cpu["--max-num-seqs"], gpu["--max-num-seqs"]) == ("128", "256"), key
