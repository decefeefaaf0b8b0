"""Data starvation in the times the person gives: a loader or a batch timed at a second or more, a stall of minutes
before training, two speeds of the same training with the data named as what differs, a first epoch far slower
than the later ones (the reading is slow), the same work several times slower than it used to be, a change to the
feed that made it several times faster. Read by starve_said.py's `said_starved`. Pure logic."""

from __future__ import annotations

import re

from loratui.logic import durations
from loratui.logic.advisor.starve_words import ELSEWHERE, NOT_DATA
from loratui.logic.clauses import DENIED
from loratui.logic.fmt import quoted

_DURATION = durations.pattern("s min h")


def _seconds(text: str) -> list[float]:
    """Each duration the text gives, in seconds, in order."""
    return durations.all_seconds(text, _DURATION)

_WORK = re.compile(r"\b(?:epochs?|steps?|iterations?|iters?|batch(?:es)?|training|train)\b", re.I)

_THEN = re.compile(r"\b(?:used to|previously|earlier|yesterday|last (?:week|time)|instead of|"
                   r"(?:is|are|got|became|has become) (?:much |way |\d+x )?slower|suddenly|slowed)\b|以前|之前|变慢", re.I)

SLOWER = 2.5
"""The same work said to take 2.5 times longer than it used to (`taking 4 hours an epoch. It used to take about 4
minutes`): the code did not change, the data's source or loader did."""

_LOADER_TAKES = re.compile(
    r"\b(?:data ?loader|data loading|loading (?:a |each |one |every |the next )?batch(?:es)?|__getitem__|collate_fn|"
    r"fetching (?:a |each |one |the next )?batch|next\(iter\([^)]{0,40}\)\)|数据加载|读取数据)"
    r"(?:[^.!?\n。！？]|(?<=\d)\.(?=\d)){0,50}?(?:takes?|took|taking|costs?|spends?|spent|needs?|耗时|需要|要)\s*"
    r"(?:about |around |~|nearly |almost |over |more than )?(\d+(?:\.\d+)?)\s*(?:-\s*\d+(?:\.\d+)?\s*)?"
    r"(" + durations.unit_words("s min") + r")\b", re.I)
"""The loader timed in the user's words at a second or more (`loading one batch takes 2.3 s`, `数据加载耗时5秒`)."""

_TAKES_N = (r"\btakes?\s+(?:about |around |~|nearly |almost |over |more than )?(\d+(?:\.\d+)?)\s*"
            r"(?:-\s*\d+(?:\.\d+)?\s*)?(" + durations.unit_words("s min") + r")\s+to\s+")

_BATCH_TAKES = re.compile(
    r"\b(?:each|every|one|a|the next|a single) (?:mini-?)?batch\b[^.!?\n]{0,30}?" + _TAKES_N +
    r"(?:load|fetch|prepare|read|arrive|come|be (?:loaded|fetched|prepared|read))|" +
    _TAKES_N + r"(?:load|fetch|get|read|prepare|collate)\s+(?:the next |a |each |one |every |the |a single )?"
    r"(?:mini-?)?batch", re.I)
"""A batch timed in the user's words with the verb after it (`each batch takes 5 seconds to load`, `it takes 2 s to
get the next batch`)."""

LOADER_SAID_S = 1.0


def loader_takes(line: str) -> dict[str, object] | None:
    found = _LOADER_TAKES.search(line) or _BATCH_TAKES.search(line)
    if found is None or DENIED.search(found.group(0)):
        return None
    number, unit = [g for g in found.groups() if g is not None][:2]  # _BATCH_TAKES: the alternative that matched
    seconds = float(number) * durations.unit_seconds(unit)
    return {"said": "loader", "quote": quoted(line)} if seconds >= LOADER_SAID_S else None

_STALL = re.compile(r"\b(?:do(?:es)? nothing|doing nothing|idl\w+|hang\w*|stuck|wait\w*|freez\w*|stall\w*|sits? there)\b",
                    re.I)

_BEFORE_TRAINING = re.compile(r"\bbefore (?:each |every |the )?(?:training|epoch|first (?:batch|step|iteration)|fit)\b|"
                              r"\bbefore (?:the )?(?:training|first epoch) (?:starts|begins)", re.I)

_MINUTES = re.compile(r"\b(?:\d+(?:\.\d+)?|one|two|three|four|five|ten|several|a few|a couple of|an?)\s*"
                      r"(?:minutes?|mins?|hours?)\b|\b(?:a )?long time\b", re.I)


def stall_said(line: str) -> dict[str, object] | None:
    """`Before training, the notebook seems to do nothing at all for over one minute`: a wait of minutes before
    each training or epoch while the steps themselves then run fast (the loader starting its workers or reading)."""
    if _BEFORE_TRAINING.search(line) and _STALL.search(line) and _MINUTES.search(line):
        return {"said": "delay", "quote": quoted(line)}
    return None

_RATE_SAID = re.compile(r"(\d+(?:\.\d+)?)\s*(it/s|s/it|(?:samples|examples|images|imgs|tokens|seqs?)/s(?:ec)?|"
                        r"(?:s|sec|seconds?)/(?:it|iter|step|batch))\b", re.I)

_DATA_CAUSE = re.compile(r"\b(?:stream\w*|data ?loaders?|loaders?|num_workers|workers?|NFS|S3|GCS|disk|"
                         r"storage|network|mount\w*|webdataset|tfrecords?|parquet|lmdb|images? from|reading|"
                         r"synthetic|dummy|fake|random (?:data|inputs?|tensors?)|in[- ]memory|cached|pre-?loaded)\b", re.I)
