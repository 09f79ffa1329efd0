"""Engine facts read once per start: the config line, the launch line, the model's hash; log slices."""

import hashlib

from servelab.measure.facts import launch_line, model_identity, parse_engine_config
from servelab.engines.vllm import reset_prefix_cache
from servelab.study.session import write_log_slice

CONFIG_LINE = ("(EngineCore pid=1) INFO 11-29 19:43:19 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with "
               "config: model='/m/SmolLM2', speculative_config=None, tokenizer='/m/SmolLM2', revision=None, "
               "dtype=torch.bfloat16, max_seq_len=2048, quantization=None, enforce_eager=True, kv_cache_dtype=auto, "
               "device_config=cpu, seed=0, enable_prefix_caching=False, enable_chunked_prefill=True, "
               "compilation_config={'mode': 0}")


def test_the_engine_config_line_is_read_field_by_field():
    assert parse_engine_config("noise\n" + CONFIG_LINE + "\nmore") == {
        "version": "0.32.0", "dtype": "torch.bfloat16", "quantization": "None", "device_config": "cpu",
        "kv_cache_dtype": "auto", "max_seq_len": "2048", "enforce_eager": "True", "seed": "0",
        "enable_prefix_caching": "False", "enable_chunked_prefill": "True", "revision": "None",
        "tokenizer": "/m/SmolLM2"}
    assert parse_engine_config("a llama.cpp log") == {}


def test_the_launch_line_is_the_logs_header():
    log = "# servelab engine 'b' (vllm): VLLM_CPU_KVCACHE_SPACE=1 python -m vllm --model /m\nrest"
    assert launch_line(log) == "VLLM_CPU_KVCACHE_SPACE=1 python -m vllm --model /m"
    assert launch_line("no header") is None


def test_a_local_model_is_hashed_over_its_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1024)
    (tmp_path / "README.md").write_text("not part of the model")
    found = model_identity(str(tmp_path))
    expected = hashlib.sha256(b"config.json\0{}" + b"model.safetensors\0" + b"\0" * 1024).hexdigest()
    assert found["sha256"] == expected and found["files"] == ["config.json", "model.safetensors"]
    assert found["weights_gib"] == round(1024 / 2**30, 4)
    assert model_identity("Qwen/Qwen3-8B") == {"name": "Qwen/Qwen3-8B", "local": False, "sha256": None,
                                              "note": "not a local path: no hash"}


def test_a_runs_log_is_the_start_then_only_that_run(tmp_path):
    log = tmp_path / "engine.log"
    log.write_bytes(b"START\n" + b"run1\n" + b"run2\n")
    write_log_slice(log, tmp_path / "slice.log", head_end=6, run_from=11)
    assert (tmp_path / "slice.log").read_bytes() == b"START\n\n# servelab: 5 bytes of earlier runs left out\nrun2\n"


def test_reset_prefix_cache_says_what_happened(mock_server):
    assert reset_prefix_cache(mock_server().url) in ("reset", "unsupported")
    assert reset_prefix_cache("http://127.0.0.1:9") == "failed"
