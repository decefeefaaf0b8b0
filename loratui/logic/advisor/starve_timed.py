"""A step's time split into its parts in one line, the way a maintainer reads a user's own timing: the wait for the
batch (loading, fetching, reading, decoding, augmenting, collating) against the model's work (forward, backward,
the optimizer, the training step), in any order and phrasing (`data loading time: 2.5 s, model forward/backward
time: 0.3 s`, `I measured it: loading a batch 0.9 s, the training step 0.2 s`, `forward takes 80ms but getting the
next batch takes 400ms`, `数据加载耗时 2 秒，前向传播 0.1 秒`). The data's part is a third or more of the two: the GPU
waits that long for every batch. Pure: a line in, facts out.

A program's own per-iteration timers (`data_time: 0.01  time: 0.42`) are judged over many lines in text.py, which
knows a warm-up from a loader that cannot keep up; this reader is for the line that says both parts once."""

from __future__ import annotations

import re

from loratui.logic import durations
from loratui.logic.fmt import quoted

_DURATION = durations.pattern("ms s min")
"""A duration with its unit; not a rate (`2.5 s/it`, `it/s`) and not a bare number."""
_DATA = re.compile(r"\b(?:data|load\w*|loader\w*|fetch\w*|read(?:ing)?|I/?O|decod\w*|augment\w*|collat\w*|__getitem__|"
                   r"getitem|next batch|batch generator|input pipeline|prefetch\w*)\b|数据|加载|读取|取数据", re.I)
_COMPUTE = re.compile(r"\b(?:forward\w*|backward\w*|fwd|bwd|optimi[sz]er\w*|compute|computation|training step|"
                      r"train step|"
                      r"(?:the )?(?:model|GPU)(?:'s)? (?:step|part|work|time|compute|pass)|model\b(?!\s+load)|"
                      r"step)\b|前向|反向|训练一步|计算|模型", re.I)
_TOTAL = re.compile(r"\b(?:total|whole|entire|per (?:iteration|iter|step|batch)|iteration|overall)\b|总|整个", re.I)
_OTHER = re.compile(r"\b(?:eval\w*|validat\w*|sav(?:e|es|ed|ing)|checkpoint\w*|weights?|tokenizer|logging|log\b|"
                    r"upload\w*|download\w*|startup|start-up|init\w*|generat\w*|inference|compil\w*|epoch)\b|"
                    r"model\s+load|load\w*\s+(?:the\s+|a\s+)?(?:model|checkpoint|weights)|评估|验证|保存", re.I)
"""Parts that are no training step's: an evaluation, a save, the model's load, a whole epoch."""
_SEPARATOR = re.compile(r"[,;|，；。]|\b(?:and|but|while|whereas|vs\.?|versus)\b|\s-\s", re.I)
_FOLLOWING = re.compile(r"\s*(?:(?:is|are|was|were|goes|went)\s+)?(?:(?:spent|wasted|used)\s+)?(?:for|on|in|of|to|"
                        r"waiting (?:for|on))\s+([^,;|，；。]{0,40})", re.I)
"""The part named after its duration (`0.8 s is spent on data loading`)."""
SHARE = 1 / 3
"""The data's part a third or more of data plus compute: a loader that cannot hide behind the step."""
MIN_DATA_S = 0.05


def _named(before: str, after: str) -> str:
    """What a duration times, from the words just before it (back to the last separator), else just after it
    (`0.9 s for loading`)."""
    pieces = _SEPARATOR.split(before)
    name = pieces[-1] if pieces else ""
    if not (_DATA.search(name) or _COMPUTE.search(name) or _TOTAL.search(name)):
        following = _FOLLOWING.match(after)
        name = following.group(1) if following else name
    return name


def _kind(name: str) -> str:
    if _OTHER.search(name):
        return ""
    if _TOTAL.search(name) and not _DATA.search(name):
        return "total"
    if _DATA.search(name):
        return "data"
    return "compute" if _COMPUTE.search(name) else ""


def timed_parts(line: str) -> dict[str, object] | None:
    """The line's data part and model part, when the data's is a third or more of both (None otherwise)."""
    if len(line) > 1000 or len(_DURATION.findall(line)) < 2:
        return None
    parts: dict[str, float] = {}
    last = 0
    for found in _DURATION.finditer(line):
        kind = _kind(_named(line[last:found.start()][-60:], line[found.end():]))
        last = found.end()
        if kind and kind not in parts:  # the first of each: a running average after it is the same part
            parts[kind] = durations.seconds(found)
    data = parts.get("data")
    work = parts.get("compute")
    total = parts.get("total")
    if data is None and work is not None and total is not None and work <= SHARE * total:
        # `each iteration takes 5 s but the forward and backward only take 0.3 s`: the step's time outside the
        # model's work is its wait (for the next batch, the loader being what a step waits on between passes)
        data, work = total - work, None
    if data is None or work is None and total is None:
        return None
    whole = data + work if work is not None else parts["total"]
    if data < MIN_DATA_S or whole <= 0 or data > whole or data < SHARE * whole:
        return None
    return {"text": "timed_parts", "data": data, "whole": whole, "line": quoted(line)}


# -- a program's timers under keys of any naming -------------------------------------------------------------

_KEY = re.compile(r"(?<![\w./-])['\"]?(?P<key>[A-Za-z][\w./-]{0,40}?)['\"]?\s*[:=]?\s*(?P<num>\d+(?:\.\d+)?)"
                  r"(?P<unit>\s*(?:ms|s)\b)?(?![\w.%/])")
_TIME_PARTS = frozenset({"time", "timing", "timings", "t", "ms", "sec", "secs", "s", "duration", "latency", "dt",
                         "elapsed", "timer"})
_DATA_PARTS = frozenset({"data", "load", "loading", "loader", "dataloader", "fetch", "io", "input", "wait", "read",
                         "reading", "batchgen"})
_WORK_PARTS = frozenset({"forward", "backward", "fwd", "bwd", "compute", "model", "train", "optim", "optimizer", "gpu",
                         "step", "fb", "fwdbwd"})
_WHOLE_PARTS = frozenset({"iter", "iteration", "batch", "total", "wall", "it", "time"})


def _parts(key: str) -> list[str]:
    return [p for p in re.split(r"[/_.\-]+", key.lower()) if p]


def timer_keys(line: str) -> tuple[float, float, bool] | None:
    """A program's wait for data and its step time under keys of any naming (`time/data 0.9 | time/batch 1.2`,
    `t_data: 0.9 t_iter: 1.2`, `fetch_ms=900 step_ms=1200`, `{'time/data': 0.9, 'time/step': 1.2}`): (data seconds,
    step seconds, whether the step's timer leaves the data out: forward, backward, the train step)."""
    data = step = None
    exclusive = False
    for found in _KEY.finditer(line):
        parts = _parts(found.group("key"))
        if not parts or _TIME_PARTS.isdisjoint(parts) and not any(p.endswith("time") for p in parts):
            continue
        ms = (found.group("unit") or "").strip() == "ms" or "ms" in parts
        value = float(found.group("num")) / (1000 if ms else 1)
        named = set(parts) - _TIME_PARTS
        if not _DATA_PARTS.isdisjoint(parts) or any(p.startswith("data") for p in parts):
            data = value if data is None else data
        elif step is None and (named <= _WHOLE_PARTS or not _WORK_PARTS.isdisjoint(named)):
            step, exclusive = value, not _WORK_PARTS.isdisjoint(named)
    return (data, step, exclusive) if data is not None and step is not None else None
