#!/usr/bin/env bash
# bench/guard_verdict_h200.sh — issue 28 on the H200: the guard's verdicts on a simulated 32 GiB card
# (LORATUI_TEST_CARD_GIB, torch's per-process memory fraction) with a random 7B checkpoint.
#   A. bf16 LoRA, batch 1 x 2048, no checkpointing: OOM; the guard restarts with its predicted move; verdict
#      "recovered" with the measured peak against the predicted one.
#   B. the same, but another process takes all but 20 GiB of the card after the guard's action, before the
#      restarted life loads: the move no longer fits; verdict "NOT recovered", then a stop with its alert.
#   C. QLoRA, a weight poisoned with NaN after step 5 (LORATUI_TEST_NAN_AT_STEP, original recipe only): the
#      guard resumes from the checkpoint before the bad step with the learning rate halved; "recovered".
# Run from the repo root on the device, with the wheels:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD && bash bench/guard_verdict_h200.sh
# PARTS="A B" (default "A B C") runs only those: a device call may last 600 s at most.
set -u
PARTS=${PARTS:-A B C}; want() { [[ " $PARTS " == *" $1 "* ]]; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/guard_out}; mkdir -p "$OUT"; S="$OUT/summary.txt"; : > "$S"
T0=$(date +%s); note() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$S"; }
python3 bench/make_random_ckpt.py /tmp/q7b > "$OUT/ckpt.log" 2>&1; note "ckpt: $(tail -1 "$OUT/ckpt.log")"
python3 bench/make_bench_data.py /tmp/loratui_bench/data.jsonl 12 >> "$OUT/ckpt.log" 2>&1
R=/tmp/guardv.$$; mkdir -p $R
common=(-e 's#^path = "Qwen/Qwen2.5-7B-Instruct".*#path = "/tmp/q7b"#' -e 's/^dataloader_num_workers = .*/dataloader_num_workers = 0/'
        -e 's/^optim = .*/optim = "adamw_torch"/')
sed "${common[@]}" -e 's/^load_in_4bit = true.*/load_in_4bit = false/' -e 's/^per_device_train_batch_size = 4.*/per_device_train_batch_size = 1/' \
    -e 's/^gradient_accumulation_steps = 4.*/gradient_accumulation_steps = 1/' -e 's/^save_steps = .*/save_steps = 4/' \
    -e 's/^gradient_checkpointing = true.*/gradient_checkpointing = false/' -e "s/^max_length = 1024.*/max_length = 2048/" \
    bench/qwen7b_seq1024.toml > $R/bf16.toml
printf '\n[guard]\nenabled = true\nmax_actions = 3\n' >> $R/bf16.toml
sed "${common[@]}" -e 's/^per_device_train_batch_size = 4.*/per_device_train_batch_size = 1/' \
    -e 's/^gradient_accumulation_steps = 4.*/gradient_accumulation_steps = 1/' -e 's/^save_steps = .*/save_steps = 2/' \
    -e "s/^max_length = 1024.*/max_length = 512/" bench/qwen7b_seq1024.toml > $R/qlora.toml
printf '\n[guard]\nenabled = true\n' >> $R/qlora.toml
cp $R/*.toml "$OUT/"

story() {  # the guard's notices, each life's peak and the end, from a run's log
python3 - "$1" <<'PY'
import json, sys
from pathlib import Path
ev = [json.loads(l) for l in (Path(sys.argv[1]) / "events.jsonl").read_text().splitlines() if l.strip()]
lives, cur = [], None
for e in ev:
    if e["kind"] == "notice" and e.get("key") in ("guard", "guard_verdict", "guard_skip", "estimate"):
        print("  NOTICE", e["key"], e["message"][:500])
    if e["kind"] == "estimate":
        print("  ESTIMATE peak", round(e.get("peak_device_gib", 0), 2), "GiB")
    if e["kind"] == "train_begin":
        cur = {"peak": 0, "steps": 0, "start": e.get("start_step", 0), "losses": []}; lives.append(cur)
    if cur is not None and e["kind"] == "sample": cur["peak"] = max(cur["peak"], e["used_max"])
    if cur is not None and e["kind"] == "step": cur["steps"] += 1
    if cur is not None and e["kind"] == "log" and "loss" in e.get("values", {}): cur["losses"].append(e["values"]["loss"])
    if e["kind"] == "end": print("  END", e.get("state"), str(e.get("error") or "")[:200])
for i, l in enumerate(lives):
    print(f"  LIFE {i}: from step {l['start']}, {l['steps']} steps, device-used peak {l['peak'] / 2**30:.2f} GiB, "
          f"losses {[round(x, 3) if isinstance(x, float) else x for x in l['losses'][:8]]}")
PY
}

run() {  # NAME RECIPE LIMIT_S [env...]
  local name=$1 recipe=$2 limit=$3; shift 3
  note "== $name"
  env "$@" timeout "$limit" python3 -m loratui run "$recipe" --headless --force --max-steps 10 \
    --runs-dir $R/runs-$name > "$OUT/$name.txt" 2>&1
  note "$name: rc=$?"
  local dir; dir=$(ls -d $R/runs-$name/*/ | tail -1)
  gzip -c "$dir/events.jsonl" > "$OUT/$name.events.jsonl.gz"
  story "$dir" | tee -a "$S"
}

want A && run A-oom-recovered $R/bf16.toml 200 LORATUI_TEST_CARD_GIB=32

if want B; then
# B: a hog waits for the guard's first action (the OOM of life 0), then leaves 20 GiB on the card before the
# restarted life loads: its move (checkpointing, ~23 GiB) no longer fits; "NOT recovered", then a stop.
python3 - $R/runs-B-not-recovered > "$OUT/hog.log" 2>&1 <<'PY' &
import glob, sys, time, torch
deadline = time.time() + 240
while time.time() < deadline:
    logs = glob.glob(sys.argv[1] + "/*/events.jsonl")
    if logs and '"key":"guard"' in open(logs[0]).read():
        free, total = torch.cuda.mem_get_info()
        hog = torch.empty(int(free - 20 * 2**30), dtype=torch.uint8, device="cuda")
        print("HOG took", round(hog.numel() / 2**30, 1), "GiB; left", round(torch.cuda.mem_get_info()[0] / 2**30, 1), flush=True)
        time.sleep(200); break
    time.sleep(0.05)
PY
HOG=$!
run B-not-recovered $R/bf16.toml 200 LORATUI_TEST_CARD_GIB=32
kill $HOG 2>/dev/null; wait $HOG 2>/dev/null; cat "$OUT/hog.log" | tee -a "$S"
fi

want C && run C-nan $R/qlora.toml 150 LORATUI_TEST_NAN_AT_STEP=5
note "done"
