"""Where a run was when it failed, in the person's own words (English or Chinese): a sentence that names the
memory and a phase (`evaluation works fine, but saving runs out of memory`), one that places a failure in a phase
(`it crashes at the validation step`), one that introduces the pasted error (`when it saves I get:`), the step it
names, and the OOM's cause it gives. What the program printed (status lines, bars, settings) is read in
phase_text.py; PhaseText folds both, these readers through `PhaseWords`. Pure logic."""

from __future__ import annotations

import re

from loratui.logic import oom, oom_holders, oom_words
from loratui.logic.clauses import clause_starts, sentences
from loratui.logic.fmt import quoted

SETTING = re.compile(r"^\s*-{0,2}[\w.-]+\s*[:=]\s*(?:true|false|yes|no|null|none|[-+]?\d[\w.+-]*|\"[^\"]*\"|'[^']*')\s*,?\s*$",
                     re.I)
"""A setting and its value in a config dump (`evaluate: true`, `--validation_split=0.1`): no status."""


MEMORY_WORDS = re.compile(r"(?<![A-Za-z0-9_])(?:memory|out of memory|RAM|VRAM)(?![A-Za-z0-9_])|OutOfMemory|ResourceExhausted|(?<![A-Za-z])OOM(?:s|ed|ing)?(?![A-Za-z])|内存|显存|(?:卡|GPU)\S{0,2}?空间", re.I)
"""Memory in the user's words, English or Chinese (GPU memory is 显存, memory 内存)."""


_CAUSE_CONTEXT = re.compile(r"\b(?:memory|OOM(?:s|ed)?|GPUs?\d{0,2}|VRAM|card|nvidia-smi|server|cluster|\d+\s*(?:GB|GiB)|reboot\w*|"
                            r"machine|set_device|kill\w*|\w*_ALLOCATOR|cuda_malloc_async)\b|内存|显存|显卡|服务器|机器|进程|重启|"
                            r"PYTORCH_CUDA_ALLOC_CONF|expandable_segments|max_split_size_mb|\ballocat\w*|\bheap\b", re.I)
"""A sentence about the GPU's memory (or the shared machine), where the user's words about fragmentation or another
process count."""


_CAUSE_HINTS = ("fragment", "segments", "max_split", "unallocated", "reserved", "contiguous", "same", "both", "restart",
                "reboot", "malloc_async", "garbage_collection", "xla_python", "set_device", "重启", "杀", "shar", "vllm",
                "sglang", "ollama", "rank", "every", "each",
                "busy", "occupied", "taken", "in use", "used by", "before", "nothing", "process", "other", "else", "zombie", "orphan", "stale",
                "leftover", "previous", "dead", "defunct", "ghost", "background", "parallel", "concurrent", "ranks",
                "workers", "kill", "stop", "though", "but", "while", "still", "xorg", "server", "shell", "kwin", "compositor",
                "chrom", "firefox", "browser", "steam", "discord", "其", "别", "碎片", "占", "子プロセス", "子进程")
"""The cheap test before the cause's words are read (every line of a log passes here)."""


_ALL_CAUSE_HINTS = _CAUSE_HINTS + oom_holders.HINTS
"""With the words the readers of another holder need (logic/oom_holders.py)."""


