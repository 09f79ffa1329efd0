"""The sweep's PNG curves: the operating point circled where the verdict names it, load
labels that do not overlap however dense a bisection made the points, and SIMULATED on
every figure of a simulated engine's sweep."""

import pytest

from servelab.config import BenchSpec
from servelab.engines.spec import EngineSpec
from servelab.search.knee import find_knee
from servelab.search.points import Point
from servelab.search.slo import search
from servelab.study.entries import EngineEntry
from servelab.sweep.ladder import SweepOutcome, SweepPlan
from servelab.sweep.plots import _pyplot, figures, labelled_loads

pytest.importorskip("matplotlib")

# issue 19 item 5: a ladder 4, 16, 64 bisected at 28, 34, 37, 40 for ttft:500; flat from 34 on
THROUGHPUT = {4: 620.0, 16: 1650.0, 28: 2290.0, 34: 2499.7, 37: 2499.7, 40: 2499.7, 64: 2499.7}
E2EL = {4: 200.0, 16: 300.0, 28: 380.0, 34: 420.0, 37: 450.0, 40: 480.0, 64: 735.0}
TTFT = {4: 100.0, 16: 300.0, 28: 450.0, 34: 520.0, 37: 540.0, 40: 560.0, 64: 900.0}


def point(c: float) -> Point:
    latency = {"median_e2el": E2EL[c], "p99_e2el": E2EL[c], "p99_ttft": TTFT[c], "median_ttft": TTFT[c] / 2,
               "median_tpot": 12.0, "p99_tpot": 15.0}
    return Point(c, THROUGHPUT[c], latency, request_throughput=THROUGHPUT[c] / 64, goodput=1.0)


def outcome(kind: str = "sim", loads=tuple(THROUGHPUT)) -> SweepOutcome:
    plan = SweepPlan("s", EngineEntry(kind, EngineSpec(name=kind, kind=kind, model="m")), BenchSpec(), (4, 16, 64),
                     slo={"p99_ttft": 500.0})
    pts = [point(c) for c in loads]
    slo = search(lambda c: point(c), [4, 16, 64], plan.slo, max_bisect=0)
    return SweepOutcome(plan, pts, find_knee(pts), [p for p in pts if p.load in plan.ladder], slo)


@pytest.fixture
def plt():
    plt = _pyplot()
    yield plt
    plt.close("all")


def test_the_throughput_plot_circles_the_operating_point_not_the_plateaus_end(plt):
    ax = figures(plt, outcome())["sweep-throughput.png"].axes[0]
    marks = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    assert marks["operating point"] == [34] and marks["saturated"] == [37]


def test_a_dense_ladder_labels_only_loads_far_enough_apart_the_operating_point_first():
    assert labelled_loads([4, 16, 28, 34, 37, 40, 64], [34]) == [4, 16, 34, 64]
    assert labelled_loads([4, 16, 28, 34, 37, 40, 64]) == [4, 16, 28, 37, 64]
    assert labelled_loads([1, 2, 4, 8, 16, 32, 64]) == [1, 2, 4, 8, 16, 32, 64]  # a geometric ladder: all


@pytest.mark.parametrize("name", ["sweep-throughput.png", "sweep-goodput.png"])
def test_load_labels_do_not_overlap_and_every_load_keeps_a_tick(plt, name):
    fig = figures(plt, outcome())[name]
    ax = fig.axes[0]
    fig.canvas.draw()
    boxes = sorted((t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()), key=lambda b: b.x0)
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:])) and len(boxes) == 4
    ticks = [*ax.xaxis.get_majorticklocs(), *ax.xaxis.get_minorticklocs()]
    assert sorted(ticks) == list(THROUGHPUT)
    assert [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()] == []


def test_every_figure_of_a_simulated_sweep_says_simulated(plt):
    for name, fig in figures(plt, outcome("sim")).items():
        assert any(t.get_text().startswith("SIMULATED: ") for t in fig.texts), name
    for name, fig in figures(plt, outcome("vllm")).items():
        assert not any("SIMULATED" in t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))), name
