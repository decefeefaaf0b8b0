"""Detectors over output text that needs no telemetry: DataLoader worker warnings, an nvidia-smi table with an
idle GPU, NCCL watchdog timeouts, and where a run was (the Trainer's phase banners, the user's own words,
a checkpoint folder named at the step the run died). Each finding keeps the line it came from, verbatim."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from loratui.logic.advisor.advice import ERROR, INFO, Advice, Finding
from loratui.recipe import Recipe

_FEW_WORKERS = re.compile(r"does not have many workers which may be a bottleneck")
_FEW_SUGGEST = re.compile(r"\(try (\d+) which is the number of cpus|`?num_workers=(\d+)`?\s+in the `DataLoader`")
_MANY_WORKERS = re.compile(r"This DataLoader will create (\d+) worker processes in total")
_MANY_SUGGEST = re.compile(r"suggested max number of worker in current system is (\d+)")
_SMI_ROW = re.compile(r"\|\s*(\d+)MiB\s*/\s*(\d+)MiB\s*\|\s*(\d+)%\s")
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout|WorkNCCL::checkTimeout|ProcessGroupNCCL.{0,80}timed out|"
    r"Some NCCL operations have failed or timed out|NCCL (?:communicator|watchdog) .{0,40}timeout", re.I)
_NCCL_FIELDS = re.compile(r"OpType=(\w+).*?Timeout\(ms\)=(\d+)(?:\) ran for (\d+) milliseconds)?")
_NCCL_RANK = re.compile(r"\[Rank (\d+)\]")
_BANNER = (("eval", re.compile(r"\*{3,} Running (?:Evaluation|Prediction) \*{3,}")),
           ("save", re.compile(r"Saving model checkpoint to ")),
           ("train", re.compile(r"\*{3,} Running training \*{3,}")))
_MEMORY_WORDS = re.compile(r"\b(?:memory|OOM|out of memory)\b", re.I)
_PROSE_PHASE = (("eval", re.compile(r"\b(?:evaluat\w*|validat\w*|predict\w*)\b", re.I)),
                ("save", re.compile(r"\b(?:sav(?:e|ing)|checkpoint)\b", re.I)))
_PROGRESS = re.compile(r"(?<![\d.])(\d{1,9})\s*/\s*(\d{1,9})(?![\d.]).{0,40}?\d\s*(?:s/it|it/s)")
_CHECKPOINT = re.compile(r"checkpoint-(\d{1,9})\b")


@dataclass
class TextWatch:
    """Facts and findings from output lines; bounded state."""

    banner: str = ""  # the Trainer's last phase banner since the last training log
    prose: dict[str, str] = field(default_factory=dict)  # phase -> the user's line that names it
    progress: tuple[int, str] | None = None  # (step, line) of the last progress counter
    checkpoints: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=16))
    nccl_lines: int = 0
    nccl_ranks: set[int] = field(default_factory=set)
    _many: tuple[int, str] | None = None

    def line(self, line: str, step: int) -> list[Finding]:
        """Fold one output line in; the findings it completes."""
        found: list[Finding] = []
        self._phase_hints(line)
        if "worker" in line:
            found += self._workers(line, step)
        if "MiB" in line and "%" in line:
            smi = _SMI_ROW.search(line)
            if smi and int(smi.group(3)) <= 10 and int(smi.group(1)) >= 1024:
                found.append(Finding("data_starved", step, {"text": "idle_gpu", "line": line.strip(),
                                                            "util": int(smi.group(3)), "used_mib": int(smi.group(1))}))
        if "NCCL" in line or "Watchdog" in line:
            found += self._nccl(line, step)
        return found

    def train_log(self) -> None:
        """A training log arrived: the run is back in its training steps."""
        self.banner = ""

    def phase(self) -> tuple[str, list[str]]:
        """(phase, evidence) from the text alone: a Trainer banner, a checkpoint named at the step the run
        stopped, or the user's own words about memory in evaluation or saving."""
        if self.banner and self.banner != "train":
            return self.banner, []
        if self.progress is not None:
            step, progress_line = self.progress
            named = next((text for n, text in self.checkpoints if n == step), None)
            if named is not None:
                return "save", [f"the run stopped at step {step} and checkpoint-{step} is named:",
                                progress_line, named]
        for phase in ("eval", "save"):
            if phase in self.prose:
                return phase, ["as the text says: " + self.prose[phase]]
        return "", []

    def _phase_hints(self, line: str) -> None:
        if "***" in line or "Saving model checkpoint" in line:
            for phase, banner in _BANNER:
                if banner.search(line):
                    self.banner = phase
        if "checkpoint-" in line:
            for match in _CHECKPOINT.finditer(line):
                self.checkpoints.append((int(match.group(1)), line.strip()[:300]))
        if "s/it" in line or "it/s" in line:
            progress = _PROGRESS.search(line)
            if progress:
                self.progress = (int(progress.group(1)), line.strip()[:300])
        lowered = line.lower()
        if len(self.prose) < 2 and ("memory" in lowered or "oom" in lowered) and _MEMORY_WORDS.search(line) \
                and "File " not in line and "{" not in line:
            for phase, words in _PROSE_PHASE:
                if phase not in self.prose and words.search(line) and not _looks_like_code(line):
                    self.prose[phase] = line.strip()[:300]

    def _workers(self, line: str, step: int) -> list[Finding]:
        if _FEW_WORKERS.search(line):
            suggest = _FEW_SUGGEST.search(line)
            number = int(next(g for g in suggest.groups() if g)) if suggest else None
            return [Finding("data_starved", step, {"text": "few_workers", "line": line.strip(), "suggest": number})]
        many = _MANY_WORKERS.search(line)
        if many:
            self._many = (int(many.group(1)), line.strip())
        suggest = _MANY_SUGGEST.search(line)
        if suggest and self._many is not None:
            lines = [self._many[1]] + ([line.strip()] if line.strip() != self._many[1] else [])
            return [Finding("data_starved", step, {"text": "many_workers", "line": " ".join(lines),
                                                   "workers": self._many[0], "suggest": int(suggest.group(1))})]
        return []

    def _nccl(self, line: str, step: int) -> list[Finding]:
        if not _NCCL_TIMEOUT.search(line):
            return []
        self.nccl_lines += 1
        rank = _NCCL_RANK.search(line)
        if rank and len(self.nccl_ranks) < 1024:
            self.nccl_ranks.add(int(rank.group(1)))
        fields = _NCCL_FIELDS.search(line)
        facts = {"line": line.strip()[:400], "op": fields.group(1) if fields else "",
                 "timeout_ms": int(fields.group(2)) if fields else 0,
                 "ran_ms": int(fields.group(3)) if fields and fields.group(3) else 0}
        return [Finding("nccl_timeout", step, facts)]


