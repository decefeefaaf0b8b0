"""Where a run was when it failed, from its text alone: the last status line or progress bar printed before
the failure (`***** Running Evaluation *****`, `Unsloth: Merging 4bit and LoRA weights`, Lightning's
`Validation DataLoader 0`, the Trainer's description-less eval bar inside training), an export command, a
checkpoint named at the step the run stopped, or the user's own words (English or Chinese, read in
phase_words.py; the bars are read in phase_bars.py). Bounded state, one line at a time; frozen when an OOM
strikes, so what is read after it cannot move it."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from loratui.logic import oom, oom_tables
from loratui.logic.advisor.phase_bars import CHECKPOINT, NOT_STATUS, PhaseBars
from loratui.logic.advisor.phase_words import (
    MEMORY_WORDS,
    NEGATED_AFTER,
    SETTING,
    WORKS,
    PhaseWords,
    looks_like_code,
    prose_like,
)
from loratui.logic.fmt import quoted

_STATUS = re.compile(
    r"(?:^|[:,\-\]*|>]\s*|[.!]\s+|\b(?:running|starting|start|begin(?:ning)?|now)\s+(?:the\s+)?|"
    r"^\W*(?:do|doing|begin to|start(?:ing)? to|perform(?:ing)?)\s+(?:the\s+|an?\s+)?)(?P<verb>sav(?:e|ing)(?!\s+(?:\w+\s+)?(?:memory|VRAM|RAM|space|time|GPU)\b)|merg(?:e|ing)|"
    r"export(?:ing)?|push(?:ing)?(?=[^.!?]{0,60}?\b(?:to|hub)\b)|upload(?:ing)?|eval(?:uat(?:e|ing|ion))?|validat(?:e|ing|ion)|"
    r"predict(?:ing|ion)|testing|train(?:ing)?)\b(?![.\w-]*\.(?:py|sh|ipynb|ya?ml|json|toml|log)\b)", re.I)
"""A status line's leading verb, after any logger prefix (`Unsloth: Merging 4bit and LoRA weights to 16bit...`,
`***** Running Evaluation *****`, `Saving model checkpoint to out/checkpoint-500`, `INFO - Start training`)."""
_ZH_STATUS = re.compile(r"(?:开始|正在|进行|准备|尝试)(?:对)?(?:模型|权重)?(?P<zh>验证|评估|评测|测试|保存|合并|导出|上传)(?!.{0,20}(?:完成|结束|成功))|"
                        r"(?P<zh2>验证|评估|评测|测试|保存|合并|导出|上传)(?:模型|权重|检查点)?中(?:\.|。|…|$)")
"""A status in Chinese: `开始验证` (start validating), `正在保存模型` (saving the model), `合并模型中...` (merging the model),
not one that reports it done."""
_EVAL_WORK = re.compile(
    r"^\W*(?:[\w.\[\]]+:\s*){0,3}(?!(?:tokeniz|pre-?process|load|download|cach|build|prepar|read|map|filter|group|"
    r"format|convert|split|shuffl|sampl|encod)\w*ing\b)\w+ing\b[^.!?|]{0,50}?\b(?:on|over|for|of)\s+(?:the\s+)?(?:validation|valid|val|"
    r"eval(?:uation)?|test|dev|held-?out)\s+(?:set|split|data(?:set)?|loader|batch(?:es)?)\b|"
    r"^\W*(?:[\w.\[\]]+:\s*){0,3}(?:comput|calculat)\w*\s+(?:the\s+)?(?:\w+\s+)?(?:metrics?|bleu|rouge\w*|perplexity|ppl|"
    r"accuracy|scores?|wer|cer|f1|mAP)\b|"
    r"^\W*(?:[\w.\[\]]+:\s*){0,3}generat\w*\s+(?:\w+\s+)?predictions\b|"
    r"^\s*(?:Test|Val|Valid|Eval|Evaluation|Validation):\s+\[\s*\d+/\d+\]", re.I)
"""A status that does an evaluation's work: any work on the validation, test or dev set (`Running inference on the
validation set`, `Generating predictions for the test set`), computing its metrics (`Computing BLEU`, `Calculating
perplexity`), or a metric logger's evaluation header (DeiT's and DETR's `Test:  [  0/313]  eta: 0:10:00`)."""
_SAVE_WORK = re.compile(r"^\W*(?:[\w.\[\]]+:\s*){0,3}(?:writ(?:e|ing)|dump(?:ing)?|serializ\w*)\s+(?:the\s+|a\s+)?(?:\w+\s+){0,2}"
                        r"(?:weights|model|checkpoint|shards?|state[ _]dict|safetensors|adapter)\b", re.I)
"""A status that writes the model out in other verbs (`Writing the merged weights to out/merged`, `Dumping state dict`)."""
_ZH_PHASE = {"验证": "eval", "评估": "eval", "评测": "eval", "测试": "eval", "保存": "save", "合并": "save", "导出": "save",
             "上传": "save"}
_STATUS_PHASE = {"sav": "save", "mer": "save", "exp": "save", "pus": "save", "upl": "save", "eva": "eval",
                 "val": "eval", "pre": "eval", "tes": "eval", "tra": "train"}
_STATUS_STEMS = ("sav", "merg", "export", "push", "upload", "eval", "validat", "predict", "testing", "train")
_EXPORT_COMMAND = re.compile(r"(?:\bpython[\d.]*|\btorchrun|accelerate launch|\bdeepspeed|llamafactory-cli|\bswift|"
                             r"\baxolotl|\bxtuner|\blitgpt)\s+(?:-m\s+)?(?:[^\s/]*/)*(?:\w+\.)*(?:convert\s+)?(?:export|merge|"
                             r"pth_?(?:to_?|2)hf|fuse\b|"
                             r"convert[\w-]*(?:gguf|ggml|hf|ckpt|safetensors|weights|checkpoint|lora|model))|"
                             r"(?<![\w.])mlx_lm\.fuse\b", re.I)
"""The command run is an export, a merge or a model's conversion, a tool's subcommand or a script (`python
src/export_model.py`, `llamafactory-cli export`, `swift export`, `python convert_hf_to_gguf.py`, `python -m
axolotl.cli.merge_lora`, `xtuner convert merge`, `xtuner convert pth_to_hf`, `litgpt merge_lora`, `mlx_lm.fuse`):
it writes a model out, as a save does."""
_EVAL_SCRIPT_RUN = re.compile(
    r"(?:\bpython[\d.]*|\btorchrun|accelerate launch|\bdeepspeed|\bbash|\bsh|\brun(?:s|ning)?(?: the)?|\./)\s+"
    r"(?:-m\s+)?(?:[^\s/]*/)*(?:eval|evaluate|evaluation|test|testing|val|validate|validation)(?:[_-][\w-]+)?\.(?:py|sh)\b",
    re.I)
"""The program run is an evaluation script (`python test.py --model_path ...`, `bash test.sh`, `running eval.py`)."""
_SAVING_NOW = re.compile(r"\bcheckpoint\b[^.!?]{0,60}\b(?:is|are)\s+(?:about to be|being)\s+saved\b", re.I)
"""A checkpoint announced as being written (DeepSpeed's `Checkpoint global_step1200 is about to be saved!`)."""
_CHECKPOINTING = re.compile(r"(?:^|[\]:|>*-]\s*|\b(?:INFO|DEBUG)\s+)(?<!gradient )(?<!activation )checkpointing\b"
                            r"(?!\s*(?:is\b|was\b|enabled|disabled|[:=]))", re.I)
"""A status that writes a checkpoint (`INFO Checkpointing model at step 1500`), not gradient checkpointing's notice."""
_CHECKPOINT_STATUS = re.compile(r"^\W*(?:\w+:\s*)?(?!load|resum|restor|read|fetch|download|find|found|search|look|"
                                r"convert(?:ing)? from)\w+ing\s+(?:the\s+|a\s+|model\s+|final\s+|last\s+|best\s+)*"
                                r"checkpoint\b", re.I)
"""A status that writes a checkpoint in any verb (`Summoning checkpoint.`, `Writing checkpoint ...`), not one that
reads one (`Loading checkpoint shards`, `Resuming from checkpoint`)."""
_PHASE_BANNER = re.compile(r"^\W*(?:start(?:ing)?\s+|begin(?:ning)?\s+|running\s+)?(?:test|testing|eval|evaluation|"
                           r"evaluating|validation|validating|val)\W*$", re.I)
"""A banner that is only the phase's name: `-------test-----------`, `Testing...`, `=== Evaluation ===`."""
_INTERVAL = re.compile(r"\b(eval|save)_steps\b['\"]?\s*[:=]?\s*['\"]?(\d{1,7})\b")
"""How often the run evaluates and saves, in any dump of its settings (`--eval_steps 200`, `eval_steps=250,`,
`eval_steps: 300`, `'save_steps': 100`)."""
_EVAL_OFF = re.compile(r"\beval(?:uation)?_strategy\b['\"]?\s*[:=]?\s*['\"]?(?:IntervalStrategy\.)?no\b|"
                       r"\bdo_eval\b['\"]?\s*[:=]?\s*['\"]?false\b", re.I)
"""Evaluation switched off, whatever eval_steps says."""
_PER_EPOCH = re.compile(r"\b(eval|evaluation|save)_strategy\b['\"]?\s*[:=]?\s*['\"]?(?:IntervalStrategy\.|"
                        r"SaveStrategy\.)?epoch\b", re.I)
_EPOCHS = re.compile(r"\bnum_train_epochs\b['\"]?\s*[:=]?\s*['\"]?(\d{1,4})(?:\.0)?\b")
"""Evaluating or saving once an epoch, and how many epochs: with the training bar's total, an epoch's length."""
_EVAL_DONE = re.compile(r"['\"]eval_(?:loss|runtime)['\"]\s*:")
"""The Trainer's evaluation results (`{'eval_loss': 1.04, 'eval_runtime': 61.2, ...}`): that evaluation finished."""
_SAMPLING = re.compile(r"^\W*(?:[\w.\[\]]+:\s*){0,2}(?:generating|sampling|creating|rendering)\s+(?:\d+\s+)?(?:"
                       r"(?:sample|validation|eval|test|preview)\s*(?:images?|videos?|audio|outputs?)?|images?|videos?|samples)\b",
                       re.I)
"""A trainer drawing samples to judge the model during training (sd-scripts' `generating sample images at step`,
diffusers' `Generating 4 validation images`): its evaluation."""
_KERAS_VALIDATES = re.compile(r"\s- val_\w+: |validation_data\s*=|validation_split\s*=")
_TF_FUNCTION = re.compile(r"__inference_(train|test|predict|evaluate)_function")
"""TensorFlow names the compiled step an op ran in (`[Op:__inference_test_function_18823]`): Keras' train, test
(evaluation during fit or evaluate()) or predict step."""
_EVAL_LOG = re.compile(r"^\s*\[[>\s]{3,}\]\s*\d+/\d+,\s*[\d.]+\s*task/s|\bEpoch\((?:val|test)\)", re.I)
"""An evaluation's own progress line: mmcv's test loop (`[>>>>>>   ] 500/5000, 22.4 task/s, elapsed: 22s`) and
mmengine's (`Epoch(val) [1][ 50/500]`)."""
_CONVERSION = re.compile(r"\b(?:convert\w*|conversion)\b.{0,60}?\b(?:gguf|ckpt|safetensors|onnx|hf|huggingface|"
                         r"diffusers)\b", re.I)
"""Converting the model to another format writes it out (`Unsloth: Conversion from QLoRA to GGUF`, `Converting to
CKPT ...`)."""
_PROGRESS = re.compile(r"(?<![\d.])(\d{1,9})\s*/\s*(\d{1,9})(?![\d.]).{0,40}?\d\s*(?:s/it|it/s)")


_NOT_STATUS_WORK = re.compile(r"\b(?:done|finished|complete[d]?|took|results?)\b|[{=]|\b(?:I|we|you|my|our)\b|"
                              r"tokeni[sz]|pre-?process|\b(?:map|filter|download\w*|cach\w*|load\w*)\b", re.I)
"""A work status reported over (`Computing metrics done`), a result, the person's sentence (`I was computing ...`), or
the data's preparation (`Running tokenizer on the validation set`)."""


@dataclass
class PhaseText(PhaseBars, PhaseWords):
    """The phase the text last announced, and the user's words about where memory ran out."""

    banner: str = ""  # the phase the last status line or bar announced, since the last training log
    banner_line: str = ""  # that line
    train_total: int = 0  # the total of the training loop's bar (the bar drawn when a training log came)
    _bar_total: int = 0  # the total of the last bar with no description
    frozen: bool = False  # an OOM struck: the banner is where it was then (a log released later must not reset it)
    prose: dict[str, str] = field(default_factory=dict)  # phase -> the user's line that names it
    progress: tuple[int, str] | None = None  # (step, line) of the last progress counter
    checkpoints: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=16))
    _sentence: str = ""  # the user's sentence so far, when a line ended without ending it
    cause: tuple[str, str] | None = None  # (OOM kind, the line) the user's words give, for a message with no numbers
    smi: list[tuple[int, int, int]] = field(default_factory=list)  # (gpu, pid, bytes) of nvidia-smi's process rows

    def train_log(self) -> None:
        """A training log arrived: the run is back in its training steps (unless it is the log the banner's own line
        carries: Keras' bar at an epoch's end prints the epoch's loss)."""
        if getattr(self, "_log_on_banner", False):
            self._log_on_banner = False
            return
        if not self.frozen:
            self.banner = ""

    def phase(self) -> tuple[str, list[str]]:
        """(phase, evidence) from the text alone: a Trainer banner, a checkpoint named at the step the run
        stopped, or the user's own words about memory in evaluation or saving."""
        op_phase = getattr(self, "op_phase", "")  # getattr: a state pickled in an older events.idx
        if op_phase:
            return (op_phase, ["the failing op ran in TensorFlow's " + op_phase + " step"]) if op_phase == "eval" \
                else ("", [])
        later = self._words_after_banner()
        if later:
            return later
        if self.banner and self.banner != "train":
            return self.banner, ["the last status before it: " + self.banner_line] if self.banner_line else []
        if self.progress is not None:
            step, progress_line = self.progress
            named = next((text for n, text in self.checkpoints if n == step), None)
            if named is not None:
                return "save", [f"the run stopped at step {step} and checkpoint-{step} is named:",
                                progress_line, named]
        phase, evidence = self._interval_phase()
        if phase:
            return phase, evidence
        for phase in ("eval", "save"):
            if phase in self.prose:
                return phase, ["as the text says: " + self.prose[phase]]
        failed = getattr(self, "failed_in", {})  # getattr: a state pickled in an older events.idx
        for phase in ("eval", "save"):
            if phase in failed:
                return phase, ["as the text says: " + failed[phase]]
        return "", []

    def line(self, line: str) -> None:
        """Fold one output line in."""
        self._n = getattr(self, "_n", 0) + 1  # getattr: a state pickled in an older events.idx
        if getattr(self, "_intro", None) is not None and line.strip() and not line.lstrip().startswith("```"):
            self._introduced(line)
        before = self.banner
        self._status(line)
        if self.banner != before:
            self._banner_n = self._n
        if "_steps" in line or "_strategy" in line or "do_eval" in line or "_epochs" in line:
            self._settings(line)
        if "eval_" in line and _EVAL_DONE.search(line):
            if self.progress is not None:
                self._eval_done_at = self.progress[0]
            if self.banner == "eval" and not self.frozen:
                self.banner = ""  # the evaluation printed its results: it is over, what fails next is not it
        if "__inference_" in line:
            function = _TF_FUNCTION.search(line)
            if function is not None:  # the OOM's own op: read after the OOM too
                self.op_phase = "train" if function.group(1) == "train" else "eval"
        if "MiB |" in line or "MiB|" in line:
            row = oom_tables.smi_row(line)
            rows = getattr(self, "smi", None)  # getattr: a state pickled in an older events.idx
            if row is not None and (rows is None or len(rows) < 64):
                self.smi = (rows or []) + [row]
        if "memory " in line and line.lstrip().startswith("|"):
            self._summary(line)
        if "llocate" in line or "Limit:" in line or "InUse:" in line or "FreeBlock:" in line:
            self._allocator(line)
        if "checkpoint-" in line:
            for match in CHECKPOINT.finditer(line):
                self.checkpoints.append((int(match.group(1)), quoted(line)))
        if "s/it" in line or "it/s" in line:
            progress = _PROGRESS.search(line)
            if progress:
                self.progress = (int(progress.group(1)), quoted(line))
        self._step_words(line)
        self._prose(line)

    def _settings(self, line: str) -> None:
        """The run's eval and save intervals from a dump of its settings; evaluation switched off drops the first."""
        every = getattr(self, "every", None) or {}  # getattr: a state pickled in an older events.idx
        for match in _INTERVAL.finditer(line):
            if int(match.group(2)) > 0:
                every[match.group(1)] = int(match.group(2))
        if _EVAL_OFF.search(line):
            every["eval_off"] = 1
        for match in _PER_EPOCH.finditer(line):
            every["save_epoch" if match.group(1).lower() == "save" else "eval_epoch"] = 1
        epochs = _EPOCHS.search(line)
        if epochs and int(epochs.group(1)) > 0:
            every["epochs"] = int(epochs.group(1))
        self.every = every

    def _interval_phase(self) -> tuple[str, list[str]]:
        """Eval or save when the run stopped at a step its eval or save interval divides (the Trainer's bar shows
        the step it finished, then evaluates, then saves; else the step the person says it failed at): the
        evaluation, unless its results were printed at that step (then the save came next)."""
        every = getattr(self, "every", None)
        progress = self.progress or getattr(self, "said_step", None)  # getattr: a state pickled in an older events.idx
        if not every or progress is None or progress[0] <= 0:
            return "", []
        step, line = progress
        every = dict(every)
        bar = _PROGRESS.search(line)
        total, epochs = (int(bar.group(2)) if bar else 0), every.get("epochs", 0)
        if total and epochs and total % epochs == 0:  # an epoch's length in steps, for once-an-epoch intervals
            for phase in ("eval", "save"):
                if every.get(phase + "_epoch"):
                    every[phase] = total // epochs
        due = [phase for phase in ("eval", "save") if every.get(phase) and step % every[phase] == 0]
        if "eval" in due and (every.get("eval_off") or getattr(self, "_eval_done_at", None) == step):
            due.remove("eval")
        if not due:
            return "", []
        what = "evaluates" if due[0] == "eval" else "saves a checkpoint"
        return due[0], [f"the run stopped at step {step}, where it {what} ({due[0]}_steps={every[due[0]]}):", line]

    def _summary(self, line: str) -> None:
        """A row of torch.cuda.memory_summary(): a large non-releasable share is fragmentation."""
        row = oom_tables.SUMMARY_ROW.match(line)
        size = oom.parse_size(row.group(2), row.group(3)) if row else None
        if row is None or size is None:
            return
        rows = getattr(self, "_summary_rows", None) or {}  # getattr: a state pickled in an older events.idx
        rows[row.group(1)] = size
        self._summary_rows = rows
        kind, why = oom_tables.summary_cause(rows)
        if kind:
            self.cause = (kind, why)

    def _allocator(self, line: str) -> None:
        """TensorFlow's or XLA's allocator report: the request it failed, then its pool's stats; a pool with room
        but no block that held the request is fragmented (its numbers outweigh anyone's words)."""
        if "trying to allocate" in line:
            request = oom_tables.BFC_REQUEST.search(line)
            size = oom.parse_size(request.group(1), request.group(2)) if request else None
            if size is not None and "not a failure" not in line:
                self._bfc: dict[str, int] | None = {"requested": size}
            return
        stats = getattr(self, "_bfc", None)  # getattr: a state pickled in an older events.idx
        stat = oom_tables.BFC_STAT.match(line) if stats is not None else None
        if stats is None or stat is None:
            return
        stats[stat.group(1)] = int(stat.group(2))
        kind, why = oom_tables.bfc_cause(stats)
        if kind:
            self.cause = (kind, why)

    def _status(self, line: str) -> None:
        """The phase a status line or a progress bar's description announces: the last one before a failure
        says where the run was (an evaluation bar ends when a bar of another phase is drawn)."""
        if self.frozen:
            return
        if "val" in line and _KERAS_VALIDATES.search(line):
            self._keras_validates = True
        if self._bar_status(line) or self._command_status(line) or len(line) > 300 or "File " in line:
            return
        if not self._banner_status(line):
            self._status_words(line)

    def _command_status(self, line: str) -> bool:
        """An export or conversion command, a sampling or evaluation loop's own line, an evaluation script run: the
        phase it starts. True when the line was one."""
        if ("export" in line or "merge" in line or "convert" in line or "fuse" in line or "hf" in line) and \
                _EXPORT_COMMAND.search(line):
            self._announce("save", line)
            return True
        if ("ampl" in line or "alidation" in line or "mage" in line or "ideo" in line) and _SAMPLING.match(line):
            self._announce("eval", line)
            return True
        if ("task/s" in line or "Epoch(" in line) and _EVAL_LOG.search(line):
            self._announce("eval", line)
            return True
        if "onver" in line and _CONVERSION.search(line) and not looks_like_code(line):
            self._announce("save", line)
            return True
        if (".py" in line or ".sh" in line) and _EVAL_SCRIPT_RUN.search(line):
            self._announce("eval", line)
            return True
        return False

    def _banner_status(self, line: str) -> bool:
        """A checkpoint's save, a phase's banner, a Chinese status, or work under way (`Evaluating ...`,
        `Writing the model ...`): the phase it announces. True when the line was one."""
        if "checkpoint" in line.lower() and (_CHECKPOINT_STATUS.match(line) or _SAVING_NOW.search(line) or
                                             _CHECKPOINTING.search(line)) or \
                _PHASE_BANNER.match(line):
            self._announce("save" if "checkpoint" in line.lower() else "eval", line)
            return True
        if ("开始" in line or "正在" in line or "进行" in line or "准备" in line or "尝试" in line or "中" in line) and \
                not looks_like_code(line):
            zh = _ZH_STATUS.search(line)
            if zh is not None:
                self._announce(_ZH_PHASE[zh.group("zh") or zh.group("zh2")], line)
                return True
        lowered = line.lower()
        metric_log = ("st:" in line or "al:" in line or "id:" in line) and "[" in line  # `Test:  [  0/313]`
        work = (_EVAL_WORK.match(line) or _SAVE_WORK.match(line)) if "ing " in lowered or metric_log else None
        if work is not None and not looks_like_code(line) and not WORKS.search(line) and \
                not _NOT_STATUS_WORK.search(line):
            self._announce("eval" if work.re is _EVAL_WORK else "save", line)
            return True
        return False

    def _status_words(self, line: str) -> None:
        """A status line's verb (`Saving model checkpoint`, `***** Running Evaluation *****`): the phase it
        enters, unless the line is a setting, the person's sentence, or code."""
        if not any(stem in line.lower() for stem in _STATUS_STEMS):
            return  # the cheap test first: this runs on every line of a log
        text = line.strip()
        if SETTING.match(text) or WORKS.search(text) or MEMORY_WORDS.search(text) and prose_like(text):
            return  # a setting, or the person's sentence (`Saving works, the OOM is in evaluation`): no status
        status = None
        for status in _STATUS.finditer(text):
            pass  # the last status on the line is the newest (`Training Completed!!! Saving pre-trained model`)
        if status and not NOT_STATUS.search(text, status.start()) and not looks_like_code(line) and \
                not NEGATED_AFTER.match(text, status.end()):  # `..., evaluation is never reached:` is no status
            self._announce(_STATUS_PHASE[status.group("verb")[:3].lower()], line)

    def _announce(self, phase: str, line: str) -> None:
        """A status line names the phase the run enters; the bar drawn before it is kept, so that bar going on
        later says the phase ended (a checkpoint saved, an evaluation done, training resumed)."""
        self.banner, self.banner_line = phase, quoted(line)
        self._banner_bar = getattr(self, "_last_bar", None)  # getattr: a state pickled in an older events.idx