_PROSE_PHASE = (("eval", re.compile(r"(?<![A-Za-z0-9_])(?:evaluat[A-Za-z]*|validat(?!ed\b)[A-Za-z]*|"
                                    r"predict(?:ion|ing|s)?(?!\s+(?:the\s+)?(?:\d+|next|future|upcoming)\b))"
                                    r"(?![A-Za-z0-9_])|compute_metrics|\bcomput\w*\s+(?:the\s+|my\s+)?(?:\w+\s+)?(?:metrics?|bleu|"
                                    r"rouge\w*|perplexity|ppl|accuracy|wer|cer|f1|mAP)\b|(?<![A-Za-z])inception[ _]scores?\b|"
                                    r"\bgenerat\w*\s+(?:the\s+|some\s+|\d+\s+)?(?:sample|validation|preview)s?\b|"
                                    r"\bsample\s+(?:image\s+)?generation\b|"
                                    r"(?<![A-Za-z0-9])(?:validation|evaluation)_(?:step|loop|epoch|batch|end|start)\w*|\bon_(?:validation|test|eval)\w*|"
                                    r"\bsanity[ _-]?check\w*|\bval(?:id)?[ _](?:batch\w*|step|loop|set|loader|epoch|phase|"
                                    r"dataloader)\b|"
                                    r"(?<![A-Za-z])eval(?:_[A-Za-z]+)?(?![A-Za-z])|(?<![A-Za-z0-9_])(?:do_predict|predict_with_generate)(?![A-Za-z0-9_])|验证|评估|评测|测试|"
                                    r"(?:^|[.!?]\s+|\b(?:during|in|at|when|while|on)\s+(?:the\s+)?)test(?:ing)?\b|"
                                    r"\btest(?:ing)?\s+(?:the\s+)?(?:model|set|split|data\w*|step|phase|stage|loop|script|"
                                    r"code)\b|"
                                    r"\.test\(", re.I)),
                ("save", re.compile(r"(?<![A-Za-z0-9_])(?:sav(?:e|es|ing)(?!\s+(?:\w+\s+)?(?:memory|VRAM|RAM|space|time|GPU)\b)|"
                                    r"(?<!gradient )(?<!activation )checkpoint(?:s|ing)?|merg(?:e|ing)|"
                                    r"export[A-Za-z]*(?!\s+(?-i:[A-Z][A-Z0-9_]*=|[A-Z][A-Z0-9]*_[A-Z0-9_]+))|gguf|"
                                    r"save_(?:only_model|safetensors|total_limit|strategy|steps|on_each_node|pretrained\w*|model|shards?|checkpoint\w*|"
                                    r"state(?:_dict)?|weights?)|"
                                    r"merge_and_unload|push_to_hub|(?<![-_.])(?<!double )quantiz(?:e|es|ing)(?![_=])|"
                                    r"(?:model|post-training|during)\s+quantization(?![_=])|"
                                    r"push(?:ing)? (?:it )?to (?:the )?hub)(?![A-Za-z0-9_])|保存|合并|导出", re.I)))
"""The phase a sentence about memory names: evaluating (testing, predicting; not an inference script's run, 推理, nor the
model's task, `in order to predict 8 frames`, `predicts the next token`), or writing the model out
(not the shell's `export PYTORCH_CUDA_ALLOC_CONF=...`); English words count inside Chinese text (`我运行你的evaluate`)
(saving, a checkpoint, merging, exporting, quantizing a trained model (GPTQ, AWQ: it is converted and written out,
not `--quantization_bit` nor `load_in_4bit` of a QLoRA run), pushing it to the hub, the save calls by name: `save_pretrained`,
accelerate's and the Trainer's `save_state`), but not saving memory nor gradient checkpoints."""


_EPOCH_END = re.compile(r"\b(?:after|at)\s+(?:the\s+)?end\s+of\s+(?:the\s+)?(?:first|1st)\s+epoch\b|"
                        r"\bafter\s+(?:the\s+)?(?:first|one|1st)\s+epoch\b(?!\s+(?:of|or)\b)", re.I)
"""The first epoch's end, where a run first evaluates: a run that trained a whole epoch and then fails did not fail in
a training step. Weaker than a phase named (`checkpointing gathers everything on rank 0; it causes OOM after the first
epoch` is the save's)."""


def _or_epoch_end(text: str, named: list[tuple[str, re.Pattern[str]]]) -> list[tuple[str, re.Pattern[str]]]:
    """The phases named, else the evaluation when the sentence places the failure at the first epoch's end."""
    return named or ([("eval", _EPOCH_END)] if _EPOCH_END.search(text) else [])


_NOT_PROSE = re.compile(r"\||\d\s*(?:it/s|s/it)|^\W*(?:\d{4}-\d\d-\d\d|\[?(?:INFO|WARNING|ERROR|DEBUG)\b)|"
                        r"^\s*(?:[\w.]+(?:Error|Exception|Warning)\b|Traceback)")


