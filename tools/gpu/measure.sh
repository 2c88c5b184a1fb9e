#!/bin/bash
# Every GPU measurement this repository reports, in one command from the repository root on a machine with a
# CUDA device (about 8 minutes on one H100):
#   sampling: the FFHQ, Places2 and ImageNet transformers at batch 1 and 10, 1 and 20 tokens per step, eager and
#             the captured engine; compile: FFHQ with a compiled forward; stage_batch: each preset at the sample stage's
#             batch 64 (what the cost table's sampling figure is modelled at);
#   pvqvae:   P-VQVAE inference at batch 64;
#   train:    both training stages of the three presets at the per-GPU batch of 1, 2, 4 and 8 GPUs;
#   authors:  the authors' released sampling loop on the same GPU (their code in $AUTHORS);
#   cost:     `put cost --page docs/speed-and-cost.md` (cost.json and that page's tables from the new rows);
#   test_gpu: the CUDA correctness tests (`make test-gpu`).
# Results: reports/benchmarks/*_cuda_<gpu>.json (commit them), logs in .gpu/logs/; copied to $OUT when that is set
# (the device tool's output folder). Prepare once on a machine with internet: `make gpu-prepare AUTHORS_GIT=...`
# (wheels of what the GPU machine's Python lacks, and the authors' code). STEPS="sampling train" runs some only:
# where one command may take at most 10 minutes, run STEPS="sampling compile stage_batch pvqvae train authors cost"
# and then STEPS=test_gpu (each step's time limit is below; the estimates are not yet measured).
set -u
cd "$(dirname "$0")/../.."
. tools/gpu/env.sh
LOGS=$GPU_DIR/logs
BENCH=reports/benchmarks
AUTHORS=${AUTHORS:-$GPU_DIR/authors}
STEPS=${STEPS:-sampling compile stage_batch pvqvae train authors cost test_gpu}
export PUT_TRACKING=0 TQDM_DISABLE=1 PYTHONUNBUFFERED=1
mkdir -p "$LOGS"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$LOGS/device.txt"
TAG=$("$PY" -c "
import re, torch
name = torch.cuda.get_device_name().lower().replace('nvidia', '')
found = re.search(r'[a-z]+[0-9]+[a-z]*', name)
print(found.group(0) if found else 'gpu')") || { echo "no CUDA device usable from $PY" >&2; exit 2; }
echo "device tag: $TAG; python: $PY; $("$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__)')"

failed=""
step() {  # name, time limit (s), command...
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  case " $STEPS " in *" $name "*) ;; *) return ;; esac
  echo "== $name"
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  grep -vE "Warning|warn\(" "$LOGS/$name.log" | tail -n 30
  echo "== $name: exit $rc after $((SECONDS - start)) s"
  [ "$rc" = 0 ] || failed="$failed $name"
}

PUT="$PY -m put"
step sampling 240 $PUT bench sampling --device cuda --bf16 --steps 20 --preset ffhq places2 imagenet --batch 1 10 \
  --tokens-per-step 1 20 --engine eager graph --out "$BENCH/sampling_cuda_$TAG.json"
step compile 200 $PUT bench sampling --device cuda --bf16 --steps 20 --preset ffhq --batch 1 10 --engine compile \
  --out "$BENCH/sampling_compile_cuda_$TAG.json"
step stage_batch 120 $PUT bench sampling --device cuda --bf16 --steps 20 --preset ffhq places2 imagenet --batch 64 --engine graph \
  --out "$BENCH/sampling_b64_cuda_$TAG.json"
step pvqvae 60 $PUT bench pvqvae --device cuda --bf16 --preset ffhq --batch 64 --out "$BENCH/pvqvae_cuda_$TAG.json"
step train 300 $PUT bench train --device cuda --steps 3 --preset ffhq places2 imagenet --gpu-counts 1 2 4 8 \
  --out "$BENCH/train_cuda_$TAG.json"
step authors 150 "$PY" tools/gpu/authors_bench.py --official "$AUTHORS" --device cuda --batch 1 10 --masked 48 \
  --out "$BENCH/authors_sampling_cuda_$TAG.json"
step cost 60 $PUT cost --page docs/speed-and-cost.md
step test_gpu 480 "$PY" -m pytest -q -m gpu tests/gpu -p no:cacheprovider

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT/reports/benchmarks" "$OUT/logs" "$OUT/docs"
  cp "$BENCH"/*cuda*.json "$BENCH"/cost.json "$OUT/reports/benchmarks/" 2>/dev/null
  cp docs/speed-and-cost.md "$OUT/docs/" && cp "$LOGS"/* "$OUT/logs/"
fi
[ -z "$failed" ] || { echo "failed:$failed (logs in $LOGS)"; exit 1; }
echo "all steps passed; commit reports/benchmarks/ and docs/speed-and-cost.md"
