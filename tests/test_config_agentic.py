"""config.py for agentic sessions: which driver runs them, and the flags they refuse."""

from __future__ import annotations

import pytest

from servelab.config import BenchSpec, DatasetSpec, LoadSpec, MultiTurnSpec, ServerSpec

from servelab.spec_checks import check_spec
from servelab.errors import InputError
from servelab.sim.model import EngineLimits, StepModel


@pytest.mark.parametrize("name", ["weka", "agentic"])
def test_agentic_datasets_run_on_the_sessions_driver(name):
    assert BenchSpec(dataset=DatasetSpec(name=name, path="t.jsonl")).driver == "sessions"


def test_agentic_sessions_with_simulate_run_on_the_simulated_sessions_driver():
    spec = BenchSpec(dataset=DatasetSpec(name="agentic"), simulate=(EngineLimits(), StepModel()))
    check_spec(spec)
    assert spec.driver == "simulated_sessions"


@pytest.mark.parametrize("load, driver", [(LoadSpec(workers=2), "sessions_workers"),
                                          (LoadSpec(ray="auto"), "sessions_ray")], ids=["workers", "ray"])
def test_agentic_sessions_split_between_workers_or_ray_nodes_on_their_own_drivers(load, driver):
    spec = BenchSpec(dataset=DatasetSpec(name="agentic"), load=load)
    check_spec(spec)
    assert spec.driver == driver


def test_agentic_sessions_refuse_multi_turn():
    spec = BenchSpec(server=ServerSpec(backend="openai-chat"), dataset=DatasetSpec(name="agentic"),
                     multi_turn=MultiTurnSpec(enabled=True))
    with pytest.raises(InputError, match="^--multi-turn needs --dataset-name sharegpt or custom, not agentic$"):
        check_spec(spec)


def test_a_bad_trace_scale_is_refused():
    with pytest.raises(InputError, match=r"^--trace-scale must be > 0, not -1\.0$"):
        check_spec(BenchSpec(dataset=DatasetSpec(name="weka", path="t", trace_scale=-1.0)))
    with pytest.raises(InputError, match="^--trace-scale is for --dataset-name weka or otel or agentic, not random$"):
        check_spec(BenchSpec(dataset=DatasetSpec(trace_scale=0.5)))
    check_spec(BenchSpec(dataset=DatasetSpec(name="weka", path="t", trace_scale=0.5)))  # accepted


def test_an_agentic_shape_on_another_dataset_is_refused():
    with pytest.raises(InputError, match="^--agentic-shape is for --dataset-name agentic, not random$"):
        check_spec(BenchSpec(dataset=DatasetSpec(agentic_shape=(("turns", "2:3"),))))


def test_a_wait_cap_is_for_agentic_datasets_and_not_negative():
    with pytest.raises(InputError, match="^--trace-max-wait is for --dataset-name weka or otel or agentic, not random$"):
        check_spec(BenchSpec(dataset=DatasetSpec(trace_max_wait_s=10.0)))
    with pytest.raises(InputError, match=r"^--trace-max-wait must be >= 0 seconds, not -1\.0$"):
        check_spec(BenchSpec(dataset=DatasetSpec(name="agentic", trace_max_wait_s=-1.0)))


def test_max_sessions_is_for_agentic_sessions_a_whole_lane_count_and_one_process():
    with pytest.raises(InputError, match=r"^--max-sessions is for --dataset-name weka or otel or agentic, not random "
                                         r"\(--max-concurrency caps requests\)$"):
        check_spec(BenchSpec(load=LoadSpec(max_sessions=2)))
    with pytest.raises(InputError, match="^--max-sessions must be >= 1, not 0$"):
        check_spec(BenchSpec(dataset=DatasetSpec(name="agentic"), load=LoadSpec(max_sessions=0)))
    for split, load in (("--workers", LoadSpec(max_sessions=2, workers=2)), ("--ray", LoadSpec(max_sessions=2, ray="auto"))):
        with pytest.raises(InputError, match=f"^--max-sessions with {split}: a lane is held in one client process"):
            check_spec(BenchSpec(dataset=DatasetSpec(name="agentic"), load=load))
    check_spec(BenchSpec(dataset=DatasetSpec(name="agentic"), load=LoadSpec(max_sessions=2)))  # accepted
    check_spec(BenchSpec(dataset=DatasetSpec(name="agentic"), load=LoadSpec(max_sessions=1),
                         simulate=(EngineLimits(), StepModel())))  # the simulator holds lanes too


def test_max_sessions_from_the_command_line_is_one_line_without_a_traceback(capsys):
    from servelab.cli.main import main

    assert main(["bench", "--base-url", "http://127.0.0.1:9", "--dataset-name", "random", "--max-sessions", "4",
                 "--tokenizer", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-sessions is for --dataset-name" in err[0]
