"""The troubleshooting advisor: folds a run's events and its recipe into concrete, evidenced advice.

`Advisor.feed` is cheap and deterministic (bounded deques, no clock reads): the same event sequence gives
the same `items()` live, on attach and in replay. Detectors record *findings* (the numbers and the step
where they were seen) as events arrive; `items()` turns findings into `Advice`, with moves computed from
the recipe alone (build.py), so a finding means the same thing whenever it is shown. Missing or contradictory
data gives no advice rather than a guess.

The VRAM warning line `[monitor] warn_gb` is read as GiB (2**30 bytes), the unit nvidia-smi, torch and
the VRAM pane show: a "32 GB" card reports 31.7 GiB, so the default 30 leaves about 1.7 GiB of headroom.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import replace
from typing import Any

from loratui import events
from loratui.logic import command_keys
from loratui.logic.advisor.advice import (  # re-exported: callers import them from here
    ERROR,
    GIB,
    IDS,
    INFO,
    WARNING,
    Advice,
    Finding,
    distinct_evidence,
    sentence_case,
    warn_line_bytes,
)
from loratui.logic.advisor import build, loss_words, objectives, rank, root
from loratui.logic.advisor.guard import KEYS as GUARD_KEYS
from loratui.logic.advisor.loss import LossWatch
from loratui.logic.advisor.oom_fold import OomFold
from loratui.logic.advisor.said import SAID_WORDS, flat_said, rise_said
from loratui.logic.advisor.text import TextWatch
from loratui.logic.advisor.watches import (
    _SETUP,
    CUDA_BOILERPLATE,
    SETUP_WORDS,
    Context,
    JumpWatch,
    LeakWatch,
    RankWatch,
    StarveWatch,
    VramWatch,
)
from loratui.logic.clauses import cjk_spaced
from loratui.logic.tracebacks import TraceScanner
from loratui.logic.word_gate import WordGate
from loratui.recipe import WATCHED, Recipe, RecipeError, load_recipe
from loratui.logic.fmt import quoted

__all__ = ["ERROR", "IDS", "INFO", "WARNING", "Advice", "Advisor", "Finding", "warn_line_bytes"]

_PRINTED_LOG = re.compile(r"\s*(?:\[[^\]]{0,40}\]\s*)?\{\s*['\"]")
"""A printed Trainer dict or JSON record (maybe after a bracketed tag): the readers of a person's words skip it,
as no one's words are in it (it is half the lines of a big log, and those readers cost most of their time)."""

# -- the advisor ----------------------------------------------------------------------------------


