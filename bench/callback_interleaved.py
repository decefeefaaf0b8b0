"""Issue 17, to 1 %: loratui's in-process cost, measured inside ONE watched run by switching it on and off.

    python -m loratui run --headless -- python bench/callback_interleaved.py --model DIR --json OUT.json \\
        [--block 4] [--warmup 6] [--deadline EPOCH] [--margin 25] [--max-steps 400]
    python bench/callback_interleaved.py --analyse OUT.json|ARCHIVE.tar.xz     # the figures again, offline

Separate processes (bench/seed_overhead.sh) vary ~3 % in speed from one to the next, so a 1 % effect needs
dozens of rounds. Here the watched script (bench/seed_qlora_7b.py's model, data and TrainingArguments,
imported, not copied) runs once under `loratui run` -- supervisor, NVML sampler and startup hook live the
whole time -- and a callback of this bench takes the instance of loratui's callback that the hook added out
of `trainer.callback_handler` and removes its token-counting forward pre-hook, then puts both back, in
blocks of K steps in ABBA order (on off off on on off ...), so slow drift cancels within each pair.

A block's time runs from its first step's on_step_begin to the next block's, after torch.cuda.synchronize()
at both ends: it holds the K steps whole, their on_step_end and on_log callbacks included. Per pair of
adjacent blocks the ratio on/off of tokens/s; the paired t interval over those pairs' log ratios; and the
ratio of median step times (each step from its on_step_begin to the next, the first step of each block
dropped since it carries the boundary's sync). Side figures: CPU seconds of the supervisor process (and its
threads; the sampler's own share comes from its `sampler_stats` events) and of the `loratui run` front
process, and of this process per block. The check: loratui's `step` and `log` events per block (K each when
on, none when off) and their token counts, from the run's events.jsonl after training.

The deadline (epoch seconds) is the device call's budget: training stops cleanly at an even block count
when two more blocks would not fit before deadline - margin, and OUT.json is rewritten at every block
boundary, so a call killed by its time limit still leaves the figures.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gpu_analyse import T95, T975, t_quantile  # noqa: E402  (one t table for every bench analysis)

ABBA = (True, False, False, True)
"""Block b is loratui-on when ABBA[b % 4]."""


# -- the figures (pure: also `--analyse` offline) ---------------------------------------------------------


def pairs(blocks: list[dict]) -> list[tuple[dict, dict]]:
    """(on, off) for each complete pair of adjacent blocks 2i, 2i+1."""
    out = []
    for i in range(0, len(blocks) - 1, 2):
        a, b = blocks[i], blocks[i + 1]
        if a["on"] != b["on"]:
            out.append((a, b) if a["on"] else (b, a))
    return out


def interval(logs: list[float]) -> dict:
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return {"ratio": math.exp(m), "n": len(logs)}
    se, df = statistics.stdev(logs) / math.sqrt(len(logs)), len(logs) - 1
    t2, t1 = t_quantile(df, T975, 1.960), t_quantile(df, T95, 1.645)
    return {"ratio": math.exp(m), "lo95": math.exp(m - t2 * se), "hi95": math.exp(m + t2 * se),
            "lower_one_sided": math.exp(m - t1 * se), "sd_log": statistics.stdev(logs), "n": len(logs)}


def analyse(rec: dict) -> tuple[dict, list[str]]:
    tps = rec["tokens_per_step"]
    blocks = rec["blocks"]
    rate = {id(b): tps * b["steps"] / b["seconds"] for b in blocks}
    ps = pairs(blocks)
    res: dict = {"blocks": len(blocks), "pairs": len(ps), "block_steps": rec["block"]}
    lines = [f"IL_BLOCK {b['index']} {'on ' if b['on'] else 'off'} steps {b['first_step'] + 1}-"
             f"{b['first_step'] + b['steps']} {b['seconds']:.3f}s tok/s={rate[id(b)]:.1f} "
             f"hooks={b['pre_hooks']} cb={int(b['callback_present'])} "
             f"events step/log={b.get('step_events', '?')}/{b.get('log_events', '?')}" for b in blocks]
    if not ps:
        return res, lines + ["IL_RESULT no complete pair"]
    logs = [math.log(rate[id(on)] / rate[id(off)]) for on, off in ps]
    res["paired"] = interval(logs)
    res["pair_ratio_median"] = math.exp(statistics.median(logs))
    on_s = [x for b in blocks if b["on"] for x in b["step_intervals"][1:]]
    off_s = [x for b in blocks if not b["on"] for x in b["step_intervals"][1:]]
    res["median_step"] = {"on": statistics.median(on_s), "off": statistics.median(off_s),
                          "ratio_off_over_on": statistics.median(off_s) / statistics.median(on_s)}
    on_b = [b for b in blocks if b["on"]][: len(ps)]
    off_b = [b for b in blocks if not b["on"]][: len(ps)]
    res["pooled_ratio"] = (sum(b["steps"] for b in on_b) / sum(b["seconds"] for b in on_b)) / \
        (sum(b["steps"] for b in off_b) / sum(b["seconds"] for b in off_b))
    res["tokens_per_s"] = {"on": tps * sum(b["steps"] for b in on_b) / sum(b["seconds"] for b in on_b),
                           "off": tps * sum(b["steps"] for b in off_b) / sum(b["seconds"] for b in off_b)}
    res["cpu_per_step_ms"] = {arm: 1e3 * sum(b["proc_cpu_s"] for b in bs) / sum(b["steps"] for b in bs)
                              for arm, bs in (("on", on_b), ("off", off_b))}
    res["supervisor_cpu_share"] = {arm: sum(b["sup_cpu_s"] for b in bs) / sum(b["seconds"] for b in bs)
                                   for arm, bs in (("on", on_b), ("off", off_b))}
    p = res["paired"]
    lines += [f"IL_PAIR {i} {'on-off' if ps[i][0]['index'] < ps[i][1]['index'] else 'off-on'} "
              f"on/off={math.exp(v):.4f}" for i, v in enumerate(logs)]
    ci = (f"95% CI {p['lo95']:.4f}-{p['hi95']:.4f}, one-sided 95% lower bound {p['lower_one_sided']:.4f}, "
          f"sd of log ratios {p['sd_log']:.4f}" if "lo95" in p else "one pair only")
    lines.append(f"IL_RESULT tokens/s ratio on/off = {p['ratio']:.4f} (geometric mean of {p['n']} pairs of "
                 f"{rec['block']}-step blocks; {ci}); median pair {res['pair_ratio_median']:.4f}; pooled "
                 f"{res['pooled_ratio']:.4f} ({res['tokens_per_s']['on']:.1f} vs {res['tokens_per_s']['off']:.1f} "
                 "tok/s)")
    # Sensitivity: without the pairs holding a hiccup (a step over 1.25x the median, in either block).
    limit = 1.25 * statistics.median(on_s + off_s)
    calm = [v for v, (on, off) in zip(logs, ps) if max(on["step_intervals"] + off["step_intervals"]) <= limit]
    if len(calm) >= 2:
        q = res["paired_without_hiccups"] = interval(calm)
        lines.append(f"IL_RESULT_CALM without the {len(ps) - len(calm)} pairs holding a step over {limit:.3f}s: "
                     f"{q['ratio']:.4f} ({q['n']} pairs; 95% CI {q['lo95']:.4f}-{q['hi95']:.4f}, one-sided lower "
                     f"bound {q['lower_one_sided']:.4f}, sd of log ratios {q['sd_log']:.4f})")
    m = res["median_step"]
    lines.append(f"IL_MEDIAN_STEP on {m['on']:.4f}s off {m['off']:.4f}s ratio off/on {m['ratio_off_over_on']:.4f} "
                 f"({len(on_s)} / {len(off_s)} steps, first of each block dropped)")
    c = res["cpu_per_step_ms"]
    s = res["supervisor_cpu_share"]
    lines.append(f"IL_CPU this process per step: on {c['on']:.2f} ms, off {c['off']:.2f} ms; supervisor "
                 f"share of one core: on {s['on']:.2%}, off {s['off']:.2%}")
    if rec.get("check"):
        lines.append("IL_CHECK " + json.dumps(rec["check"]))
    if rec.get("cpu"):
        lines.append("IL_CPU_RUN " + json.dumps(rec["cpu"]))
    if rec.get("train_begin_s") is not None:
        lines.append(f"IL_TRAIN_BEGIN loratui's on_train_begin (preflight estimate, hook, callback build): "
                     f"{rec['train_begin_s']:.3f}s once")
    return res, lines


def load_record(path: Path) -> dict:
    if path.name.endswith((".tar.xz", ".tar.gz", ".tar")):
        from gpu_analyse import unpacked

        path = next(unpacked(path).rglob("interleave.json"))
    return json.loads(path.read_text())


# -- the process: /proc CPU times ---------------------------------------------------------------------------


TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_stat(path: str) -> tuple[str, int, float] | None:
    """(comm, ppid, user+system CPU seconds) from a /proc .../stat file; None when gone."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1: text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return comm, int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def threads(pid: int) -> dict[str, tuple[str, float]]:
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        st = proc_stat(f"/proc/{pid}/task/{tid}/stat")
        if st:
            out[tid] = (st[0], st[2])
    return out


