#!/usr/bin/env bash
# Issue 24 item 1 on the H200: the estimate of a watched TRL SFTTrainer and a plain Trainer script against the
# device peak. On the device, wheels installed (bitsandbytes, trl, datasets, dill, multiprocess, msgspec, tomlkit,
# platformdirs, ruamel.yaml, textual...), $OUT set, from the repo root:
#   RUNS="tw1 pw1 ta1 pa1" BUDGET=480 bash bench/trl_estimate.sh
# Each name in RUNS is one run (a fresh process) of the table in run_args below: t = bench/trl_sft_qlora.py under
# `accelerate launch`, p = bench/seed_qlora_7b.py; w = watched by `python -m loratui run --headless --`, a = alone
# with nvidia-smi at 100 ms beside it. SMOKE=1 first runs tw/pw on a tiny checkpoint and stops if either fails.
# $OUT gets summary.txt (python bench/trl_estimate_analyse.py's lines) and raw.tar.xz (events, logs' tails, smi).
set -u
OUT=${OUT:-/tmp/trl_est_out}; PY=${PY:-python3}; BUDGET=${BUDGET:-480}; T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
note() { echo "$*" | tee -a "$OUT/summary.txt"; }
W=/tmp/trlest-$T0; mkdir -p "$OUT" "$W/logs" "$W/runs" "$W/smi"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
note "ENV $($PY -c 'import torch,transformers,peft,accelerate,bitsandbytes as b,trl,datasets,pyarrow;print("torch",torch.__version__,"transformers",transformers.__version__,"peft",peft.__version__,"accelerate",accelerate.__version__,"bitsandbytes",b.__version__,"trl",trl.__version__,"datasets",datasets.__version__,"pyarrow",pyarrow.__version__,torch.cuda.get_device_name(0))' 2>&1 | tail -1)"

run_args() {  # name -> the script's arguments: t* for the TRL script, p* for the Trainer script
  case $1 in
    t?2) echo "--batch 4 --seq 2048" ;;
    t?3) echo "--batch 8 --seq 512 --kbit-prepare" ;;     # prepare_model_for_kbit_training before TRL
    t?4) echo "--batch 2 --seq 4096" ;;
    t?5) echo "--batch 8 --seq 1024 --optim paged_adamw_8bit" ;;
    t*) echo "--batch 8 --seq 512" ;;                      # issue 24's TRL setting (t?1, and the smoke t?0)
    p?2) echo "--batch 4 --seq 1024" ;;                    # issue 17's setting: LoRA on q/k/v/o
    p*) echo "--batch 8 --seq 512 --targets all-linear" ;; # the TRL setting, through a plain Trainer
  esac
}

one() {  # one run: $1 name, $2 checkpoint, $3 steps
  local name=$1 ckpt=$2 steps=$3 script args cmd rc ts=$(date +%s)
  args="--model $ckpt --max-steps $steps $(run_args "$name")"
  if [ "${name:0:1}" = t ]; then
    cmd="$PY -m accelerate.commands.launch --num_processes 1 --num_machines 1 --mixed_precision no --dynamo_backend no bench/trl_sft_qlora.py $args --out $W/o-$name"
  else
    cmd="$PY bench/seed_qlora_7b.py $args --facts --out $W/o-$name"
  fi
  if [ "${name:1:1}" = w ]; then
    timeout $(( $(left) - 5 )) $PY -m loratui run --headless --runs-dir "$W/runs" --run-name "$name" -- $cmd \
      > "$W/logs/$name.log" 2>&1; rc=$?
  else
    nvidia-smi --query-gpu=timestamp,memory.used,memory.reserved --format=csv,noheader,nounits -lms 100 \
      > "$W/smi/$name.csv" 2>&1 & local smi=$!
    timeout $(( $(left) - 5 )) $cmd > "$W/logs/$name.log" 2>&1; rc=$?
    kill $smi 2>/dev/null; wait $smi 2>/dev/null
  fi
  note "RUN $name rc=$rc $(( $(date +%s) - ts ))s $cmd"
  if [ $rc -ne 0 ]; then
    log=$(ls "$W"/runs/*-"$name"/trainer.stderr.log 2>/dev/null | head -1)
    tail -12 "${log:-$W/logs/$name.log}" | sed "s/^/  $name| /" | tee -a "$OUT/summary.txt"
  fi
  return $rc
}

if [ "${SMOKE:-0}" = 1 ]; then
  $PY bench/make_random_ckpt.py /tmp/qsmall --small > "$W/logs/ckpt-small.log" 2>&1
  for n in ${SMOKE_RUNS:-tw0 pw0}; do  # run_args' default setting, on the tiny checkpoint
    one $n /tmp/qsmall 3 || { note "SMOKE FAILED ($(( $(date +%s) - T0 ))s)"; SKIP_ALL=1; }
  done
fi
if [ "${SKIP_ALL:-0}" != 1 ]; then
  CKPT=/tmp/q7b
  $PY bench/make_random_ckpt.py $CKPT > "$W/logs/ckpt.log" 2>&1
  note "$(grep -h CKPT "$W/logs/ckpt.log" || tail -3 "$W/logs/ckpt.log") ($(( $(date +%s) - T0 ))s)"
  for name in ${RUNS:-tw1 pw1 ta1 pa1}; do
    if [ "$(left)" -lt "${EST:-70}" ]; then note "SKIP $name: $(left)s left"; continue; fi
    one "$name" $CKPT "${STEPS:-8}"
  done
fi
for f in "$W"/logs/*.log "$W"/runs/*/trainer.std*.log; do [ -f "$f" ] && tail -60 "$f" > "$f.tail"; done
$PY bench/trl_estimate_analyse.py "$W" 2>&1 | tee -a "$OUT/summary.txt"
cp "$OUT/summary.txt" "$W/summary.txt"
(cd "$W" && tar cJf "$OUT/raw.tar.xz" summary.txt smi logs/*.tail runs/*/events.jsonl runs/*/recipe.toml \
  runs/*/*.tail 2>/dev/null)
note "DONE $(( $(date +%s) - T0 ))s; archive $(stat -c %s "$OUT/raw.tar.xz" 2>/dev/null) bytes"