class Advisor(OomFold):
    """Folds events into advice; `items()` lists it, most important first."""

    def __init__(self, recipe: Recipe | None = None, *, pasted: bool = False) -> None:
        self.recipe = recipe
        self.pasted = pasted
        """Text pasted to `doctor`: an exception in it is the failure to explain, with no End event."""
        self.ctx = Context()
        self.found: dict[str, Finding] = {}
        self.oom: Finding | None = None
        line = warn_line_bytes(recipe)
        self.vram, self.starve, self.jump = VramWatch(line), StarveWatch(), JumpWatch(line)
        self.leak, self.loss, self.ranks = LeakWatch(), LossWatch(recipe), RankWatch()
        self.estimate: events.Estimate | None = None
        self.no_gpu = False
        self.step_lens: deque[int] = deque(maxlen=200)  # longest sequence of each recent step (rank 0)
        self.oom_batch_len = 0  # the sequence length of the batch an OOM struck, when the trainer said
        self.trace, self.text = TraceScanner(), TextWatch()
        self.oom_after = ""  # the phase of traceback frames printed after the OOM line
        self.end: events.End | None = None
        self.tail: deque[str] = deque(maxlen=8)  # the last output lines, for a failure without a traceback
        self.loss_lines: deque[str] = deque(maxlen=16)  # recent lines that mention a loss, to quote
        self.spoken: tuple[str, str, list[str]] | None = None  # a watched command's (dialect, config, line)
        self._items: list[Advice] | None = None
        self._stream = ""  # the output stream of the last Output event
        self._oom_open = ""  # the OOM message so far while its numbers go on in the next lines (a wrapped paste)
        self._oom_count = 0  # the exceptions seen when the OOM struck: frames after it, until the next, are its
        self.card_at_start: tuple[int | None, int | None] = (None, None)  # (total, free) before any allocation
        self.tf_pool: int | None = None  # the pool TensorFlow sized at start from the memory the card reported free
        self.host_oom: tuple[str, str, list[str], int] | None = None  # the host's RAM ran out: (line, phase, evidence,
        # step)
        self.diffusion = False  # the text is about a diffusion model (its loss looks flat when it trains)
        self.results_good = False  # the person says the results are good or improving (the model learns)
        self.asks_normal = False  # the person asks whether what they see is normal (a worry, not a report)
        self.lr_rises = False  # the person says the loss rose with the learning rate (warm-up, the lr rising)
        self.rl = False  # the text is about reinforcement learning (its losses need not fall while the agent learns)
        self.respaced: dict[str, str] = {}  # a line as read spaced -> as printed (`_line`), for the evidence
        self.lengths: dict[str, int] | None = None  # a watched config's own length fields, where it has no max_length

    def feed(self, event: Any) -> None:
        """Fold one event in (unknown kinds are ignored)."""
        name = _HANDLERS.get(type(event))
        if name is not None:
            getattr(self, name)(event)

    def feed_all(self, found: Any) -> "Advisor":
        """Fold many events; returns self."""
        for event in found:
            self.feed(event)
        return self

    def items(self) -> list[Advice]:
        """The advice now, most important first (built lazily, cached until a finding changes)."""
        if self._items is None:
            built = rank.order(build.build_all(self), self.found, build.seen(self), lambda: build.failure(self))
            built = [self._in_own_words(replace(a, title=self._as_printed(sentence_case(a.title)),
                                                evidence=[self._as_printed(e) for e in distinct_evidence(a.evidence)]))
                     for a in built]
            self._items = built
        return list(self._items)

    def _as_printed(self, text: str) -> str:
        """`text` with each line the readers read spaced quoted as the program or person printed it (`_line`)."""
        for spaced, printed in getattr(self, "respaced", {}).items():  # getattr: an advisor pickled in an older index
            if spaced in text:
                text = text.replace(spaced, printed)
        return text

    def _in_own_words(self, advice: Advice) -> Advice:
        """A recipe run's advice applies as it is; a watched command's names its own fields (and `A` writes
        only into the LLaMA-Factory/axolotl YAML config it names)."""
        if self.spoken is None:
            return replace(advice, fix=advice.change)
        said = command_keys.speak(advice.change, *self.spoken)
        return replace(advice, change=said.change, fix=said.fix, no_fix=said.no_fix)

    def _keeps(self, finding: Finding) -> bool:
        """Whether `_latch` would keep this finding: the first of its id, or one that replaces a withdrawn or less
        exact one, or a rise the loss came back from (a new rise is news)."""
        kept = self.found.get(finding.id)
        return kept is None or bool(kept.facts.get("withdrawn")) or _sharper(kept, finding) or \
            (kept.facts.get("recovered") is not None and finding.facts.get("recovered") is None)

    def _latch(self, finding: Finding | None) -> None:
        """Keep the first finding of each id (an error replaces an earlier pre-OOM warning)."""
        if finding is not None and self._keeps(finding):
            if finding.id in root.ORDERED:  # what came before it on any rank may be its cause
                finding.facts.setdefault("raised_before", self.trace.count)
            self.found[finding.id] = finding
            self._items = None

    # -- event handlers -------------------------------------------------------------------------

    def _on_header(self, e: events.Header) -> None:
        """The run's own warning line wins over a default (a bare log replayed without its recipe); a
        watched command is advised in its own words."""
        if e.warn_gb is not None and self.recipe is None:
            self.vram.line = self.jump.line = int(e.warn_gb * GIB)
        if not e.command:
            return
        self.spoken = command_keys.dialect(e.command), command_keys.config_file(e.command), list(e.command)
        if self.recipe is not None and self.recipe.model.path == WATCHED:
            # The run directory holds only [monitor] until the watched Trainer recorded its live settings:
            # moves computed from the recipe defaults would be made up, so advise without a recipe.
            self.recipe = self.loss.recipe = None
        self._items = None

    def _on_settings(self, e: events.Settings) -> None:
        """A watched Trainer's live settings: from here on every surface prices moves from the same recipe
        (the run directory's recipe.toml is the same text, read by `doctor` before the log)."""
        try:
            recipe = load_recipe("recipe.toml", e.recipe, require_model=False)
        except RecipeError:
            return  # the hook checked it with the same loader; a corrupt event leaves the advice as it was
        self.recipe = self.loss.recipe = recipe
        self.lengths = dict(e.lengths) if e.lengths is not None else None
        self._items = None

    def _on_state(self, e: events.State) -> None:
        self.ctx.state = e.state
        if e.state != events.TRAINING:
            self.starve.reset()

    def _on_trainbegin(self, e: events.TrainBegin) -> None:
        self.ctx.began, self.ctx.max_steps = True, e.max_steps
        self.ctx.training = True  # the train phase opens with it; logs without phases still count
        self.ctx.step = max(self.ctx.step, e.start_step)

    def _on_phase(self, e: events.Phase) -> None:
        if e.name == "train":
            self.ctx.training = e.edge == "begin"
        elif e.name in ("eval", "save"):
            self.ctx.phase = e.name if e.edge == "begin" else ""
            self.jump.phase_peak = 0
            self.starve.reset()

    def _on_step(self, e: events.Step) -> None:
        self.ctx.step = max(self.ctx.step, e.step)
        if e.rank == 0:
            self.starve.step(e)
            if e.max_len > 0:
                self.step_lens.append(e.max_len)
        self._latch(self.leak.step(self.ctx, e))
        self._latch(self.ranks.step(self.ctx, e))

    def _on_log(self, e: events.Log) -> None:
        self.ctx.step = max(self.ctx.step, e.step)
        if "loss" in e.values and not any(k.startswith("eval_") for k in e.values):
            self.text.where.train_log()
            self.text.prep_line, self.text.prep_s = "", 0  # training went on after it: not why a later timeout came
        for finding in self.loss.log(self.ctx, e):
            # quoted only when kept, or when it is the start NaN `_withdraw_said_nan` compares by its quote: a log
            # where every line is a finding (a NaN run) quotes once, not once a line
            if self._keeps(finding) or finding is self.loss.start_nan:
                quote = self._quote(e)
                if quote:
                    finding.facts["quote"] = quote
            self._latch(finding)
        if self.loss.changed:
            self._items = None  # a finding already latched was escalated (a rise that ended in NaN) or withdrawn
            self._withdraw_said_nan()

    def _withdraw_said_nan(self) -> None:
        """The text's own NaN finding on the line whose grad-norm NaN the loss watch withdrew (the loss scaler's
        first overflows): the same line read twice, once as text and once as a log."""
        nan, withdrawn = self.found.get("nan_loss"), self.loss.withdrawn
        if nan is not None and withdrawn is not None and nan is not withdrawn and \
                nan.facts.get("quote") and nan.facts.get("quote") == withdrawn.facts.get("quote"):
            nan.facts["withdrawn"] = True

    def _quote(self, e: events.Log) -> str:
        """The recent output line that printed this log, verbatim (evidence quotes the input).

        The text reader hands a printed dict on only once the next line arrived (it waits for the bar's
        redraw), so the latest line printing the loss may be the next log's: the line that prints most of
        this log's values and its step wins, the latest on a tie."""
        loss = events.num_in(e.values.get("loss"))
        if loss is None:
            return ""
        others = [x for x in (events.num_in(v) for k, v in e.values.items() if k != "loss") if x is not None]
        best, best_score = "", 0
        for line in reversed(self.loss_lines):
            if not _prints(line, loss):
                continue
            score = 1 + sum(_prints(line, x) for x in others) + _prints_step(line, e.step)
            if score > best_score:
                best, best_score = quoted(line), score
        return best

    def _on_gpuinfo(self, e: events.GpuInfo) -> None:
        self.ctx.gpu_names.update(zip(e.indices, e.names))
        self.no_gpu = not e.available  # a CPU run: no memory advice (host RAM is not VRAM)

    def _on_estimate(self, e: events.Estimate) -> None:
        self.estimate = e
        vocab = e.config.get("vocab_size")  # the model's own facts: a log may carry anything here
        self.loss.vocab = vocab if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab >= 2 else 0
        self._items = None

    def _on_sample(self, e: events.Sample) -> None:
        ctx = self.ctx
        ctx.last_sample[e.gpu] = e
        if e.run_pids:
            ctx.ours.add(e.gpu)
        if not ctx.is_ours(e.gpu) or ctx.ended or not ctx.training or e.total <= 0:
            return
        self._latch(self.jump.sample(ctx, e))
        if not ctx.steady_training():
            return
        if self.vram.sample(ctx, e) | self.starve.sample(ctx, e):
            self._items = None

    def _on_notice(self, e: events.Notice) -> None:
        if e.key in GUARD_KEYS:  # the guard's story replaces its finding each time: the newest line leads
            lines = (self.found["guard"].facts["lines"] if "guard" in self.found else [])[-7:] + [e.message]
            level = e.level if e.level in (ERROR, WARNING, INFO) else WARNING
            self.found["guard"] = Finding("guard", self.ctx.step, {"lines": lines, "level": level})
            self._items = None
        if e.key == "hung":
            self._latch(Finding("run_hung", self.ctx.step, {"message": e.message}))
        if e.key == "oom_batch":
            found = re.search(r"sequence length (\d+)", e.message)
            self.oom_batch_len = int(found.group(1)) if found else 0
            self._items = None

    def long_sample(self) -> tuple[int, int] | None:
        """(failing batch length, typical step length) when the OOM struck one unusually long batch."""
        if not self.oom_batch_len or len(self.step_lens) < 3:
            return None
        typical = sorted(self.step_lens)[len(self.step_lens) // 2]
        return (self.oom_batch_len, typical) if self.oom_batch_len >= 1.5 * typical else None

    def _on_output(self, e: events.Output) -> None:
        if e.stream != getattr(self, "_stream", ""):  # getattr: an advisor pickled in an older events.idx
            self.trace.end_message()  # stdout's buffered dicts after stderr's traceback are not its message
            self._stream = e.stream
        for line in e.lines:
            self._line(line)

    def blank_line(self) -> None:
        """A blank line of a pasted text (the reader sends none): an exception's message does not go on past it into
        the person's next paragraph (`ValueError: ...`, a blank, `Could you please tell me how to fix it?`)."""
        self.trace.end_message()

    def _on_end(self, e: events.End) -> None:
        self.ctx.ended = True
        if e.state == events.FAILED or e.cause:
            self.end = e
            if e.error:
                self.trace.end_message()  # the stderr tail read again: its first line does not go on the last
                for line in e.error.splitlines()[-40:]:
                    self._line(line)
        self._items = None

    def _line(self, line: str) -> None:
        """Scan one output line: traceback frames and exceptions, an OOM, setup errors, text hints. A line where
        Chinese touches Latin letters or digits is read spaced (`做PPO训练时loss不降` as `做 PPO 训练时 loss 不降`):
        both are word characters to `\\b`, so every English pattern would miss its word there; one spacing here
        serves every reader of the line."""
        if len(line) > 4000:
            line = line[:4000]
        if not line.isascii():
            line = self._spaced(line)
        self.trace.line(line)
        self._traceback_after_oom()
        self._text_findings(line)
        self._card_facts(line)
        # getattr: an advisor pickled in an older events.idx
        if getattr(self, "_oom_open", "") and self._oom_wrapped(line):
            return
        line, struck = self._oom_message(line)
        if struck:
            return
        self._host_oom(line)
        self._oom_in_words(line)
        self._setup_errors(line)

    def _spaced(self, line: str) -> str:
        """The line spaced where Chinese, kana or Hangul touches a Latin word, remembered beside its printed form (as
        `quoted` cuts both) so the evidence quotes what was printed; the last RESPACED_KEPT such lines."""
        spaced = cjk_spaced(line)
        if spaced != line:
            kept = getattr(self, "respaced", None)
            if kept is None:
                kept = self.respaced = {}
            kept[quoted(spaced).removesuffix("…")] = quoted(line).removesuffix("…")
            if len(kept) > RESPACED_KEPT:
                del kept[next(iter(kept))]
        return spaced

    def _text_findings(self, line: str) -> None:
        """What the text readers find in the line, the person's words about the loss, and the tail kept."""
        for finding in self.text.line(line, self.ctx.step):
            self._latch(finding)
        if any(word in line for word in root.WORDS):
            self._latch(root.store_finding(line, self.ctx.step))
        if not getattr(self, "diffusion", False) and _DIFFUSION_NEEDS.passes(line) and \
                _DIFFUSION.search(line):  # getattr: an older events.idx
            self.diffusion = True
            self._items = None
        if _PRINTED_LOG.match(line):
            pass  # a printed dict or JSON record: the loss watch reads its numbers, and no one's words are in it
        elif "oss" in line or "OSS" in line or "损失" in line or "eward" in line or \
                any(word in line for word in SAID_WORDS) or loss_words.mentions(line):
            self._latch(rise_said(line, self.ctx.step))
            self._latch(flat_said(line, self.ctx.step))
        elif "redict" in line or "utput" in line or "acc" in line or "Acc" in line or "准确率" in line:
            self._latch(flat_said(line, self.ctx.step))  # a classifier said to answer one class
        if not _PRINTED_LOG.match(line):
            self._worry_words(line)
        if line.strip():
            self.tail.append(quoted(line))
            if "oss" in line:
                self.loss_lines.append(line)

    def _worry_words(self, line: str) -> None:
        """The person's words that make a loss they say stands still no report (build.py `_still_loss_excused`): the
        results said to improve, or a question whether it is normal. Not read in a printed record (a training log
        line per step: no one's words are in it, and it is most of a long log)."""
        if not getattr(self, "results_good", False) and _RESULTS_GOOD_NEEDS.passes(line) and \
                _RESULTS_GOOD.search(line) and not _RESULTS_DENIED.search(line):
            self.results_good = True  # getattr: an advisor pickled in an older events.idx
            self._items = None
        if not getattr(self, "asks_normal", False) and _ASKS_NORMAL_NEEDS.passes(line) and ASKS_NORMAL.search(line):
            self.asks_normal = True
            self._items = None
        if not getattr(self, "lr_rises", False) and _LR_RISES_NEEDS.passes(line) and _LR_RISES.search(line):
            self.lr_rises = True
            self._items = None
        if not getattr(self, "rl", False) and _RL_NEEDS.passes(line) and _RL.search(line) and \
                not _PREFERENCE.search(line) and not loss_words.REWARD_STILL.search(line):
            self.rl = True
            self._items = None

    def _setup_errors(self, line: str) -> None:
        """A setup error's line (bitsandbytes, flash-attn, a CUDA error's boilerplate)."""
        lowered = line.lower()
        for advice_id, pattern in _SETUP:
            if advice_id not in self.found and any(w in lowered for w in SETUP_WORDS[advice_id]) and \
                    pattern.search(line) and not _COMMENT.match(line):
                self._latch(Finding(advice_id, self.ctx.step, {"line": quoted(line)}))
        if (self.oom is None or self.oom.facts["report"].said) and "cuda_error" not in self.found and \
                "asynchron" in line and \
                CUDA_BOILERPLATE.search(line):
            self._latch(Finding("cuda_error", self.ctx.step, {"line": quoted(line)}))


RESPACED_KEPT = 200
"""Lines read spaced whose printed form the evidence may need: a pasted text's, and a live log's recent ones (a
finding quotes the line it is found on, or one a few lines before)."""
_DIFFUSION = re.compile(r"(?i:stable[ -]?diffusion|diffusion model|diffusion[ _](?:loss|training|objective)|"
                        r"latent diffusion|diffusers|text[-_ ]to[-_ ]image|dreambooth|textual[ _]inversion|\bDDPM\b|\bDDIM\b|noise_pred|\bsd-scripts\b|\bkohya)|"
                        r"\bSDXL\b|\bSD ?(?:1\.[45]|2\.1|3(?:\.5)?)\b")
"""Text about a diffusion model: its training loss (the error of the predicted noise, dominated by the sampled
timestep) is known to stay level and noisy while the samples improve (huggingface/diffusers#3604)."""
_DIFFUSION_NEEDS = WordGate("diffus", "text", "dream", "ddpm", "ddim", "noise_pred", "sd", "kohya")
"""A word every match of _DIFFUSION holds (`text` for text-to-image and textual inversion, `sd` for SDXL, SD 1.5 and
sd-scripts): it ran on every line of every log until one named diffusion, printed records included (the costliest
single pattern on a CUDA OOM message, some 130 us)."""

_RESULTS_GOOD = re.compile(r"\b(?:results?|outputs?|samples?|generations?|images?|predictions?)\s+(?:keeps?|kept|are|is|"
                           r"were|was|look|looks|looked|seems?|seemed)\s+(?:still\s+|pretty\s+|quite\s+|very\s+|"
                           r"really\s+)?(?:improv\w*|getting better|better|good|great|awesome|excellent|fine)\b|"
                           r"效果(?:很好|不错|挺好|越来越好)", re.I)
"""The person's results said to be good or improving (`the loss is stuck at 0.9, but the results kept improving`):
the model learns, so a loss they say stands still is the objective's floor, not a run that does not train."""
ASKS_NORMAL = re.compile(r"\b(?:is|are|was)\s+(?:this|that|it|these|they)\s+(?:\w+\s+)?(?:normal|expected)\b|"
                         r"\bis\s+it\s+(?:\w+\s+)?(?:normal|expected)\b|\b(?:is|are)\s+(?:\w+\s+){1,3}?supposed\s+to\b|"
                         r"正常吗|是否正常|正常么|正常嘛", re.I)
"""The person asks whether what they see is normal (`the loss isn't decreasing, it's fluctuating. Is this normal?`,
`Is it expected to see the loss not go down?`): a loss they say stands still is then their worry, not a report
that the run does not train; the maintainers' answer to it is most often yes (diffusion, contrastive, RL objectives
whose loss stays level while the model improves)."""
_LR_RISES = re.compile(r"\bwarm(?:s|ing|ed)?[- ]?up\b|预热|\b(?:lr|learning[ _]rate)\s+(?:and\s+(?:the\s+)?loss\s+)?(?:\w+\s+){0,6}?"
                       r"(?:increas\w*|ris(?:e|es|ing)|rose|go(?:es)?\s+up|went\s+up)\b", re.I)
"""The loss's rise put beside the learning rate's own (`a spike in loss coinciding with the end of warmup`, yolov5#10209;
`Are lr and loss supposed to be possible to increase?`, DeepLabCut#287): a schedule that raises the lr on purpose
raises the loss for a while."""
_RL = re.compile(r"reinforcement learning|强化学习|" + objectives.named(objectives.RL) + "|"
                 r"\b(?:value|critic|actor|policy|pg|q|td)[ _/](?:loss|avg)\b|\b(?:loss/policy|policy_loss|value_loss|"
                 r"critic_loss|actor_loss|q_loss|pg_loss)\b|(?<![/_])\brewards?\b(?![/_])", re.I)
"""Text about reinforcement learning, by its algorithms' names, its losses' or its reward (not DPO's implicit
`rewards/chosen`, a preference objective's metric: a DPO loss pinned at ln 2 is a report): an RL loss is not a
measure of progress (a value or Q target moves as the policy improves, a policy-gradient loss shifts with what is
sampled), so a rise or a level in the person's words is no report there (the maintainers answer: watch the reward;
muzero-general#96, IntelLabs/coach#214, ml-agents#280, open-instruct#836)."""
_PREFERENCE = re.compile(objectives.named(objectives.PREFERENCE, "preference", "chosen", "rejected"), re.I)
"""A preference objective named beside a reward (`DPO loss remains 0.6931 ... and the rewards stuck at 0.0`, trl#1627):
its implicit rewards are a metric of the policy against the reference, and a DPO loss pinned at ln 2 is a report."""
_RESULTS_GOOD_NEEDS = WordGate("result", "output", "sample", "generation", "image", "prediction", "效果")
_ASKS_NORMAL_NEEDS = WordGate("normal", "expected", "supposed", "正常")
_LR_RISES_NEEDS = WordGate("warm", "预热", "lr", "learning")
_RL_NEEDS = WordGate("reinforcement", "强化学习", *(name.lower() for name in objectives.RL), "loss", "avg", "reward")
"""A word every match of each pattern holds: they read every line that is no printed record until they match, and
where none matched (most logs) cost 15-50 us a line."""
_RESULTS_DENIED = re.compile(r"\b(?:not|n't|never|no longer|if|whether)\b", re.I)
"""`the results are not good`, `if the outputs look fine`: no results said good."""


def _sharper(kept: Finding, new: Finding) -> bool:
    """A flat loss named more exactly a log later: at ln k (chance level) rather than only unchanged."""
    return kept.id == "loss_flat" and kept.facts.get("kind") == "unchanged" and new.facts.get("kind") == "chance"


_COMMENT = re.compile(r"\s*#\s")
"""A comment in pasted code or a config (`# if you see CUDA error: device-side assert, check the labels`): it
quotes an error, it does not report one."""
_NUMBERS = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf", re.I)


def _prints(line: str, value: float) -> bool:
    """Whether a line prints this number (to its printed precision)."""
    for token in _NUMBERS.findall(line):
        try:
            number = float(token)
        except ValueError:
            continue
        if number == value or (value == value and abs(number - value) <= 5e-5 + 1e-4 * abs(value)) or \
                (value != value and number != number):
            return True
    return False


_WHOLE = re.compile(r"(?<![\d.])\d+(?![\d.]|%)")
"""A whole number: a run of digits with no digit or point either side, not a percentage."""


def _prints_step(line: str, step: int) -> bool:
    """Whether a line prints this step as a whole number (`45/100`, `step 45`), not inside a decimal."""
    return step > 0 and str(step) in _WHOLE.findall(line)


_HANDLERS: dict[type, str] = {
    events.Header: "_on_header", events.State: "_on_state", events.TrainBegin: "_on_trainbegin", events.Phase: "_on_phase",
    events.Step: "_on_step", events.Log: "_on_log", events.GpuInfo: "_on_gpuinfo",
    events.Estimate: "_on_estimate", events.Sample: "_on_sample", events.Output: "_on_output",
    events.Notice: "_on_notice", events.Settings: "_on_settings",
    events.End: "_on_end",
}