_FLAGS = re.compile(r"^\s*(?:--?[A-Za-z][\w.-]*(?:[ =](?!-)\S+)?\s*)+\\?\s*$")
"""A line of command-line flags (`--save_steps 1000 --eval_steps 300`): settings, no sentence of the person's."""


_SENTENCE = re.compile(r"^\W{0,3}(?:[A-Z][a-z]+|I|[a-z]+)\b(?:[\s,]+[A-Za-z'’]+){3}")
"""A sentence's opening: four words (`When computing the BLEU ...`), not an exception's type or a logger's prefix."""


def prose_like(text: str) -> bool:
    """A line of the person's own sentences: not a bar, a log record, or the program's exception (a sentence
    that names the error inside it is the person's: `While exporting we hit torch.cuda.OutOfMemoryError`)."""
    return _NOT_PROSE.search(text) is None and (not oom.is_oom_line(text) or _SENTENCE.match(text) is not None)


_READS_CHECKPOINT = re.compile(r"\b(?:resum\w*|load\w*|restor\w*|read\w*|from)\s+(?:[\w*_-]+\s+){0,3}checkpoints?\b|"
                               r"\bcheckpoints?\s+(?:load\w*|restor\w*|resum\w*)", re.I)
"""A checkpoint read back (`resuming from the step-4000 checkpoint`): no save."""


_FAILS = re.compile(r"(?<![A-Za-z0-9_])(?:errors?|fail(?:s|ed|ing|ure)?|crash(?:es|ed|ing)?|killed|dies|died|terminated|"
                    r"exception|go(?:es)? wrong|went wrong)(?![A-Za-z0-9_])|报错|崩溃|失败|挂了|被\s*(?:kill|杀)", re.I)
"""A failure in the person's words."""


WORKS = re.compile(r"\b(?:works?|worked|working|fine(?![-_ ]?tun)|ok|okay|succeed\w*|success\w*|passe[sd]|no (?:problem|issue)s?|"
                   r"without (?:any )?(?:problem|issue|error)s?)\b|正常|没问题|成功", re.I)


_INTRO_END = re.compile(r"(?:\b(?:get|gets|got|getting|see|saw|hit|hits|receive[sd]?|gives?|gave|throws?|threw|raises?|"
                        r"raised|returns?|shows?|showed|prints?|printed|following|below|this|error|errors|with)|报错|出现|"
                        r"提示|如下)\W{0,4}$", re.I)
"""The end of a sentence that introduces what is pasted after it, with no colon (`when it saves I get`, `Calling
merge_and_unload() gives`, `验证时报错`)."""


_PATHLIKE = re.compile(r"\S*[/\\]\S*")


_SHELL_EXPORT = re.compile(r"\bexport\s+[A-Za-z_][A-Za-z0-9_]*=")
"""The shell setting a variable (`export HF_HOME=/data/hf`): no model is exported."""


_RUN_SCRIPT = re.compile(r"(\b(?:run|runs|ran|running|execut\w*|launch\w*|python3?|bash|sh|torchrun)\s+(?:the\s+)?"
                         r"(?:(?:sh|bash|python3?)\s+)?)\S*[/\\]([\w.-]+\.(?:sh|py))\b", re.I)
"""A script the person runs, by its path (`I have run the sh scripts/run_eval_nvs.sh`): its own name says its phase."""


def _no_paths(text: str) -> str:
    """The sentence without paths (`model_path=../checkpoints/x.pkl`): a phase's name in a path is no phase, but a
    script run by its path keeps its name; a setting's name stays (`per_device_eval_batch_size=1 fixed the OOM`
    names the evaluation)."""
    text = _SHELL_EXPORT.sub(" ", text) if "export" in text else text
    if "/" not in text and "\\" not in text:
        return text
    return _PATHLIKE.sub(" ", _RUN_SCRIPT.sub(r"\1\2", text))


