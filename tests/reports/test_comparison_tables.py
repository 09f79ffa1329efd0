"""Comparison tables from hand-built study folders: rows, cells, ratios, verdicts, notes."""

import json

import pytest
from study_factory import make_study

from servelab.errors import InputError
from servelab.reports.compare import build_tables
from servelab.reports.reference import add_reference, load_reference
from servelab.results.runs import load_runs
from servelab.reports.table import fmt_versus, render_markdown, render_text


def row(table, key):
    return next(r for r in table.rows if r.metric.key == key)


@pytest.fixture
def folder(tmp_path):
    return make_study(tmp_path, {
        "base": {"w": [{"output_throughput": 100.0, "mean_ttft_ms": 100.0},
                       {"output_throughput": 102.0, "mean_ttft_ms": 104.0}]},
        "capped": {"w": [{"output_throughput": 40.0, "mean_ttft_ms": 1000.0},
                         {"output_throughput": 41.0, "mean_ttft_ms": 1100.0}]},
        "again": {"w": [{"output_throughput": 101.0, "mean_ttft_ms": 103.0},
                        {"output_throughput": 103.0, "mean_ttft_ms": 101.0}]},
    })


def test_one_column_per_config_in_study_order_with_verdicts(folder):
    [table] = build_tables(load_runs([folder]))
    assert table.configs == ["base", "capped", "again"] and table.baseline == "base"
    out = row(table, "output_throughput")
    assert out.cells["base"].values == (100.0, 102.0)
    assert out.versus["capped"].verdict == "worse" and out.versus["again"].verdict == "within noise"
    assert round(out.versus["capped"].ratio, 3) == round(40.5 / 101, 3)
    ttft = row(table, "mean_ttft_ms")
    assert ttft.versus["capped"].verdict == "worse" and ttft.versus["again"].verdict == "within noise"
    assert row(table, "kv_cache_tokens").versus["capped"].verdict == "same"
    assert "capped/weights_gib" in table.estimated  # from the checkpoint size, marked


def test_a_chosen_baseline_and_an_unknown_one(folder):
    [table] = build_tables(load_runs([folder]), baseline="capped")
    assert table.configs[0] == "capped"
    assert row(table, "output_throughput").versus["base"].verdict == "better"
    with pytest.raises(InputError, match="--baseline 'nope' is not one of the configs: base, capped, again"):
        build_tables(load_runs([folder]), baseline="nope")


def test_text_and_markdown_show_spread_ratio_change_and_the_rule(folder):
    tables = build_tables(load_runs([folder]))
    text = render_text(tables)
    lines = text.splitlines()
    assert lines[0] == "== workload w — random · 4 prompts · ~128 in / ~64 out tokens · max concurrency 2 · rate inf · seed 0"
    assert lines[1].split("  ")[0] == "metric"
    assert any(line.startswith("↑ output tok/s") and "101.0 ± 1.0" in line and "0.40× −59.9% worse" in line
               for line in lines)
    assert "verdict rule: better/worse = the min–max ranges over repeats do not overlap" in text
    md = render_markdown(tables)
    assert "| ↑ output tok/s | 101.0 ± 1.0 | 40.5 ± 0.5 | 0.40× −59.9% worse | 102.0 ± 1.0 | 1.01× +1.0% within noise |" in md


def test_a_different_load_is_flagged(tmp_path):
    folder = make_study(tmp_path, {"a": {"w": [{}, {}]}, "b": {"w": [{}, {}]}})
    res = folder / "b" / "w" / "1" / "result.json"
    data = json.loads(res.read_text())
    data["max_concurrency"] = 8
    res.write_text(json.dumps(data))
    [table] = build_tables(load_runs([folder]))
    assert "⚠ b: load differs from the baseline's (max_concurrency 8 vs 2)" in table.notes


def test_loose_result_files_and_folders(tmp_path, folder):
    one = folder / "base" / "w" / "1" / "result.json"
    runs = load_runs([one])
    assert [(r.config, r.workload) for r in runs] == [("base", "")]
    with pytest.raises(InputError, match="does not exist"):
        load_runs([tmp_path / "missing"])


def test_interrupted_runs_without_marker_are_left_out(folder):
    (folder / "capped" / "w" / "2" / "run.json").unlink()
    [table] = build_tables(load_runs([folder]))
    assert table.repeats["capped"] == 1
    assert row(table, "output_throughput").versus["capped"].verdict == "noise unknown"


