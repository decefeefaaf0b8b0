#!/usr/bin/env bash
# bench/gpu_suite.sh — the H200 figures in one self-contained call (issues 2, 9 and 7).
#
# On the device, from the repo root, with the wheels in .whl/ that its image lacks: bitsandbytes, msgspec,
# liger-kernel (throughput), and for the TUI arm textual, textual-plotext, plotext, rich, markdown-it-py,
# mdurl, mdit-py-plugins, linkify-it-py, uc-micro-py, pygments, platformdirs (the versions `pip list`
# shows here; `pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl NAME==VERSION`):
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
#     && export PYTHONPATH=/tmp/site:$PWD && bash bench/gpu_suite.sh
#
# Stages, chosen by STAGES (default "spikes issue2 overhead"; a 10-minute call fits about one of
# overhead or throughput), each skipped when the time left is below its estimate (deadline
# SUITE_BUDGET_S after start):
#   1. random Qwen2.5-7B-shaped checkpoint -> /tmp/q7b (separate process; reused if complete)
#   spikes     issue 9: 4 GiB spikes of 10/30/100/300 ms x10 while a tiny run is monitored; nvidia-smi at 1 s
#   issue2     loratui run recipes/qwen7b.toml --headless --max-steps 20 vs nvidia-smi at 100 ms
#   overhead   issue 7: plain Trainer (a), loratui run --headless (b), loratui run with its TUI on a
#              200x60 pty (c; OVH_TTY=0 drops it), OVH_PAIRS rounds a/b/c c/b/a ..., seq 1024 packed
#   throughput issue 7 item 6: the card's bf16 rate; tokens/s and MFU of the QLoRA recipe, a bf16-LoRA
#              variant (plain and loratui), and speed-up settings (liger kernels, fused AdamW, no
#              checkpointing, torch.compile), each a recipe variant run through loratui; TPUT_ONLY="NAME ..."
#              runs only the named variants (the names below; plain-bf16 is the plain-script row)
# Everything goes under $OUT; one line per result in $OUT/summary.txt, printed at the end.
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
T0=$(date +%s)
BUDGET=${SUITE_BUDGET_S:-420}
DEADLINE=$((T0 + BUDGET))
OUT=${OUT:-/tmp/gpu_suite_out}
OVH_STEPS=${OVH_STEPS:-7}
OVH_PAIRS=${OVH_PAIRS:-3}
OVH_TTY=${OVH_TTY:-1}
OVH_ROUND0=${OVH_ROUND0:-0}     # rounds are numbered from OVH_ROUND0+1 (a later call goes on where one ended)
OVH_HEADLESS=${OVH_HEADLESS:-1}  # 0: rounds of a/c only (the TUI arm, when b is already measured)
TPUT_STEPS=${TPUT_STEPS:-7}
STAGES=" ${STAGES:-spikes issue2 overhead} "
CKPT=${CKPT:-/tmp/q7b}
PY=${PY:-python3}
mkdir -p "$OUT/logs" "$OUT/overhead"
S="$OUT/summary.txt"
: > "$S"
left() { echo $((DEADLINE - $(date +%s))); }
want() { [[ "$STAGES" == *" $1 "* ]]; }
el() { echo $(($(date +%s) - T0)); }
note() { echo "$*" >> "$S"; echo "[$(el)s] $*"; }
fits() {  # fits EST NAME
  local l; l=$(left)
  if [ "$l" -lt "$1" ]; then note "SKIP $2: ${l}s left < estimate $1s"; return 1; fi
  return 0
}
cpu_of() {  # utime+stime in seconds of PID
  awk -v tck="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13) / tck }' "/proc/$1/stat" 2>/dev/null
}
stop_run() {  # stop_run RUNS_DIR: ask the run to stop, then make sure its supervisor is gone
  local d pidf pid
  $PY -m loratui stop --runs-dir "$1" >> "$OUT/logs/stops.log" 2>&1
  for d in "$1"/*/; do
    pidf="$d/supervisor.pid"
    [ -f "$pidf" ] || continue
    pid=$(cut -d" " -f1 "$pidf")
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { echo "supervisor $pid still alive: TERM" >> "$OUT/logs/stops.log"; kill "$pid"; sleep 3; }
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  done
}
smi_fields="timestamp,memory.used"
if nvidia-smi --query-gpu=memory.reserved --format=csv,noheader,nounits > /dev/null 2>&1; then
  smi_fields="timestamp,memory.used,memory.reserved"
fi

# -- environment (in the background: its imports overlap the rest) -------------------------------
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  $PY - <<'PYEOF'
import importlib, platform
out = [f"python {platform.python_version()}"]
for m in ("torch", "transformers", "peft", "accelerate", "bitsandbytes", "msgspec", "pynvml"):
    try:
        mod = importlib.import_module(m)
        out.append(f"{m} {getattr(mod, '__version__', '?')}")
    except Exception as exc:
        out.append(f"{m} MISSING({type(exc).__name__})")
import torch
out.append(f"cuda {torch.version.cuda}")
print(", ".join(out))
PYEOF
} > "$OUT/env.txt" 2>"$OUT/logs/env.err" &
ENVJOB=$!

# -- 0. background: tiny monitored run, bench data, spike helper ---------------------------------
$PY bench/make_bench_data.py /tmp/loratui_bench/data.jsonl 12 > "$OUT/logs/bench_data.log" 2>&1
if want spikes; then
$PY -m loratui run bench/tiny_gpu.toml --headless --runs-dir "$OUT/runs_tiny" > "$OUT/logs/tiny_run.log" 2>&1 &
TINY_VIEW=$!
GO=/tmp/gpu_suite_go.$$
rm -f "$GO"
$PY bench/spike_helper.py "$OUT/spikes.json" --go "$GO" ${SPIKE_ARGS:-} > "$OUT/logs/spike_helper.log" 2>&1 &
HELPER=$!
fi

# -- 1. checkpoint ----------------------------------------------------------------------------------
CKPT_OK=0
if [ -f "$CKPT/.complete" ]; then
  CKPT_OK=1; note "CKPT reused $CKPT"
elif fits 60 "checkpoint build"; then
  ts=$(date +%s)
  timeout $(( $(left) > 150 ? 150 : $(left) )) $PY bench/make_random_ckpt.py "$CKPT" ${CKPT_ARGS:-} > "$OUT/logs/ckpt.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] && [ -f "$CKPT/.complete" ] && CKPT_OK=1
  note "CKPT rc=$rc $(($(date +%s) - ts))s $(grep '^CKPT' "$OUT/logs/ckpt.log" | head -1) size=$(du -sh "$CKPT" 2>/dev/null | cut -f1)"
  [ $CKPT_OK -eq 1 ] || tail -20 "$OUT/logs/ckpt.log" | sed 's/^/  ckpt| /'
fi

wait $ENVJOB
note "ENV $(tr '\n' ' ' < "$OUT/env.txt") smi_fields=$smi_fields"
if [ "$OVH_TTY" = 1 ] && want overhead && ! $PY -c "import loratui.tui.app" > "$OUT/logs/tui_import.log" 2>&1; then
  OVH_TTY=0; note "OVH no TUI arm: the viewer does not import here: $(tail -1 "$OUT/logs/tui_import.log")"
fi

# -- 3. issue 9: spike fidelity on the tiny run ---------------------------------------------------------
if ! want spikes; then
  :
elif fits 50 "spikes (issue 9)"; then
  ts=$(date +%s)
  TRUN=""
  for _ in $(seq 1 300); do  # wait (<= 60 s) until the tiny run records steps
    TRUN=$(ls -d "$OUT"/runs_tiny/*/ 2>/dev/null | head -1)
    [ -n "$TRUN" ] && grep -q '"kind":"step"' "$TRUN/events.jsonl" 2>/dev/null && break
    sleep 0.2
  done
  SUP=$(cut -d" " -f1 "$TRUN/supervisor.pid" 2>/dev/null)
  nvidia-smi --query-gpu=$smi_fields --format=csv,noheader,nounits --loop-ms=1000 > "$OUT/smi_1s.csv" 2>/dev/null &
  SMI1=$!
  sleep 1
  t0=$(date +%s.%N); c0=$(cpu_of "$SUP")
  touch "$GO"
  for _ in $(seq 1 450); do kill -0 $HELPER 2>/dev/null || break; sleep 0.2; done
  t1=$(date +%s.%N); c1=$(cpu_of "$SUP")
  sleep 1
  kill $SMI1 2>/dev/null
  echo "{\"pid\": ${SUP:-0}, \"t0\": $t0, \"cpu0\": ${c0:-0}, \"t1\": $t1, \"cpu1\": ${c1:-0}}" > "$OUT/supervisor_cpu.json"
  kill -0 $HELPER 2>/dev/null && { note "SPIKES helper still running: killed"; kill $HELPER; }
  wait $HELPER; hrc=$?
  stop_run "$OUT/runs_tiny"
  wait $TINY_VIEW; trc=$?
  note "SPIKES_RUN helper_rc=$hrc tiny_view_rc=$trc supervisor_pid=$SUP $(($(date +%s) - ts))s"
  if [ -f "$OUT/spikes.json" ]; then
    $PY bench/gpu_analyse.py spikes "$OUT/runs_tiny" "$OUT/spikes.json" "$OUT/smi_1s.csv" "$OUT/supervisor_cpu.json" \
      > "$OUT/logs/spikes_analysis.log" 2>&1
    cat "$OUT/logs/spikes_analysis.log" >> "$S"; cat "$OUT/logs/spikes_analysis.log"
  else
    tail -5 "$OUT/logs/spike_helper.log" | sed 's/^/  helper| /'
  fi
