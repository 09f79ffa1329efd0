#!/usr/bin/env bash
# servelab's GPU paths on a real GPU, in one pass (a lent machine's time is short): the pre-flight
# check, the live NVML tests, a bench run's energy section with the GPU under load, and the roofline
# measurement (bench/gpu_roofline.py). Writes everything under $OUT (default ./gpu-check).
#
# Needs python3 with torch (CUDA) and nvidia-ml-py; servelab's own dependencies (numpy, tokenizers,
# uvloop, psutil, jinja2, prometheus_client) and the Qwen3 tokenizer package, which may come
# from an extra folder on PYTHONPATH: EXTRA_SITE=path/to/site bash bench/gpu_check.sh
set -u
OUT=${OUT:-$PWD/gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/check.log") 2>&1
export PYTHONPATH="$PWD/src${EXTRA_SITE:+:$EXTRA_SITE}" PYTHONUNBUFFERED=1
PY=${PY:-python3}
step() { echo; echo "=== $* ($(date +%T))"; }

step environment
nvidia-smi --query-gpu=name,memory.total,power.limit,clocks.max.sm,driver_version --format=csv
$PY -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0))"
$PY -c "import vllm" 2>&1 | tail -1

step "servelab gpu"
$PY -m servelab.cli.main gpu | tee "$OUT/gpu.txt"
$PY -m servelab.cli.main gpu --json > "$OUT/gpu.json"

step "NVML and energy tests (live and faked)"
timeout 120 $PY -m pytest -q -p no:cacheprovider tests/telemetry/test_nvml_live.py tests/telemetry/test_nvml.py \
    tests/cli/test_gpu.py tests/measure/test_energy_cost.py 2>&1 | tail -15

step "bench against the mock with the GPU under load: the energy section"
$PY -m servelab.cli.main mock --port 8123 --ttft-ms 20 --itl-ms 5 > /tmp/servelab-mock.log 2>&1 &
MOCK=$!
$PY - <<'EOF' &
import time, torch
a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
end = time.time() + 25
while time.time() < end:
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
EOF
LOAD=$!
sleep 4
timeout 120 $PY -m servelab.cli.main bench --base-url http://127.0.0.1:8123 --model mock --dataset-name random \
    --random-input-len 128 --random-output-len 256 --num-prompts 500 --max-concurrency 32 --gpu-hour-cost 3.5 \
    --save-result --result-dir "$OUT/bench" 2>&1 | grep -E "servelab: (energy|cost|steady)|Output token|Benchmark duration|Successful"
kill $MOCK 2>/dev/null; wait $LOAD
$PY - "$OUT"/bench/*.json <<'EOF'
import json, sys
for path in sys.argv[1:]:
    if path.endswith(".json"):
        print(json.dumps(json.load(open(path))["servelab"].get("energy"), indent=1)[:2000])
EOF

step "roofline"
timeout 400 $PY bench/gpu_roofline.py measure --out "$OUT/roofline.json" 2>&1 | tail -40
step done