_FLAG_IN_SENTENCE = re.compile(r"(?<!\S)--[A-Za-z][\w.-]*(?:[ =](?!-)\S+)?")
"""A command-line flag and its value inside a sentence (`训练指令：python train.py --save_steps 1000 --output_dir
path_to_sft_checkpoint`): the run's settings, not the phase it failed in."""


def _phase_words(text: str) -> str:
    """The sentence less what names no phase the run is in: a checkpoint read back, paths, the shell's export, a
    command's flags."""
    text = _FLAG_IN_SENTENCE.sub(" ", text) if "--" in text else text
    return _no_paths(_READS_CHECKPOINT.sub(" ", text))


def _nearest(sentence: str, named: list[tuple[str, re.Pattern[str]]],
             anchor: re.Match[str] | None = None) -> list[tuple[str, re.Pattern[str]]] | None:
    """Of the phases a sentence names, the one in the clause that names the memory error (or the failure `anchor`),
    else those whose clause does not say they work (None when the sentence names no memory error)."""
    memory = anchor or MEMORY_WORDS.search(sentence)
    if memory is None:
        return None
    bounds = clause_starts(sentence) + [len(sentence) + 1]
    clause = next(i for i in range(len(bounds) - 1) if bounds[i] <= memory.start() < bounds[i + 1])
    same, working = [], []
    for phase, words in named:
        for found in words.finditer(sentence):
            at = next(i for i in range(len(bounds) - 1) if bounds[i] <= found.start() < bounds[i + 1])
            if at == clause:
                same.append((phase, words))
                break
            if WORKS.search(sentence, bounds[at], bounds[at + 1]):
                working.append((phase, words))
    return same[:1] or [p for p in named if p not in working and p not in same]


_NEGATION = re.compile(
    r"(?:\b(?:no|not|never|without|w/o|(?:do|does|did|is|was|are|were)(?:n't| not))\b"
    r"(?!\s+(?:idea|clue|sure|know\w*|understand\w*|matter|only|just|clear|why)\b)"
    r"(?:\s+(?!(?:and|but|so|then|because|when|while|as)\b)\w+){0,4}|"
    r"\b(?:disabl\w*|skipp?\w*|(?:turn|switch)\w*\s+off)(?:\s+(?:the|my|all|any))?)\s*$", re.I)
"""Words just before a phase's name, in its clause, that say the run did not go there (`I don't run any evaluation`,
`without evaluation`, `it never gets to saving`); `can't evaluate` stays a failure there."""


_SAID_STEP = re.compile(r"\b(?:at|on|reach\w*|around|after|when it (?:gets|reaches|hits) to)\s+(?:global\s+|the\s+)?step\s+"
                        r"(\d{1,7})\b|第\s*(\d{1,7})\s*(?:步|个?step)", re.I)
"""The step the person says the run failed at (`it always crashes right at step 1000`, `在第1000步报错`)."""


_FAILS_AT = re.compile(r"\b(?:crash\w*|dies|died|fail\w*|OOM\w*|errors?|breaks?|stops?|stopped|killed)\b|out of memory|"
                       r"报错|崩|挂|爆|溢出|停", re.I)


NEGATED_AFTER = re.compile(r"\s*(?:is|was|are|were)\s+(?:disabled|off|turned off|switched off|skipped|not (?:run|used|"
                           r"enabled|on|reached|started)|never (?:reached|run|started|called))\b|\s*['\"]?\s*[:=]\s*['\"]?(?:no|false|none|0)\b", re.I)
"""Words just after a phase's name that say it did not run (`evaluation is disabled`, `eval_strategy=no`)."""


def _affirmed(text: str, named: list[tuple[str, re.Pattern[str]]]) -> list[tuple[str, re.Pattern[str]]]:
    """The phases a sentence names other than under a negation in their clause."""
    if not named:
        return []  # most memory lines name no phase (a CUDA OOM message): no clauses to find
    bounds = clause_starts(text)
    kept = []
    for phase, words in named:
        for found in words.finditer(text):
            start = max(b for b in bounds if b <= found.start())
            if not _NEGATION.search(text, start, found.start()) and not NEGATED_AFTER.match(text, found.end()):
                kept.append((phase, words))
                break
    return kept