else
  touch "$GO"; kill $HELPER 2>/dev/null; stop_run "$OUT/runs_tiny"; wait $TINY_VIEW
fi

# -- 2. issue 2: qwen7b recipe, 20 steps, recorded peak vs nvidia-smi ---------------------------------
if [ $CKPT_OK -eq 1 ] && want issue2 && fits 75 "issue 2 qwen7b run"; then
  ts=$(date +%s)
  nvidia-smi --query-gpu=$smi_fields --format=csv,noheader,nounits --loop-ms=100 > "$OUT/smi.csv" 2>/dev/null &
  SMI=$!
  timeout $(( $(left) - 20 )) $PY -m loratui run recipes/qwen7b.toml --headless --max-steps 20 \
    --model-path "$CKPT" --runs-dir "$OUT/runs" > "$OUT/logs/q7b_run.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && stop_run "$OUT/runs"
  sleep 0.5; kill $SMI 2>/dev/null
  note "ISSUE2_RUN rc=$rc $(($(date +%s) - ts))s: python -m loratui run recipes/qwen7b.toml --headless --max-steps 20 --model-path $CKPT --runs-dir \$OUT/runs"
  $PY bench/gpu_analyse.py issue2 "$OUT/runs" "$OUT/smi.csv" > "$OUT/logs/issue2_analysis.log" 2>&1
  cat "$OUT/logs/issue2_analysis.log" >> "$S"; cat "$OUT/logs/issue2_analysis.log"
  [ $rc -eq 0 ] || tail -15 "$OUT/logs/q7b_run.log" | sed 's/^/  q7b| /'
