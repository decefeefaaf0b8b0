#!/usr/bin/env bash
# bench/gpu_smoke.sh — one device call that checks the main paths still work on a real GPU after CPU-only changes:
#   1. the 7B QLoRA recipe (bench/gpu_suite.sh's issue2 stage: random Qwen2.5-7B-shaped checkpoint, 20 steps,
#      recorded peak against nvidia-smi at 100 ms);
#   2. the embedded tiny recipe (bench/tiny_gpu_peak.sh: estimate against the measured peaks);
#   3. a user's own QLoRA script watched (`loratui run --headless -- python bench/seed_qlora_7b.py`), then
#      `loratui replay --summary` of it and `loratui doctor` of its output.
# On the device, from the repo root, wheels in .whl/ (../shared/GPU.md):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD && OUT=$OUT bash bench/gpu_smoke.sh
set -u
OUT=${OUT:-/tmp/gpu_smoke_out}; PY=${PY:-python3}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
mkdir -p "$OUT"
STAGES="issue2" SUITE_BUDGET_S=${SUITE_BUDGET_S:-300} OUT="$OUT/suite" bash bench/gpu_suite.sh > "$OUT/suite.txt" 2>&1
echo "suite rc=$?"; grep -E "ISSUE2|peak|estimate|ENV|CKPT" "$OUT/suite/summary.txt" | cut -c1-400
OUT="$OUT/tiny" bash bench/tiny_gpu_peak.sh > "$OUT/tiny.txt" 2>&1; echo "tiny rc=$?"; tail -4 "$OUT/tiny.txt" | cut -c1-400
grep -h "peak device used\|Error\|error" "$OUT"/tiny/run.txt | tail -3 | cut -c1-300
timeout 200 $PY -m loratui run --headless --runs-dir "$OUT/seed_runs" -- $PY bench/seed_qlora_7b.py --model /tmp/q7b \
  --max-steps 12 --batch 4 --seq 1024 > "$OUT/seed.txt" 2>&1
echo "seed watched rc=$?"; grep -v "^SEED" "$OUT/seed.txt" | tail -6 | cut -c1-300
$PY -m loratui replay --runs-dir "$OUT/seed_runs" --summary > "$OUT/seed_summary.json" 2>&1
echo "replay rc=$?"; $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in list(d)[:14]})' \
  "$OUT/seed_summary.json" 2>&1 | cut -c1-1200
$PY -m loratui doctor "$OUT/seed.txt" 2>&1 | head -8 | cut -c1-300
tar -C "$OUT" -cJf "$OUT/raw.tar.xz" --exclude='*.tar.xz' suite/summary.txt suite/logs tiny/estimate.txt tiny/run.txt seed.txt seed_summary.json 2>/dev/null