def cpu_of(pid: int | None) -> float:
    st = proc_stat(f"/proc/{pid}/stat") if pid else None
    return st[2] if st else 0.0


# -- the run ------------------------------------------------------------------------------------------------


def callbacks():
    """The bench's two callbacks (built here: transformers loads only for a run, not for --analyse)."""
    from transformers import TrainerCallback

    class TrainBeginEnd(TrainerCallback):
        """Placed after loratui's callback: its on_train_begin closes the one-time train-begin timing."""

        def __init__(self, owner) -> None:
            self.owner = owner

        def on_train_begin(self, args, state, control, **kw):
            self.owner.train_begin_s = time.perf_counter() - self.owner.t_train_begin

    class Interleave(TrainerCallback):
        def __init__(self, a, tokens_per_step: int, cuda) -> None:
            self.K, self.warmup, self.deadline, self.margin = a.block, a.warmup, a.deadline, a.margin
            self.json, self.cuda = a.json, cuda
            self.trainer = None  # set once the Trainer exists
            self.loratui = None  # the LoratuiCallback the startup hook added
            self.blocks: list[dict] = []
            self.current: dict | None = None
            self.begins: list[float] = []
            self.stopping, self.stop_reason = False, ""
            self.t_train_begin, self.train_begin_s = 0.0, None
            self.sup = int(os.environ.get("LORATUI_SUPERVISOR_PID", "0")) or None
            st = proc_stat(f"/proc/{self.sup}/stat") if self.sup else None
            self.front = st[1] if st and st[1] > 1 else None
            self.rec = {"tokens_per_step": tokens_per_step, "block": self.K, "warmup": self.warmup,
                        "abba": list(ABBA), "blocks": self.blocks, "argv": sys.argv[1:]}
            self.cpu0: dict = {}

        def on_train_begin(self, args, state, control, **kw):
            self.t_train_begin = time.perf_counter()
            self.cpu0 = {"wall": time.time(), "sup": cpu_of(self.sup), "front": cpu_of(self.front),
                         "threads": threads(self.sup) if self.sup else {}}

        def _find(self):
            for cb in self.trainer.callback_handler.callbacks:
                if type(cb).__name__ == "LoratuiCallback":
                    return cb
            raise SystemExit("callback_interleaved: no LoratuiCallback in the Trainer's callbacks: run it "
                             "under `python -m loratui run -- python bench/callback_interleaved.py ...`")

        def _set(self, on: bool, model) -> None:
            """loratui on or off. We come before it in the callback list, so removing it (or appending it)
            in place takes effect from this very event on: the loop over the list has not reached it yet."""
            cbs = self.trainer.callback_handler.callbacks
            cb = self.loratui
            if on and cb not in cbs:
                cbs.append(cb)
            elif not on and cb in cbs:
                cbs.remove(cb)
            if on and cb._unhook is None:
                cb._unhook = model.register_forward_pre_hook(cb.inner.tokens.hook, with_kwargs=True).remove
            elif not on and cb._unhook is not None:
                cb._unhook()
                cb._unhook = None

        def on_step_begin(self, args, state, control, model=None, **kw):
            n = state.global_step  # optimiser steps done; this one is n + 1
            if n >= self.warmup and (n - self.warmup) % self.K == 0 and not self.stopping:
                self._boundary(n, model)
            self.begins.append(time.perf_counter())

        def _boundary(self, n: int, model) -> None:
            if self.cuda:
                self.cuda.synchronize()
            t, cpu, sup = time.perf_counter(), time.process_time(), cpu_of(self.sup)
            if self.loratui is None:
                self.loratui = self._find()
            if self.current is not None:
                b = self.current
                ends = self.begins[-self.K:] + [t]
                b.update(seconds=t - b.pop("t0"), proc_cpu_s=cpu - b.pop("cpu0"), sup_cpu_s=sup - b.pop("sup0"),
                         step_intervals=[ends[i + 1] - ends[i] for i in range(self.K)])
                b["step_intervals"][0] = ends[1] - b.pop("start_after_sync")
                self.blocks.append(b)
                self.current = None
            left = self.deadline - time.time() - self.margin if self.deadline else math.inf
            block_s = max((b["seconds"] for b in self.blocks[-8:]), default=0.0)
            if left < 0 or (len(self.blocks) % 2 == 0 and left < 2.2 * block_s):
                self.stopping, self.stop_reason = True, f"budget: {left:.0f}s to the margin at step {n}"
                self._set(True, model)  # end as a watched run ends: train end event, hook removed
                self._write()
                return
            on = ABBA[len(self.blocks) % 4]
            self._set(on, model)
            self._write()
            self.current = {"index": len(self.blocks), "on": on, "first_step": n, "steps": self.K,
                            "pre_hooks": len(model._forward_pre_hooks) if model is not None else None,
                            "callback_present": self.loratui in self.trainer.callback_handler.callbacks,
                            "cpu0": time.process_time(), "sup0": sup}
            if self.cuda:
                self.cuda.synchronize()
            self.current["t0"] = self.current["start_after_sync"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if self.stopping:
                control.should_training_stop = True

        def on_train_end(self, args, state, control, model=None, **kw):
            if self.current is not None:  # max_steps came first: that block is incomplete, not counted
                self.rec["dropped_incomplete_block"] = self.current["index"]
                self.current = None
            if self.loratui is not None:
                self._set(True, model)  # its own on_train_end still runs (it comes after us): end event
            sup_threads = threads(self.sup) if self.sup else {}
            t0 = self.cpu0.get("threads", {})
            wall = time.time() - self.cpu0.get("wall", time.time())
            self.rec["cpu"] = {
                "train_wall_s": round(wall, 2),
                "supervisor_cpu_s": round(cpu_of(self.sup) - self.cpu0.get("sup", 0.0), 2),
                "front_cpu_s": round(cpu_of(self.front) - self.cpu0.get("front", 0.0), 2),
                "supervisor_threads_cpu_s": sorted(
                    ((c, round(s - t0.get(tid, (c, 0.0))[1], 2)) for tid, (c, s) in sup_threads.items()),
                    key=lambda x: -x[1])[:6],
            }
            self.rec["stop_reason"] = self.stop_reason or f"max_steps {state.max_steps}"
            self.rec["train_begin_s"] = self.train_begin_s
            self._write()

        def _write(self) -> None:
            if self.json:
                tmp = f"{self.json}.tmp"
                with open(tmp, "w") as f:
                    json.dump(self.rec, f)
                os.replace(tmp, self.json)

    return Interleave, TrainBeginEnd


def check_events(rec: dict) -> None:
    """Per block, loratui's step and log events (K each when on, none when off) and their tokens."""
    run = os.environ.get("LORATUI_RUN_DIR")
    if not run or not (Path(run) / "events.jsonl").exists():
        return
    steps: dict[int, dict] = {}
    logs: set[int] = set()
    samplers = []
    with open(Path(run) / "events.jsonl", errors="replace") as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            kind = e.get("kind")
            if kind == "step" and e.get("rank", 0) == 0:
                steps[e["step"]] = e
            elif kind == "log":
                logs.add(e["step"])
            elif kind == "sampler_stats":
                samplers.append(e)
    ok = {"on": 0, "off": 0, "on_blocks": 0, "off_blocks": 0}
    times = [e["step_time"] for e in steps.values()]
    med = statistics.median(times) if times else 0.0
    worst_first = 0.0
    for b in rec["blocks"]:
        span = range(b["first_step"] + 1, b["first_step"] + b["steps"] + 1)
        b["step_events"] = sum(s in steps for s in span)
        b["log_events"] = sum(s in logs for s in span)
        b["tokens"] = sum(steps[s].get("tokens", 0) for s in span if s in steps)
        arm = "on" if b["on"] else "off"
        ok[f"{arm}_blocks"] += 1
        want = (b["steps"], b["steps"], b["steps"] * rec["tokens_per_step"]) if b["on"] else (0, 0, 0)
        ok[arm] += (b["step_events"], b["log_events"], b["tokens"]) == want
        if b["on"] and span[0] in steps and med:
            worst_first = max(worst_first, steps[span[0]]["step_time"] / med)
    ok["worst_first_step_time_over_median"] = round(worst_first, 3)
    ok["sampler_cpu_share"] = [round(e.get("cpu_share", 0.0), 4) for e in samplers]
    ok["sampler_hz"] = [round(e.get("achieved_hz", 0.0), 1) for e in samplers]
    rec["check"] = ok


def run() -> None:
    import seed_qlora_7b as seed
    import torch
    from transformers import Trainer, default_data_collator

    parser = seed.make_parser()
    parser.add_argument("--block", type=int, default=4, help="steps per block (K)")
    parser.add_argument("--warmup", type=int, default=6, help="steps before the first block, not counted")
    parser.add_argument("--deadline", type=float, default=0.0, help="epoch seconds the call must end by")
    parser.add_argument("--margin", type=float, default=25.0, help="seconds kept after training")
    parser.add_argument("--step-guess", type=float, default=0.5, help="seconds a step, to size max_steps")
    a = parser.parse_args()
    t0 = time.time()
    cuda = torch.cuda.is_available()
    model = seed.load_model(a, cuda)
    if a.deadline:  # no more steps than fit: the guard stops earlier still, at a pair boundary
        fit = int((a.deadline - time.time() - a.margin) / a.step_guess)
        a.max_steps = max(min(a.max_steps, fit), a.warmup + 2 * a.block + 1)
    Interleave, TrainBeginEnd = callbacks()
    il = Interleave(a, a.batch * a.grad_accum * a.seq, torch.cuda if cuda else None)
    il.rec["setup_load_s"] = round(time.time() - t0, 1)
    il.rec["max_steps"] = a.max_steps
    trainer = Trainer(model=model, args=seed.training_arguments(a, cuda), train_dataset=seed.dataset(a, model),
                      data_collator=default_data_collator, callbacks=[il])
    il.trainer = trainer
    trainer.add_callback(TrainBeginEnd(il))  # after loratui's (the hook added it in __init__)
    trainer.train()
    il.rec["peak_reserved"] = torch.cuda.max_memory_reserved() if cuda else None
    check_events(il.rec)
    il._write()
    _, lines = analyse(il.rec)
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--analyse"]:
        print("\n".join(analyse(load_record(Path(sys.argv[2])))[1]))
    else:
        run()