fi

# -- 4. issue 7: overhead, a/b/c alternating -----------------------------------------------------------
# Odd rounds run a b c, even rounds c b a, so no arm always runs first (or right after another's exit).
ovh_a() {  # ovh_a ROUND
  local ts rc; ts=$(date +%s)
  timeout $(( $(left) - 10 )) $PY bench/plain_trainer.py bench/qwen7b_seq1024.toml --model-path "$CKPT" \
    --max-steps "$OVH_STEPS" --out "$OUT/overhead/a$1.json" --output-dir /tmp/plain_out > "$OUT/logs/ovh_a$1.log" 2>&1
  rc=$?; est_a=$(($(date +%s) - ts + 3))
  note "OVH_RUN a$1 rc=$rc $((est_a - 3))s"
  [ $rc -eq 0 ] || { tail -15 "$OUT/logs/ovh_a$1.log" | sed 's/^/  a| /'; return 1; }
}
ovh_b() {
  [ "$OVH_HEADLESS" = 1 ] || return 0
  local ts rc; ts=$(date +%s)
  timeout $(( $(left) - 10 )) $PY -m loratui run bench/qwen7b_seq1024.toml --headless --max-steps "$OVH_STEPS" \
    --model-path "$CKPT" --runs-dir "$OUT/runs_ovh" --run-name "b$1" > "$OUT/logs/ovh_b$1.log" 2>&1
  rc=$?; est_b=$(($(date +%s) - ts + 3))
  [ $rc -eq 124 ] && stop_run "$OUT/runs_ovh"
  note "OVH_RUN b$1 rc=$rc $((est_b - 3))s"
  [ $rc -eq 0 ] || { tail -15 "$OUT/logs/ovh_b$1.log" | sed 's/^/  b| /'; return 1; }
}
ovh_c() {  # a failing TUI arm is dropped; the a/b rounds go on
  [ "$OVH_TTY" = 1 ] || return 0
  local ts rc; ts=$(date +%s)
  $PY bench/tty_run.py --cols 200 --rows 60 --runs-dir "$OUT/runs_ovh_tty" --out "$OUT/overhead/c$1_tty.json" \
    --timeout $(( $(left) - 10 )) -- $PY -m loratui run bench/qwen7b_seq1024.toml --max-steps "$OVH_STEPS" \
    --model-path "$CKPT" --runs-dir "$OUT/runs_ovh_tty" --run-name "c$1" > "$OUT/logs/ovh_c$1.log" 2>&1
  rc=$?; est_c=$(($(date +%s) - ts + 3))
  note "OVH_RUN c$1 rc=$rc $((est_c - 3))s $(tail -1 "$OUT/logs/ovh_c$1.log" | tr -d '\r' | tail -c 300)"
  if [ $rc -ne 0 ]; then
    stop_run "$OUT/runs_ovh_tty"; OVH_TTY=0; est_c=0
    tail -c 1500 "$OUT/overhead/c$1_tty.screen" 2>/dev/null | tr -cd '[:print:]\n' | tail -8 | sed 's/^/  c| /'
  fi
}
if [ $CKPT_OK -eq 1 ] && want overhead; then
  est_a=${EST_A:-55}; est_b=0; [ "$OVH_HEADLESS" = 1 ] && est_b=${EST_B:-60}; est_c=0; [ "$OVH_TTY" = 1 ] && est_c=${EST_C:-60}
  for i in $(seq $((${OVH_ROUND0:-0} + 1)) $((${OVH_ROUND0:-0} + OVH_PAIRS))); do
    [ "$OVH_TTY" = 1 ] || est_c=0
    fits $((est_a + est_b + est_c + 5)) "overhead round $i" || break
    if [ $((i % 2)) -eq 1 ]; then
      ovh_a "$i" && ovh_b "$i" && { ovh_c "$i"; true; } || break
    else
      ovh_c "$i"; ovh_b "$i" && ovh_a "$i" || break
    fi
  done
  $PY bench/gpu_analyse.py overhead "$OUT" > "$OUT/logs/overhead_analysis.log" 2>&1
  cat "$OUT/logs/overhead_analysis.log" >> "$S"; cat "$OUT/logs/overhead_analysis.log"