def _failing_sentences(text: str) -> str:
    """The sentences of a line that name a failure (`Training crashes after 200 steps. I don't run any evaluation.`:
    the first): a phase named in another sentence is context, not where it failed."""
    return " ".join(part for part in sentences(text) if _FAILS.search(part))


def looks_like_code(line: str) -> bool:
    """A code line, plain or as IPython prints it around a frame (`    522 # 3. Save state`, `--> 520 out = f(x)`)."""
    # not starve_said.code_line: an assignment counts only when it calls, since logs print `loss = nan` as output
    return bool(_CODE.match(line))


_CODE = re.compile(r"\s*(?:-+>\s*\d{1,6}\s|\d{1,6}\s+#)|\s*(?:def |class |import |from |#|\w+\s*=\s*\w+\()")


class PhaseWords:
    """PhaseText's reading of the person's sentences (its state lives on PhaseText, pickled in events.idx)."""

    banner: str
    prose: dict[str, str]
    cause: tuple[str, str] | None
    _sentence: str

    def _step_words(self, line: str) -> None:
        """The step the person says the run failed at (`it always crashes right at step 1000`), the first one."""
        if ("step" in line or "步" in line) and getattr(self, "said_step", None) is None and prose_like(line.strip()):
            said = _SAID_STEP.search(line)
            if said is not None and _FAILS_AT.search(line):
                self.said_step = (int(said.group(1) or said.group(2)), quoted(line))

    def _prose(self, line: str) -> None:
        """The user's words: a sentence that names memory and a phase. A sentence may run over a few lines
        (`But during Lora merging with` / `model.save_pretrained_merged(...)` / `... immediately gives OOM`): a
        line that does not end one carries on into the next, up to a blank line."""
        carried, self._sentence = self._sentence, ""
        text = line.strip()
        if not text or "File " in line or "{" in line or looks_like_code(line):
            return
        if text[:1] == "-" and _FLAGS.match(text) or ":" in text and text.isascii() and SETTING.match(text):
            self._sentence = carried  # settings (`--save_steps 1000 --eval_steps 300`): no words of the person's
            return
        prose = prose_like(text)
        if not prose:
            carried = ""  # a bar, a log record or the program's message: no sentence of the person's runs on
        elif len(carried) < 600 and not text.endswith((".", "!", "?", ":", "。", "！", "？", "：")):
            self._sentence = (carried + " " + text).strip()
        whole = (carried + " " + text).strip()
        self._cause_said(text, whole)
        if _FAILS.search(whole) and not MEMORY_WORDS.search(whole):
            self._failure_words(text, whole)
        elif prose and not MEMORY_WORDS.search(whole):
            self._intro_words(whole)
        self._memory_phase(line, carried, whole)

    def _cause_said(self, text: str, whole: str) -> None:
        """The OOM's cause in the person's sentence (`another process holds the GPU`), the first one said."""
        low_whole = whole.lower()
        if self.cause is None and any(hint in low_whole for hint in _ALL_CAUSE_HINTS) and \
                (_CAUSE_CONTEXT.search(whole) or oom_holders.CONTEXT.search(whole)):
            # the line alone first; then the sentence it ends, hard-wrapped over lines (`nvidia-smi shows 15 GB used
            # even though` / `nothing is running`)
            kind = oom_words.said_cause(text) or (oom_words.said_cause(whole) if whole != text else "")
            self.cause = (kind, quoted(text)) if kind else None
            self._cause_words = whole[:600] if kind else ""

    def _memory_phase(self, line: str, carried: str, whole: str) -> None:
        """The phase a sentence about memory names (the line's own words first, else the sentence it ends)."""
        text, lowered = line.strip(), line.lower()
        if ("memory" in lowered or "oom" in lowered or "ram" in lowered or "存" in line or "空间" in line) and \
                MEMORY_WORDS.search(line):
            sentence = text  # the line first: its own words outweigh the lines before it
        elif carried and MEMORY_WORDS.search(carried):
            sentence = whole
        else:
            return
        one = sentence == whole  # most lines: no sentence carried over, so the line is read once, not twice
        sentence = _phase_words(sentence)
        whole = sentence if one else _phase_words(whole)
        named = [(phase, words) for phase, words in _PROSE_PHASE
                 if words.search(sentence) or not one and words.search(whole)]
        said = _affirmed(sentence, named) + ([] if one else _affirmed(whole, named))
        named = _or_epoch_end(whole, [pair for pair in named if pair in said])
        if len(named) > 1 or WORKS.search(whole):
            # `evaluation works fine, but saving runs out of memory`: the phase of the OOM's clause
            chosen = _nearest(sentence, named)
            named = chosen if chosen is not None else _nearest(whole, named) or named
        for phase, words in named:
            if phase not in self.prose:
                self.prose[phase] = quoted(text if words.search(text) else whole)
                if words.search(_no_paths(text)):
                    self._words_at(phase)

    def _introduced(self, line: str) -> None:
        """The line after the person's sentence that introduces a paste (`as soon as the first evaluation starts I
        get:`): when it is the error itself, the phase that sentence names is where it failed."""
        phase, text = self._intro  # type: ignore[misc]
        self._intro = None
        if oom.is_oom_line(line) or line.lstrip().startswith("Traceback"):
            failed = getattr(self, "failed_in", None) or {}
            failed.setdefault(phase, text)
            self.failed_in = failed
            self._words_at(phase)

    def _intro_words(self, text: str) -> None:
        """A sentence of the person's that ends the way one introduces a paste (a colon, `I get`, `it throws`, `the
        following`, `报错如下`) and names one phase: it may introduce the error."""
        if len(text) > 300 or not text.endswith((":", "：")) and not _INTRO_END.search(text):
            return
        clean = _phase_words(text)
        named = _affirmed(clean, list(_PROSE_PHASE))
        if len(named) != 1:
            return
        found = named[0][1].search(clean)
        bounds = clause_starts(clean) + [len(clean) + 1]
        at = max(i for i, b in enumerate(bounds) if b <= found.start())  # type: ignore[union-attr]
        if not WORKS.search(clean, bounds[at], bounds[at + 1]):  # `training runs fine, but when evaluation starts I get:`
            self._intro = (named[0][0], quoted(text))

    def _failure_words(self, text: str, whole: str) -> None:
        """The person's sentence that places a failure in a phase (`the following error occurred when saving the
        checkpoint`, `it crashes at the validation step`): weaker than one about memory, it counts when the text
        shows the failure itself (an OOM message, the kernel's kill)."""
        if not prose_like(text) or looks_like_code(text):
            return
        whole = _failing_sentences(_phase_words(whole))
        named = _or_epoch_end(whole, _affirmed(whole, list(_PROSE_PHASE)))
        if len(named) > 1 or WORKS.search(whole):
            bounds = _FAILS.search(whole)
            chosen = _nearest(whole, named, bounds) if bounds else None
            named = chosen if chosen is not None else []
        failed = getattr(self, "failed_in", None) or {}
        for phase, words in named:
            if phase not in failed:
                failed[phase] = quoted(text if words.search(text) else whole)
                if words.search(_no_paths(text)):
                    self._words_at(phase)
        self.failed_in = failed

    def _words_after_banner(self) -> tuple[str, list[str]] | None:
        """The person's words naming another phase, written after the log's last status (`Saving checkpoints ...`
        then `but the evaluation that follows goes wrong`): they know which step failed."""
        if self.banner not in ("eval", "save"):
            return None
        said, since = getattr(self, "_said_n", None) or {}, getattr(self, "_banner_n", 0)
        for phase in ("eval", "save"):
            if phase != self.banner and said.get(phase, 0) > since:
                words = self.prose.get(phase) or (getattr(self, "failed_in", None) or {}).get(phase, "")
                return phase, ["as the text says: " + words]
        return None

    def _words_at(self, phase: str) -> None:
        """Where the person's words first named a phase (a line count), to weigh them against the log's status."""
        said = getattr(self, "_said_n", None) or {}
        said.setdefault(phase, getattr(self, "_n", 0))
        self._said_n = said
