"""Hand-built study folders: results with chosen numbers, laid out as ``servelab study run`` does.

    make_study(tmp_path, {"base": {"w": [{"output_throughput": 100}, {"output_throughput": 102}]}})
"""

from __future__ import annotations

import json
from pathlib import Path

LATENCY = {f"{s}_{m}_ms": v for m, v in (("ttft", 100.0), ("tpot", 20.0), ("itl", 20.0), ("e2el", 1000.0))
           for s in ("mean", "median", "p99")}
BASE = {"output_throughput": 100.0, "total_token_throughput": 300.0, "request_throughput": 1.5, **LATENCY}
MEMORY = {"weights_gib": None, "checkpoint_gib": 0.25, "kv_cache_gib": 1.0, "kv_cache_tokens": 46592,
          "max_concurrency": 22.75, "max_concurrency_tokens": 2048, "footprint_gib": 3.0,
          "plan": {"predicted": True, "memory_report": {"kv_cache_tokens": 46592}, "errors": {"kv_cache_tokens": 0.0}}}


def result(numbers: dict, engine: str, workload: str, repeat: int, prompts: int = 4) -> dict:
    return {
        **BASE, **numbers, "completed": prompts, "failed": 0, "num_prompts": prompts, "max_concurrency": 2,
        "request_rate": "inf", "total_input_tokens": 128 * prompts, "total_output_tokens": 64 * prompts,
        "model_id": "/models/SmolLM2", "label": engine,
        "servelab": {
            "interrupted": False, "client_bound": [],
            "provenance": {"flags": {"dataset_name": "random", "seed": 0, "backend": "openai", "burstiness": 1.0},
                           "tokenizer": "/models/SmolLM2", "dataset_path": None},
            "engine": {"name": engine, "kind": "vllm", "model": "/models/SmolLM2", "version": "0.32.0",
                       "args": ["--max-model-len", "2048"], "env": {}, "base_url": "http://127.0.0.1:8200",
                       "config": {"dtype": "torch.bfloat16", "quantization": "None", "device_config": "cpu",
                                  "enable_prefix_caching": "True", "max_seq_len": "2048"},
                       "model_files": {"sha256": "ab" * 32, "files": ["config.json", "model.safetensors"]}},
            "study": {"name": "s", "engine": engine, "workload": workload, "repeat": repeat, "prefix_cache": "reset",
                      "hardware": {"cpu": "Test CPU", "cores": 2, "memory_gib": 24, "gpus": []}},
        },
    }


def records(prompts: int = 4) -> list[dict]:
    out = []
    for i in range(prompts):
        sent = 10.0 * i
        tokens = [sent + 100 + 20 * j for j in range(8)]
        out.append({"request_id": f"r{i}", "sent_ms": sent, "done_ms": tokens[-1] + 1, "ttft_ms": 100.0 + i,
                    "token_ms": tokens, "token_counts": [1] * 8, "error": None})
    return out


def make_study(root: Path, configs: dict[str, dict[str, list[dict]]], name: str = "s",
               prompts_text: str = "hello") -> Path:
    """``configs[engine][workload]`` = the numbers of each repeat. Returns the study folder."""
    folder = root / name
    workloads = list(dict.fromkeys(w for per in configs.values() for w in per))
    study = {"name": name, "description": "a test study", "repeats": 2, "hardware": {"cpu": "Test CPU", "cores": 2},
             "engines": {e: {} for e in configs}, "workloads": {w: {} for w in workloads}}
    folder.mkdir(parents=True)
    (folder / "study.json").write_text(json.dumps(study))
    for engine, per in configs.items():
        for workload, repeats in per.items():
            for i, numbers in enumerate(repeats, start=1):
                res = result(numbers, engine, workload, i)
                _write_run(folder / engine / workload / str(i), res, prompts_text, name)
    return folder


def _write_run(run: Path, res: dict, prompt: str, study: str) -> None:
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps(res))
    (run / "result.records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()))
    (run / "memory.json").write_text(json.dumps(MEMORY))
    (run / "prompts.json").write_text(json.dumps([{"prompt": prompt, "prompt_len": 3, "output_len": 64}]))
    marker = {"study": study, "engine": res["servelab"]["study"]["engine"], "workload": res["servelab"]["study"]["workload"],
              "repeat": res["servelab"]["study"]["repeat"], "result": "result.json", "config_hash": "x"}
    (run / "run.json").write_text(json.dumps(marker))
