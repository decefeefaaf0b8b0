#!/usr/bin/env bash
# bench/unattended_h200.sh — issue 19 on the H200: pre-flight refusal with another process holding all but
# 24 GiB; then --force with [guard] on a simulated 32 GiB card (LORATUI_TEST_CARD_GIB): OOM, guard restart with
# the predicted move, finish under the 30 GiB line. Run from the repo root on the device with the wheels:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD && bash bench/unattended_h200.sh
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/unattended_out}; mkdir -p "$OUT"; S="$OUT/summary.txt"; : > "$S"
T0=$(date +%s); note() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$S"; }
python3 bench/make_random_ckpt.py /tmp/q7b > "$OUT/ckpt.log" 2>&1; note "ckpt: $(tail -1 "$OUT/ckpt.log")"
python3 bench/make_bench_data.py /tmp/loratui_bench/data.jsonl 12 >> "$OUT/ckpt.log" 2>&1
R=/tmp/unattended; mkdir -p $R
sed -e 's/^load_in_4bit = true.*/load_in_4bit = false/' -e 's/^per_device_train_batch_size = 4.*/per_device_train_batch_size = 1/' \
    -e 's/^gradient_accumulation_steps = 4.*/gradient_accumulation_steps = 1/' \
    -e 's/^gradient_checkpointing = true.*/gradient_checkpointing = false/' -e "s/^max_length = 1024.*/max_length = 2048/" \
    -e 's/^optim = .*/optim = "adamw_torch"/' -e 's/^save_steps = .*/save_steps = 4/' -e 's/^dataloader_num_workers = .*/dataloader_num_workers = 0/' \
    -e 's#^path = "Qwen/Qwen2.5-7B-Instruct".*#path = "/tmp/q7b"#' bench/qwen7b_seq1024.toml > $R/bf16.toml
printf '\n[guard]\nenabled = true\n' >> $R/bf16.toml
cp $R/bf16.toml "$OUT/bf16.toml"
# 1. another process holds all but 24 GiB: the pre-flight refuses before loading anything
python3 - <<'PY' > "$OUT/hog.log" 2>&1 &
import time, torch
free, total = torch.cuda.mem_get_info()
hog = torch.empty(int(total - 24 * 2**30 - 0.6 * 2**30), dtype=torch.uint8, device="cuda")
print("HOG", hog.numel() / 2**30, flush=True)
time.sleep(600)
PY
HOG=$!
for i in $(seq 60); do grep -q HOG "$OUT/hog.log" && break; sleep 1; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> "$OUT/hog.log"
t=$(date +%s%N); python3 -m loratui run $R/bf16.toml --headless --runs-dir $R/runs > "$OUT/preflight.txt" 2>&1; rc=$?
note "preflight: rc=$rc in $((($(date +%s%N) - t) / 1000000)) ms, run dirs: $(ls $R/runs 2>/dev/null | wc -l)"
cat "$OUT/preflight.txt" | tee -a "$S"
kill $HOG; wait $HOG 2>/dev/null
# 2. --force with [guard] on a simulated 32 GiB card: OOM, guard, restart, finish under the line
LORATUI_TEST_CARD_GIB=32 timeout 420 python3 -m loratui run $R/bf16.toml --headless --force --max-steps 8 \
  --runs-dir $R/runs > "$OUT/guard.txt" 2>&1; note "guard run: rc=$?"
RUN=$(ls -d $R/runs/*/ | tail -1)
cp "$RUN/events.jsonl" "$OUT/events.jsonl"; ls $R >> "$S"
python3 - "$RUN" <<'PY' | tee -a "$S"
import json, sys
from pathlib import Path
ev = [json.loads(l) for l in (Path(sys.argv[1]) / "events.jsonl").read_text().splitlines() if l.strip()]
for e in ev:
    if e["kind"] == "notice" and e.get("key") in ("guard", "alert", "estimate", "guard_skip"):
        print("NOTICE", e["key"], e["message"][:400])
    if e["kind"] in ("train_begin", "end", "estimate"):
        print(e["kind"].upper(), {k: v for k, v in e.items() if k not in ("versions", "components", "config", "error")})
lives, cur = [], None
for e in ev:
    if e["kind"] == "train_begin": cur = {"peak": 0, "steps": 0}; lives.append(cur)
    if cur is not None and e["kind"] == "sample": cur["peak"] = max(cur["peak"], e["used_max"])
    if cur is not None and e["kind"] == "step": cur["steps"] += 1
for i, l in enumerate(lives):
    print(f"LIFE {i}: steps {l['steps']}, device-used peak {l['peak'] / 2**30:.2f} GiB")
PY
tail -5 "$OUT/guard.txt" >> "$S"
cat "$S" | tail -40