def test_a_reference_column_gets_ratios_and_flags_differing_conditions(tmp_path, folder):
    ref = tmp_path / "ref.toml"
    ref.write_text('source = "vendor blog"\ndate = 2025-01-02\nhardware = "1x H100 80GB"\nengine_version = "0.9.0"\n'
                   '[workload]\ndataset = "random"\nmax_concurrency = 64\n[numbers]\noutput_throughput = 2020.0\n')
    runs = load_runs([folder])
    [table] = build_tables(runs)
    add_reference(table, load_reference(ref), runs[0])
    label = "ref: vendor blog (2025-01-02)"
    assert table.configs[-1] == label
    assert fmt_versus(row(table, "output_throughput").versus[label]) == "20.00× +1900.0% reference"
    assert row(table, "mean_ttft_ms").cells[label] is None
    note = table.notes[-1]
    assert note.startswith(f"{label}: ⚠ conditions differ from the baseline's: ")
    assert "hardware '1x H100 80GB' vs ours 'CPU only: Test CPU'" in note
    assert "engine_version '0.9.0' vs ours '0.32.0'" in note and "max_concurrency 64 vs ours 2" in note


@pytest.mark.parametrize("text, message", [
    ('date = 2025-01-02\n[numbers]\noutput_throughput = 1.0\n', "source is required"),
    ('source = "x"\ndate = 2025-01-02\n[numbers]\nthroughput = 1.0\n', "numbers.throughput: not a compared metric"),
    ('source = "x"\ndate = 2025-01-02\nhw = "y"\n[numbers]\noutput_throughput = 1.0\n', "unknown field 'hw'"),
])
def test_reference_mistakes(tmp_path, text, message):
    ref = tmp_path / "ref.toml"
    ref.write_text(text)
    with pytest.raises(InputError, match=message):
        load_reference(ref)


def test_two_studies_keep_their_configs_apart(tmp_path):
    a = make_study(tmp_path / "a", {"baseline": {"w": [{}, {}]}}, name="one")
    b = make_study(tmp_path / "b", {"baseline": {"w": [{"output_throughput": 50.0}] * 2}}, name="two")
    [table] = build_tables(load_runs([a, b]))
    assert table.configs == ["one/baseline", "two/baseline"]
    assert row(table, "output_throughput").versus["two/baseline"].verdict == "worse"


def test_a_run_beside_a_busy_neighbour_is_flagged(tmp_path):
    folder = make_study(tmp_path, {"a": {"w": [{}, {}]}, "b": {"w": [{}, {}]}})
    for config, repeat, others in (("a", 1, 0.1), ("b", 2, 0.6)):
        res = folder / config / "w" / str(repeat) / "result.json"
        data = json.loads(res.read_text())
        data["servelab"]["machine"] = {"cpus": 2, "seconds": 10.0, "busy_fraction": others + 0.3,
                                       "ours_fraction": 0.3, "others_fraction": others}
        res.write_text(json.dumps(data))
    [table] = build_tables(load_runs([folder]))
    flagged = [n for n in table.notes if "other programs" in n]
    assert flagged == ["⚠ b repeat 2: other programs kept 60% of the machine's 2 CPUs busy during this run "
                       "(servelab and the engine: 30%); latency figures move with such a neighbour"]


def test_servelab_rows_come_from_the_result_section_and_only_where_runs_have_them(tmp_path):
    folder = make_study(tmp_path, {"a": {"w": [{}]}, "b": {"w": [{}]}})
    figures = {"a": (100.0, 2.0, 5.0), "b": (150.0, 1.5, None)}  # b was not priced: its cell is empty
    for path in folder.rglob("result.json"):
        result = json.loads(path.read_text())
        tok_s, j_per_token, usd = figures[result["label"]]
        result["servelab"]["steady_state"] = {"plateau": True, "output_tok_s": tok_s, "req_s": tok_s / 64}
        result["servelab"]["energy"] = {"run": {"j_per_output_token": j_per_token},
                                        "cost": {"run": {"per_million_output_tokens": usd}} if usd else None}
        path.write_text(json.dumps(result))
    [table] = build_tables(load_runs([folder]))
    assert row(table, "steady_state.output_tok_s").cells["b"].values == (150.0,)
    assert row(table, "steady_state.output_tok_s").versus["b"].ratio == 1.5
    assert row(table, "energy.run.j_per_output_token").versus["b"].ratio == 0.75
    usd = row(table, "energy.cost.run.per_million_output_tokens")
    assert usd.cells == {"a": usd.cells["a"], "b": None} and usd.cells["a"].values == (5.0,)
    assert not any(r.metric.key == "energy.steady_state.j_per_output_token" for r in table.rows)
    assert "↑ steady output tok/s" in render_text([table]) and "↓ $/1M output tokens" in render_text([table])