fi

# -- throughput: issue 7 item 6 -------------------------------------------------------------------------
tput_wanted() { [ -z "${TPUT_ONLY:-}" ] || [[ " $TPUT_ONLY " == *" $1 "* ]]; }
tput_run() {  # tput_run EST NAME [section.key=value ...]: a recipe variant through loratui run --headless
  local est=$1 name=$2; shift 2
  tput_wanted "$name" || return 1
  fits "$est" "throughput $name" || return 1
  $PY bench/recipe_variant.py bench/qwen7b_seq1024.toml "$OUT/variants/$name.toml" "$@" \
    > "$OUT/logs/variant_$name.log" 2>&1 || { note "TPUT_RUN $name bad variant: $(tail -1 "$OUT/logs/variant_$name.log")"; return 1; }
  local ts rc; ts=$(date +%s)
  timeout $(( $(left) - 10 )) $PY -m loratui run "$OUT/variants/$name.toml" --headless --max-steps "$TPUT_STEPS" \
    --model-path "$CKPT" --runs-dir "$OUT/tput" --run-name "$name" > "$OUT/logs/tput_$name.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && stop_run "$OUT/tput"
  note "TPUT_RUN $name rc=$rc $(($(date +%s) - ts))s $*"
  [ $rc -eq 0 ] || tail -6 "$OUT/logs/tput_$name.log" | sed "s/^/  $name| /"
}
if [ $CKPT_OK -eq 1 ] && want throughput; then
  mkdir -p "$OUT/variants" "$OUT/tput"
  $PY bench/bf16_rate.py > "$OUT/bf16_rate.txt" 2> "$OUT/logs/bf16_rate.err"; note "$(cat "$OUT/bf16_rate.txt")"
  tput_run 55 qlora
  tput_run 55 qlora-liger training.use_liger_kernel=true
  tput_run 75 qlora-liger-2048 training.use_liger_kernel=true data.max_length=2048
  tput_run 55 qlora-fused training.optim='"adamw_torch_fused"'
  if tput_wanted plain-bf16 && fits 50 "throughput bf16 plain"; then
    $PY bench/recipe_variant.py bench/qwen7b_seq1024.toml "$OUT/variants/bf16.toml" quantization.load_in_4bit=false
    timeout $(( $(left) - 10 )) $PY bench/plain_trainer.py "$OUT/variants/bf16.toml" --model-path "$CKPT" \
      --max-steps "$TPUT_STEPS" --out "$OUT/tput/plain_bf16.json" --output-dir /tmp/plain_out > "$OUT/logs/tput_plain_bf16.log" 2>&1
    note "TPUT_RUN plain bf16 rc=$?"
  fi
  tput_run 50 bf16 quantization.load_in_4bit=false
  tput_run 55 qlora-liger-nogc training.use_liger_kernel=true training.gradient_checkpointing=false
  tput_run 50 bf16-liger quantization.load_in_4bit=false training.use_liger_kernel=true
  TPUT_STEPS=${COMPILE_STEPS:-$TPUT_STEPS} tput_run 150 qlora-compile training.torch_compile=true
  $PY bench/gpu_analyse.py throughput "$OUT" > "$OUT/logs/throughput_analysis.log" 2>&1
  cat "$OUT/logs/throughput_analysis.log" >> "$S"; cat "$OUT/logs/throughput_analysis.log"
fi

# -- tidy: keep $OUT small -----------------------------------------------------------------------------
find "$OUT" -type d -name checkpoints -prune -exec rm -rf {} + 2>/dev/null
find "$OUT" -type s -delete 2>/dev/null
for f in $(find "$OUT" -name events.jsonl -size +5M); do gzip -9 "$f"; done
for f in $(find "$OUT" -name '*.log' -size +2M); do tail -c 1000000 "$f" > "$f.tail"; rm -f "$f"; done
note "DONE total $(el)s of budget ${BUDGET}s"
# the device returns at most 8 files: everything raw travels in one archive beside the summary
tar czf /tmp/gpu_suite_raw.tgz -C "$OUT" --exclude=summary.txt . && mv /tmp/gpu_suite_raw.tgz "$OUT/raw.tgz" \
  && find "$OUT" -mindepth 1 -maxdepth 1 ! -name raw.tgz ! -name summary.txt -exec rm -rf {} +
echo "================ SUMMARY ================"
cat "$S"
