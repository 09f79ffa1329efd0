"""A run's identity (``study/layout.run_hash``): derived from the engine entry and the
workload's spec, so no variation can forget to change it; old markers (a hash of the
flags) still count."""

import copy
import dataclasses
import math

import pytest

from servelab.config import BenchSpec
from servelab.engines import EngineSpec
from servelab.study import layout
from servelab.results.layout import write_marker
from servelab.study.engine_runs import EngineRuns, study_engine_runs
from servelab.study.entries import EngineEntry, Workload
from servelab.study.file import load_study

ENGINE = EngineEntry("e", EngineSpec(name="e", kind="sim", args=("--max-num-seqs", "2")),
                     args=("--max-num-seqs", "2"))
ROOT = {"engine": ENGINE, "workload": BenchSpec()}


def leaves(value, at: str = ""):
    """(dotted path, value) of every field that is not itself a dataclass."""
    for f in dataclasses.fields(value):
        inner = getattr(value, f.name)
        if dataclasses.is_dataclass(inner):
            yield from leaves(inner, f"{at}{f.name}.")
        else:
            yield f"{at}{f.name}", inner


def every_leaf() -> list[str]:
    return [f"{top}.{path}" for top, value in ROOT.items() for path, _ in leaves(value)]


def other(value):
    """A different value of the same shape (only the hash sees it: nothing is validated)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, float):
        return 2.0 if math.isinf(value) else value + 1.5
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):
        return (*value, "x")
    if isinstance(value, dict):
        return {**value, "X": "1"}
    return "x"  # None


def changed(obj, parts: list[str]):
    """``obj`` with the field at ``parts`` given another value, bypassing each class's checks."""
    new = copy.copy(obj)
    value = getattr(obj, parts[0])
    object.__setattr__(new, parts[0], changed(value, parts[1:]) if parts[1:] else other(value))
    return new


def hash_with(path: str) -> str:
    top, *parts = path.split(".")
    root = {**ROOT, top: changed(ROOT[top], parts)}
    return layout.run_hash(root["engine"], root["workload"])


def test_every_field_outside_the_exclusions_is_identity():
    base = layout.run_hash(ENGINE, BenchSpec())
    identity = [p for p in every_leaf() if p not in layout.NOT_IDENTITY]
    assert "workload.load.workers" in identity and "workload.load.ray" in identity
    assert "engine.spec.env" in identity and "engine.reset_prefix_cache" in identity
    unchanged = [p for p in identity if hash_with(p) == base]
    assert unchanged == [], "a change of these fields would resume a changed run as done"


def test_the_excluded_fields_change_nothing():
    base = layout.run_hash(ENGINE, BenchSpec())
    assert layout.NOT_IDENTITY <= set(every_leaf()), "an exclusion names no field (renamed?)"
    assert [p for p in sorted(layout.NOT_IDENTITY) if hash_with(p) != base] == []


def test_the_canonical_form_spells_each_value_one_way():
    assert layout.canonical(BenchSpec())["load"]["request_rate"] == "inf"
    assert layout.canonical((1, (2.0, None))) == [1, ["2.0", None]]
    assert "argv" not in layout.canonical(BenchSpec(argv=("--x",)), frozenset({"argv"}))
    with pytest.raises(TypeError, match="workload.x: object"):
        layout.canonical({"workload": {"x": object()}})


def study(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(f'[study]\nresults = "{tmp_path}"\n[engines.e]\nkind = "sim"\n'
                    '[workloads.w]\ndataset-name = "random"\nnum-prompts = 4\n')
    return load_study(path)


def runs_of(study) -> tuple[EngineRuns, Workload]:
    return study_engine_runs(study, "e"), study.workloads["w"]


@pytest.mark.parametrize("stored, expected", [("legacy", "done"), ("today", "done"), ("0123456789abcdef", "stale")])
def test_a_marker_counts_with_todays_hash_or_the_one_old_markers_have(tmp_path, stored, expected):
    runs, workload = runs_of(study(tmp_path))
    hashes = {"legacy": layout.legacy_hash(runs.engine, workload.argv),
              "today": layout.run_hash(runs.engine, workload.spec)}
    assert hashes["legacy"] != hashes["today"]
    layout.mark_done(runs, workload, 1, {})
    folder = layout.run_dir(runs, workload, 1)
    marker = layout.read_marker(folder)
    assert marker["config_hash"] == hashes["today"]  # written with today's
    write_marker(folder, {**marker, "config_hash": hashes.get(stored, stored)})
    assert layout.status(runs, workload, 1) == expected


def test_a_varied_spec_is_another_run_even_when_its_flags_are_not(tmp_path):
    # a variation that forgets to extend argv (provenance only) still changes the identity
    runs, workload = runs_of(study(tmp_path))
    layout.mark_done(runs, workload, 1, {})
    varied = dataclasses.replace(workload.spec, load=dataclasses.replace(workload.spec.load, max_concurrency=8))
    assert varied.argv == workload.argv
    assert layout.status(runs, Workload("w", varied), 1) == "stale"


def test_a_recovered_result_is_never_a_finished_repeat(tmp_path):
    """Even with a marker beside it (written by hand, or by an old servelab): a resumed study reruns it."""
    runs, workload = runs_of(study(tmp_path))
    layout.mark_done(runs, workload, 1, {})
    folder = layout.run_dir(runs, workload, 1)
    (folder / "result.json").write_text('{"completed": 3, "servelab": {"recovered": true}}')
    assert layout.status(runs, workload, 1) == "partial" and not layout.is_done(runs, workload, 1)
    (folder / "result.json").write_text('{"completed": 3, "servelab": {}}')
    assert layout.status(runs, workload, 1) == "done"
