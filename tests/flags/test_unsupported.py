"""flags/unsupported.py: what servelab cannot do is refused the same way by every
command that takes the dataset flags, and stops being refused when implemented."""

from __future__ import annotations

import pytest

from servelab.cli.main import main
from servelab.errors import InputError
from servelab.flags import unsupported


@pytest.mark.parametrize("extra, needle", [
    (["--dataset-name", "random-rerank"], "random-rerank is not supported: makes (query, documents)"),
    (["--dataset-name", "custom_image"], "custom_image is not supported: sends images"),
    (["--random-batch-size", "2"], "--random-batch-size is not supported"),
])
def test_data_inspect_refuses_like_bench(extra, needle, qwen3_path, capsys):
    rc = main(["data", "inspect", "--tokenizer", qwen3_path, *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.splitlines() == [f"servelab: error: {err.split('error: ', 1)[1]}"] and needle in err


def test_a_dataset_stops_being_refused_once_a_sampler_exists(monkeypatch):
    from servelab import datasets

    sampler = datasets.SAMPLERS["burstgpt"]
    monkeypatch.delitem(datasets.SAMPLERS, "burstgpt")
    with pytest.raises(InputError, match="burstgpt is not supported yet"):
        unsupported.check_dataset("burstgpt")
    monkeypatch.setitem(datasets.SAMPLERS, "burstgpt", sampler)
    unsupported.check_dataset("burstgpt")  # no error: the list of choices is one place, the samplers another


def test_every_refused_flag_is_a_real_option_with_vllms_default():
    defaults = unsupported._defaults()
    assert set(defaults) == set(unsupported.FLAG_REASONS)
    assert defaults["random_batch_size"] == 1 and defaults["enable_multimodal_chat"] is False