def _looks_like_code(line: str) -> bool:
    return bool(re.match(r"\s*(?:def |class |import |from |#|\w+\s*=\s*\w+\()", line))


# -- the advice --------------------------------------------------------------------------------------


def nccl_advice(f: Finding, r: Recipe | None, ranks: int = 0, lines: int = 1) -> Advice:
    """A collective timed out: one rank stopped joining (stalled, died, or works alone that long)."""
    facts = f.facts
    op = facts["op"] or "collective"
    after = f" after {facts['timeout_ms'] / 1000:g} s" if facts["timeout_ms"] else ""
    evidence = [facts["line"]]
    if lines > 1:
        evidence.append(f"{lines} watchdog lines" + (f" from {ranks} ranks" if ranks > 1 else ""))
    if facts["ran_ms"] > 2 * facts["timeout_ms"] > 0:
        evidence.append(f"it ran for {facts['ran_ms'] / 3.6e6:.1f} h: the ranks had been waiting long before")
    evidence += ["a rank stopped joining collectives: look for the first error or the last line of each rank "
                 "before this (a crash, an OOM, a hang in data loading)",
                 "rerun with NCCL_DEBUG=INFO to see which rank and which collective"]
    if r is None:
        evidence.append("if one rank legitimately works alone that long (tokenizing on rank 0, a save, an eval on "
                        "rank 0), raise ddp_timeout (TrainingArguments, seconds; default 1800)")
    return Advice("nccl_timeout", ERROR, f"NCCL {op} timed out{after}: one rank fell behind or died",
                  evidence, {"env.NCCL_DEBUG": "INFO"} if r is not None else {}, f.step)


def text_starve_advice(f: Finding, r: Recipe | None) -> Advice:
    """A DataLoader warning or an idle GPU in nvidia-smi: the change is the worker count."""
    facts = f.facts
    key = "dataloader_num_workers" if r is not None else "dataloader_num_workers (TrainingArguments) or " \
        "num_workers (DataLoader)"
    change: dict[str, object] = {}
    if facts["text"] == "many_workers":
        title = (f"{facts['workers']} DataLoader workers on a machine that suggests at most {facts['suggest']}: "
                 f"lower {key} to {facts['suggest']} (too many workers slow the loader or freeze it)")
        if r is not None:
            change = {"training.dataloader_num_workers": facts["suggest"]}
        return Advice("data_starved", INFO, title, [facts["line"]], change, f.step)
    if facts["text"] == "idle_gpu":
        title = (f"The GPU is {facts['util']}% busy with {facts['used_mib']} MiB in use: if training is running, "
                 f"it waits for data; raise {key}")
        evidence = [facts["line"], "check the rate (it/s) with more workers; pre-tokenise the data"]
    else:
        number = facts.get("suggest")
        title = f"The DataLoader has too few workers, a bottleneck: raise {key}" + (
            f" (the warning suggests {number})" if number else "")
        evidence = [facts["line"]]
    if r is not None and r.training.dataloader_num_workers < 16:
        now = r.training.dataloader_num_workers
        change = {"training.dataloader_num_workers": 4 if now == 0 else min(16, 2 * now)}
    return Advice("data_starved", INFO, title, evidence, change, f.step)
