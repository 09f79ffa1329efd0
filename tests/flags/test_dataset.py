"""servelab/flags/dataset.py: vLLM's dataset flags parse; what cannot run here says why in one line."""

from __future__ import annotations

import argparse

import pytest

from servelab.config import DatasetSpec
from servelab.datasets import UNSUPPORTED, sample_requests
from servelab.errors import InputError
from servelab.flags.dataset import add_dataset_arguments, dataset_spec_from_args


def parse(argv):
    parser = argparse.ArgumentParser()
    add_dataset_arguments(parser)
    return dataset_spec_from_args(parser.parse_args(argv))


def test_new_dataset_flags_reach_the_spec():
    spec = parse(["--dataset-name", "timed_trace", "--timed-trace-chunk-hash-size", "512",
                  "--timed-trace-sec-multiplier", "0.001", "--timed-trace-label-hash-ids", "hashes",
                  "--spec-bench-output-len", "64", "--speed-bench-dataset-subset", "throughput_2k"])
    assert (spec.name, spec.timed_trace_chunk_hash_size, spec.timed_trace_sec_multiplier) == ("timed_trace", 512, 0.001)
    assert (spec.timed_trace_label_hash_ids, spec.spec_bench_output_len) == ("hashes", 64)
    assert spec.speed_bench_dataset_subset == "throughput_2k"


def test_vllm_only_flags_parse_for_the_datasets_that_stop():
    spec = parse(["--dataset-name", "hf", "--hf-name", "x/y", "--hf-split", "train", "--no-stream",
                  "--no-reranker", "--blazedit-min-distance", "0.1", "--random-mm-bucket-config", "{}"])
    assert (spec.name, spec.hf_name, spec.hf_split, spec.hf_stream, spec.blazedit_min_distance) == (
        "hf", "x/y", "train", False, 0.1)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_datasets_that_cannot_run_here_say_why(name):
    with pytest.raises(InputError, match=f"^--dataset-name {name} .{{20,}}") as err:
        sample_requests(DatasetSpec(name=name, path="x"), tokenizer=None)
    assert "\n" not in str(err.value)
