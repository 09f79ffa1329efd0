"""The error bands the planner prints. That they are what the corpus gives is a CI step of its own
(``tools/plan_accuracy.py --check``), not a test."""

from servelab.planner.bands import Band, band_note, load_bands


def test_a_band_says_what_it_rests_on():
    assert Band("kv_gib", 0.036, 0.051, 0.6, 6, "all rows").text() == \
        "±3.6% median, ±5.1% p90 on 6 rows, fit and held-out"
    assert Band("mean_tpot_ms", 0.092, 0.389, 0.389, 5, "held-out").text() == \
        "±9.2% median, ±38.9% p90 on 5 held-out rows"


def test_every_printed_metric_has_a_band():
    assert {"kv_gib", "weights_gib", "other_gib", "mean_tpot_ms", "mean_ttft_ms", "output_tok_s"} <= set(load_bands())
    assert band_note("no such metric") == ""


def test_plan_prints_the_fitted_speed_with_bands_only_where_runs_calibrate_the_family():
    from servelab.reports.plan_text import format_plan
    from servelab.planner import GPUS, PlanSpec, find_model, make_plan

    model = find_model("Qwen3-14B")
    hopper = format_plan(make_plan(PlanSpec(model=model, gpu=GPUS["H100"], max_model_len=8192)))
    gddr = format_plan(make_plan(PlanSpec(model=model, gpu=GPUS["A40"], max_model_len=8192)))
    assert "speed (predicted; fitted on" in hopper and "TPOT, 1 request" in hopper
    assert "held-out rows)" in hopper.split("speed (predicted")[1]
    assert "speed (predicted" not in gddr
    assert "roofline: a lower bound of latency, an upper bound of throughput" in gddr


def test_a_setup_band_says_which_way_the_model_missed():
    assert Band("mean_tpot_ms@moe", 0.154, 0.162, 0.17, 6, "not fitted", -0.154).text() == \
        "-15.4% median, predicted low; ±16.2% p90 on 6 such rows, none fitted"
    assert Band("mean_tpot_ms@eager", 0.355, 0.355, 0.355, 1, "not fitted", -0.355).text().endswith(
        "on 1 such row, none fitted")


def test_setups_the_step_model_has_no_term_for():
    from servelab.planner import find_model
    from servelab.planner.speed_model import SETUPS, setup_class

    dense, moe = find_model("Qwen3-14B"), find_model("Qwen3-30B-A3B")
    assert setup_class(dense, 1, False) is None and setup_class(dense, 2, False) is None
    assert setup_class(moe, 1, False) == "@moe"
    assert setup_class(dense, 1, True) == "@eager"
    assert setup_class(moe, 8, True) == "@tp-over-2"  # the first that applies names it
    # the corpus has rows of each, so each prints its own band, whichever key the caller asks with
    bands = load_bands()
    for setup in SETUPS:
        own = bands["mean_tpot_ms" + setup]
        assert own.basis == "not fitted" and own.bias is not None
        assert band_note("mean_tpot_ms@concurrency-1", setup) == f" ({own.text()})"
    # a setup the corpus has no band for falls back to the general one
    assert band_note("mean_tpot_ms@concurrency-1", "@none-such") == band_note("mean_tpot_ms@concurrency-1")
    assert Band("x", 0.0, 0.1, 0.1, 2, "not fitted", 0.0).text().startswith("+0.0% median, predicted neither")


def test_plan_of_a_moe_prints_the_band_of_published_moe_runs_and_says_what_lies_beyond_the_fit():
    from servelab.reports.plan_text import format_plan
    from servelab.planner import GPUS, PlanSpec, find_model, make_plan

    text = format_plan(make_plan(PlanSpec(model=find_model("Qwen3-30B-A3B"), gpu=GPUS["A100-80GB"],
                                          max_model_len=8192)))
    speed = text.split("speed (predicted")[1].split("speed floor")[0]
    moe = load_bands()["mean_tpot_ms@moe"]
    side = "high" if moe.bias > 0 else "low"
    assert f"{moe.bias:+.1%} median, predicted {side}" in speed and "such rows, none fitted" in speed
    assert "beyond the fit: a mixture of experts" in speed and "not modelled" not in speed
    assert "held-out rows)" not in speed  # the general band would understate this setup's miss