"""The data's source or loader named beside two speeds: the difference is the data's (`dropped from 3 it/s to 0.5
it/s after switching to a streaming dataset`, `0.3 it/s; with a synthetic in-memory dataset it does 4 it/s`)."""


def _rates_said(line: str) -> dict[str, object] | None:
    """Two speeds of the same training in the user's words, 2.5 times apart, with the data named as what differs."""
    rates = []
    for number, unit in _RATE_SAID.findall(line):
        value = float(number)
        per_second = unit.lower().startswith(("s/", "sec", "second")) and not unit.lower().endswith("/s")
        rates.append(1 / value if per_second and value > 0 else value)
    if len(rates) < 2 or min(rates) <= 0 or max(rates) < SLOWER * min(rates) or not _DATA_CAUSE.search(line) or \
            ELSEWHERE.search(line):  # an evaluation's or a save's speed beside training's is that work's
        return None
    return {"said": "slowdown", "quote": quoted(line)}

_TIMES = re.compile(r"\b(\d+(?:\.\d+)?)\s*(?:x|×|times)\s+(?:slower|longer)\b", re.I)
"""`made each epoch take 3x longer`: the same work several times slower, with the data named as what changed."""

_DATA_READ = re.compile(r"\b(?:loading|h5|hdf5|files?|images?|decod\w*|augment\w*|dataset)\b", re.I)

_FASTER = re.compile(r"\b(?P<n>\d+(?:\.\d+)?)\s*[x×]\s*(?:faster|speed-?up|(?:more )?(?:performance|throughput|speed)|"
                     r"(?:performance |speed |throughput )?(?:increase|improvement|boost|gain))\b|"
                     r"\b(?P<n2>\d+(?:\.\d+)?)\s*times (?:faster|the (?:speed|throughput))\b", re.I)

FASTER = 2.0
"""A loader or storage change that made training twice as fast or more: the run waited for its data before."""

_FED_BETTER = re.compile(r"\b(?:num_workers|dataloader_num_workers|workers?|pin_memory|persistent_workers|"
                         r"prefetch\w*|data ?loaders?|NFS|local (?:disk|SSD|NVMe|storage)|SSD|NVMe|ramdisk|/dev/shm|"
                         r"cach(?:e|ed|ing) the (?:data|images|dataset)|pre-?(?:decod|tokeni[sz]|process)\w*)\b", re.I)
"""What feeds the GPU, changed: the loader's knobs, the data moved to fast storage or prepared ahead."""

_OTHER_CHANGE = re.compile(r"\b(?:bf16|fp16|fp8|tf32|amp|mixed precision|precision|flash|sdpa|attention|compile\w*|"
                           r"batch[ _-]?size|gradient checkpointing|checkpointing|quantiz\w*|deepspeed|fsdp|liger|"
                           r"unsloth|kernels?|cudnn|driver|upgrad\w*)\b", re.I)
"""Another change named beside the speed-up: the compute got faster, not the feed."""

_MOVED = re.compile(r"\bfrom\s+(?:about |~)?" + durations.spelled("s min h") + r"[^.!?\n]{0,20}?\bto\s+(?:about |~)?" +
                    durations.spelled("s min h"), re.I)
"""`the epoch time went from 50 min to 12 min`: a time before and after a change."""

_FIRST_EPOCH = re.compile(r"\bfirst epoch\b", re.I)

_LATER_EPOCHS = re.compile(r"\b(?:later|subsequent|second|following|other|next|remaining|rest of the) epochs?\b", re.I)


def _first_epoch_said(line: str) -> dict[str, object] | None:
    """`the first epoch takes 2 hours, later epochs 10 minutes`: the first pass reads every sample from storage, the
    later ones from the page cache or the dataset's cache: the reading is what is slow."""
    first, later = _FIRST_EPOCH.search(line), _LATER_EPOCHS.search(line)
    if first is None or later is None or first.start() > later.start():
        return None
    before = _seconds(line[:later.start()])
    after = _seconds(line[later.start():])
    if not before or not after or min(after) <= 0 or before[-1] < SLOWER * after[0]:
        return None
    return {"said": "storage", "quote": quoted(line)}


def slowdown_said(line: str) -> dict[str, object] | None:
    if "epoch" in line.lower():
        first = _first_epoch_said(line)
        if first is not None:
            return first
    if "/s" in line or "/it" in line or "s/" in line:
        rated = _rates_said(line)
        if rated is not None:
            return rated
    times = _TIMES.search(line)
    if times and float(times.group(1)) >= SLOWER and (_DATA_CAUSE.search(line) or _DATA_READ.search(line)) and \
            _WORK.search(line) and not ELSEWHERE.search(line) and not DENIED.search(line) and \
            not NOT_DATA.search(line):
        return {"said": "slowdown", "quote": quoted(line)}
    faster = _FASTER.search(line)
    if faster and float(faster.group("n") or faster.group("n2")) >= FASTER and _FED_BETTER.search(line) and \
            not DENIED.search(line) and not ELSEWHERE.search(line) and not NOT_DATA.search(line) and \
            not _OTHER_CHANGE.search(line):
        return {"said": "loader", "quote": quoted(line)}
    moved = _MOVED.search(line)
    if moved and _FED_BETTER.search(line) and not ELSEWHERE.search(line) and not NOT_DATA.search(line):
        spans = _seconds(moved.group(0))
        if len(spans) == 2 and min(spans) > 0 and max(spans) >= SLOWER * min(spans):
            return {"said": "slowdown", "quote": quoted(line)}
    if not _THEN.search(line) or not _WORK.search(line):
        return None
    durations = _seconds(line)
    if len(durations) < 2 or min(durations) <= 0 or max(durations) < SLOWER * min(durations):
        return None
    return {"said": "slowdown", "quote": quoted(line)}
