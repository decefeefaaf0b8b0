"""Python tracebacks in output text: the frames, the phase they were in, and the exception raised.

Fed one line at a time (a live run's output, a pasted log), it keeps only the current traceback's frames
(bounded) and the exceptions seen, so it reads any length of text. Every dialect's frames count: plain
Python, rank-prefixed torchrun, loguru, IPython's `path in func(...)` with Colab links and `<ipython-input-..>`
cells, Jupyter's `File path:N, in func(` and `Cell In[N], line M`, rich's boxed `│ path.py:N in func │`,
under a logger's prefix or indented as a block. The phase comes from the frames' function names and from
the call on each frame's current line (the code line under a plain frame, IPython's `---->` arrow), which
names the next frame even in a traceback cut before it: the innermost save, evaluation, data loading or
model loading decides, else a training step. Where the exception was raised comes from the innermost
frame's path: loratui's code, the user's, or a library (named by its site-packages folder). Pure: lines in,
facts out.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from loratui.logic.fmt import quoted

_RANK = re.compile(r"^(?:\[\d+\]\s*)?(?:\[(?:rank|Rank |RANK )?\d{1,5}\]:?\s*)+")
_HEADER = re.compile(r"Traceback \(most recent call last\)")
_IPY_HEADER = re.compile(r"^\s*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\s+Traceback \(most recent call last\)")
_FRAME = re.compile(r'File "(?P<path>[^"]{1,500})", line \d+, in (?P<func>[\w<>.]+)')
_CUT_FRAME = re.compile(r'^\s*(?P<path>[^"\s]{1,500}?\.py)", line \d+, in (?P<func>[\w<>.]+)')
"""A frame line whose start was cut off in the paste (`$HOME/.../cuda_setup/main.py", line 153, in f`): a
selection that began mid-line, or a terminal that wrapped `File "` onto the line before."""
_IPY_FRAME = re.compile(r"^\s*File (?P<path>\S{1,500}?\.py):\d+, in (?P<func>[\w<>.]+)\(")
# Older IPython and Colab: `/path/trainer.py in predict(self, ...)`, `[/path/x.py](https://...) in f(...)`,
# the cell itself as `<ipython-input-9-ccd2> in <cell line: 0>()` or `<ipython-input-3-ab> in <module>`.
_OLD_IPY_FRAME = re.compile(r"^\s*\[?(?P<path>[^\s\[\]()]{1,500}?\.py|<ipython-input-[\w-]{1,80}>)"
                            r"(?:\]\([^)\s]{0,300}\))? in (?P<func>[\w.]+|<[\w :]{1,40}>)(?:\(|\s*$)")
_IPY_TYPE = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception))\s+$")
"""IPython's header names the exception before `Traceback`: after a logger's prefix too."""
_BOX = re.compile(r"[╭─│]")
"""rich draws its header inside a box: its corner is no logger's prefix."""
_CELL_FRAME = re.compile(r"^\s*(?P<path>Cell In ?\[\d*\]), line \d+")
"""Jupyter since IPython 8: the cell's frame has no function, only `Cell In[12], line 3`."""
_ARROW = re.compile(r"^\s*[│|]?\s*(?:-+>|❱)\s*\d+\s(?P<code>.*)")
"""IPython's current line of a frame, `----> 3     model.push_to_hub_gguf(`, and rich's `│ ❱ 120 │   f(x) │`."""
_RICH_FRAME = re.compile(r"^\s*[│|]\s*(?P<path>[^\s│|]{1,500}?\.py):\d+\s+in\s+(?P<func>[\w<>.]+)")
"""rich's traceback box (typer, accelerate, many CLIs): `│ /path/trainer.py:1938 in _inner_training_loop  │`."""
_CALL = re.compile(r"^\s*(?:[\w\[\]., ]{1,120}?=\s*|return\s+|await\s+|yield\s+)?(?:[\w\])]+\.){0,7}?"
                   r"(?:(?P<owner>\w+)\.)?(?P<name>\w+)\(")
"""The call a frame's current line makes (`eval_loss = evaluate(model)`, `trainer.model.push_to_hub(d)`):
the function of the next frame inward; the object it is called on names the loop in a generic call
(`self.val_loop.run()`, `runner.test_loop.run()`)."""
ERRORS_MODULE_TYPE = r"(?:[A-Za-z_]\w*\.){1,5}(?:errors|exc|exceptions)\.[A-Z]\w*"
"""An exception class named without an Error suffix, in its package's module of errors (triton's
`triton.runtime.errors.OutOfResources`, `torch._dynamo.exc.Unsupported`): the module says what it is."""
_EXCEPTION = re.compile(
    r"(?<![A-Za-z0-9_.`'\"*“‘「])(?P<type>(?:[A-Za-z_]\w*\.){0,6}[A-Z]\w*(?:Error|Exception|Interrupt)|"
    + ERRORS_MODULE_TYPE + r")(?:[:：]\s*(?P<msg>.*)|\s*)$")
"""An exception line: its type, and its message after a colon (a full-width one where a CJK input method typed it,
`AttributeError：'NoneType' object ...`)."""
_MAYBE_RAISED = re.compile(r"Error|Exception|Interrupt|\.(?:errors|exc|exceptions)\.")
_AFTER_FRAMES = re.compile(r"(?P<type>(?:[A-Za-z_]\w*\.)+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)"
                           r"(?::\s*(?P<msg>.*)|\s*)$")
"""What Python prints at the margin right after a traceback's frames is the exception, whatever its class is called
(`triton.runtime.autotuner.OutOfResources: out of resource: ...`, `pyarrow.lib.ArrowInvalid: JSON parse error`,
`BrokenProcessPool: A process in the process pool was terminated abruptly`): a dotted class, or a CamelCase one."""
_CARETS = re.compile(r"\s*[~^]+\s*$")
"""Python 3.11's markers under a frame's code (`~~~~^^^^`): between the last frame and the exception line."""
_WHOLE_QUOTE = re.compile(r"^(\s*)(\*\*|__|`)(.+)\2\s*$")
"""A line that is one markdown inline quote or bold span and nothing else (an issue's `` `RuntimeError: ...` `` or
`**ImportError: ...**` on its own line)."""


def _unquoted(text: str) -> str:
    """The line without the markdown quote or emphasis around the whole of it (either or both, in any order): an
    error pasted as inline code or in bold on a line of its own is the error as printed (a quote inside a sentence
    stays a mention)."""
    if "`" not in text and "**" not in text and "__" not in text:
        return text
    while (whole := _WHOLE_QUOTE.match(text)) is not None and whole.group(3).strip():
        text = whole.group(1) + whole.group(3)
    return text
_NOT_MESSAGE = re.compile(
    r"^\s*\{['\"]|"  # a printed dict or JSON record ({'loss': ...})
    r"\d{1,3}%\|.*\|\s*\d+/\d+|"  # a progress bar (tqdm)
    r"\b[A-Z]\w*Warning\b|\bwarnings\.warn\(|"  # a Python warning and the source line under it
    r"^\s*Press any key to continue\b|"  # Windows' `pause` after a .bat launcher's Python exits
    # a logging record: a timestamp or a level first
    r"^\s*(?:\d{4}-\d\d-\d\d[ T]\d|\d\d/\d\d/\d{4} \d|(?:INFO|WARNING|DEBUG|ERROR|CRITICAL)\b[:| -])")
"""Output that never continues an exception's message: a tqdm bar, a printed log dict, a warning, Windows' `Press
any key to continue . . .`, a logging line (they follow a traceback when stdout's buffer is flushed after stderr's,
as other ranks print, or when a run's stderr tail is read again)."""
_IGNORED = re.compile(r"^\W*(?:Exception ignored (?:in|on)\b|Error in atexit\._run_exitfuncs:)")
"""Python's own words that it ignored the exception printed next (a `__del__`, a weakref callback, an atexit hook at
interpreter exit: the DataLoader's `AssertionError: can only test a child process`): never what stopped a run."""
_RETRIED = re.compile(r"\bretry(?:ing)?\b(?! ?(?:limit|count)s? (?:reached|exceeded))|\bwill (?:be )?retr|重试", re.I)
"""An exception the program says it tries again after (`... 429 Too Many Requests (retrying in 10s)`, wandb's
`entering retry loop`): not what stopped the run. `Max retries exceeded` is the giving up: it stays."""
_CHAINED = re.compile(r"During handling of the above exception|The above exception was the direct cause")
WRAPPERS = frozenset({"CalledProcessError", "ChildFailedError", "ProcessRaisedException", "ProcessExitedException"})
"""Exceptions that only report another process's failure: a real one seen elsewhere wins."""

# Merging an adapter into its base and exporting it write the model out, as a save does; gathering a state dict
# (FSDP's unsharding hooks, peft's adapter weights) is what a save does first.
_SAVE_NAMES = re.compile(r"save|state_dict|consolidate|push_to_hub|merge_and_unload|unload_and_optimi|"
                         r"merge_(?:lora|adapter|peft|weights|model)|lora_merge|^export|_export|gguf", re.I)
# sample_images / generate_samples / log_images: the samples a diffusion or GAN trainer draws during training to judge it.
# (torch|numpy)_pad_and_concatenate: nested_concat's helpers, which gather the eval predictions; the metrics
# (compute_metrics, preprocess_logits_for_metrics) run on them at the evaluation's end.
# generate: transformers' GenerationMixin.generate, inference; inside a training step's frame (GRPO's completions)
# `phase_of` keeps the step's phase.
_EVAL_NAMES = re.compile(r"evaluat|predict|validat|nested_concat|nested_gather|pad_and_concatenate|^test(?:_step)?$|"
                         r"metric|perplexity|bleu|rouge|inference_on_dataset|^sample_images|^generate(?:_samples?)?$|"
                         r"^log_images$", re.I)
_EVAL_WORDS = frozenset({"eval", "val", "valid", "test", "testing", "sanity", "evaluator"})
"""Words of a function name that say evaluation (`val_epoch`, `run_test`, `_run_sanity_check`, `valid_step`),
beside the stems `_EVAL_NAMES` finds anywhere in a name."""
_EVAL_FILES = re.compile(r"/(?:evaluation_loop|evaluation_epoch_loop|prediction_loop|prediction_epoch_loop|"
                         r"evaluator|validator)\.py$|/evaluation/[^/]+\.py$")
"""Evaluation code, whose functions have generic names (Lightning's `evaluation_loop.py in run`, detectron2's
`evaluation/evaluator.py`, a project's `rfdetr/evaluation/matching.py`)."""
_DATA_NAMES = re.compile(r"^(?:__getitem__|__getitems__|fetch|_next_data|_get_data|_process_data)$|collat", re.I)
_LOADS = re.compile(r"(?<!un)load", re.I)
_LOAD_NAMES = re.compile(r"load_state_dict|from_pretrained|_load_pretrained_model|^load_model$|load_checkpoint_in_model|"
                         r"_check_and_enable_flash_attn|dispatch_model|^load_(?:tokenizer|model_and_tokenizer)$")
_TRAIN_NAMES = re.compile(r"^(?:training_step|_inner_training_loop|backward|train_batch|_exec_backward_pass|"
                          r"train_step|_do_backward|fit_loop|run_training_batch|optimizer_step)$")
_NOT_A_PHASE = frozenset({"_maybe_log_save_evaluate"})
_CONTEXT_LINE = re.compile(r"^\s{1,12}\d{1,6}\s(?P<code>.*)")
"""IPython's lines around a frame's current one: `      7 # Reload model in FP16 and merge it with LoRA weights`."""
_WRITES_OUT = re.compile(r"\bmerg(?:e|es|ed|ing)\b|merge_and_unload|merge_adapter|\bsave_\w+|\.save\(|\bexport\w*|"
                         r"push_to_hub|gguf", re.I)
"""Code or a comment that merges, saves or exports the model."""
_EVAL_SCRIPT = re.compile(r"(?:eval|evaluate|evaluation|test|val|validate|validation)(?:[_-][\w-]+)?\.py$", re.I)
"""A script named for evaluation (`eval.py`, `test.py`, `eval_segmentation.py`): weak evidence, taken only when no
frame names a phase."""
_WRITER_SCRIPT = re.compile(r"merg|export|convert|gguf|pth_?(?:to_?|2)hf|^fuse\.py$", re.I)
"""A script named for writing a model out (`merge_lora.py`, `export_model.py`, `convert_to_hf.py`, xtuner's
`pth_to_hf.py`, mlx_lm's `fuse.py`)."""
MAX_FRAMES = 64


@dataclass(frozen=True)
class Frame:
    path: str
    func: str
    line: str = ""
    """The frame's line as printed."""
    call: str = ""
    """The function its current line calls (the next frame inward), when the traceback prints the line."""
    owner: str = ""
    """The object that call is made on, when not `self` (`val_loop` in `self.val_loop.run()`)."""


@dataclass
class Raised:
    """One exception: type, message (with its continuation lines), the line as printed, where and when."""

    type: str
    message: str
    line: str
    frames: tuple[Frame, ...] = ()
    phase: str = ""

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    @property
    def where(self) -> str:
        """'loratui', 'library:NAME', 'python', 'user:FILE' or '' (no frames)."""
        for frame in reversed(self.frames):
            where = origin(frame.path)
            if where:
                return where
        return ""

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's own code."""
        return next((f for f in reversed(self.frames) if origin(f.path).startswith("user:")), None)


def origin(path: str) -> str:
    """Whose code a frame's path is: loratui's, a library's, Python's, the user's ('' for <frozen ...>)."""
    if path.startswith("<"):
        return ""
    norm = path.replace("\\", "/")
    found = re.search(r"(?:site|dist)-packages/([^/]+)", norm)
    if found:  # before the folder names: a venv made inside a clone named loratui holds torch's frames too
        package = found.group(1).removesuffix(".py")
        return "loratui" if package == "loratui" else "library:" + package
    if re.search(r"/lib/python3[\d.]*/", norm):
        return "python"
    ours = _OURS.search("/" + norm)
    if ours and ours.group(1) in _PARTS:
        return "loratui"
    return "user:" + norm.rsplit("/", 1)[-1]


_OURS = re.compile(r".*/loratui/([^/]+)")
"""What follows the last `loratui/` folder of a path: one of loratui's modules or subpackages in a clone or an
editable install; anything else (`~/loratui/train.py`, the newcomer's script beside the clone's README) is the
user's."""
_PARTS = frozenset(p.name for p in Path(__file__).resolve().parents[1].iterdir()) | {"__main__.py", "cli.py"}
"""loratui's own top-level files and folders, read once from the installed package."""


def frame_phase(frame: Frame) -> str:
    """The phase a frame belongs to: save, eval, data, load, train, or ''; the call on its current line is
    inside it, so that call's phase comes first."""
    called = name_phase(frame.call, frame.path) if frame.call else ""
    owner = getattr(frame, "owner", "")  # getattr: a frame pickled in an older events.idx
    if not called and owner and not _EVAL_WORDS.isdisjoint(_words(owner)):
        called = "eval"  # `self.val_loop.run()`: the loop it runs is the evaluation's
    if called and called != "train":
        return called
    own = name_phase(frame.func.rsplit(".", 1)[-1], frame.path)
    path = frame.path.replace("\\", "/")
    if not own and _EVAL_FILES.search(path):
        own = "eval"
    if not own and frame.func in ("merge", "_merge") and "/peft/" in path:
        own = "save"  # a LoRA layer's merge: only merging the adapter into the model calls it
    return own or called


def _words(name: str) -> set[str]:
    """A function name's words: `val_epoch` -> {val, epoch}, `runValidation` -> {run, validation}."""
    return {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", name)}


def name_phase(name: str, path: str) -> str:
    """The phase a function's name (and its file's path) belongs to."""
    if name in _NOT_A_PHASE:
        return ""
    if _SAVE_NAMES.search(name) and not _LOADS.search(name):
        return "save"
    if _EVAL_NAMES.search(name) or not _EVAL_WORDS.isdisjoint(_words(name)):
        return "eval"
    if _DATA_NAMES.search(name) or "torch/utils/data/" in path.replace("\\", "/"):
        return "data"
    if _LOAD_NAMES.search(name):
        return "load"
    return "train" if _TRAIN_NAMES.search(name) else ""


_STEP_NAMES = re.compile(r"^(?:training_step|train_step|train_batch|run_training_batch|backward|_exec_backward_pass|"
                         r"_do_backward|optimizer_step)$")
"""One training step's own frames: what runs inside them is that step's work, whatever its helpers are called
(`_validate_inputs`, `predict_noise`, `ctx.save_for_backward`); the training loop (`_inner_training_loop`) runs
evaluations and saves beside its steps, so it is no such frame."""


def phase_of(frames: "deque[Frame] | tuple[Frame, ...]") -> str:
    """The innermost specific phase (save, eval, data, load) of a traceback, else train, else ''; a specific name
    inside a training step's frame is the step's helper: train."""
    fallback, inner, loop = "", "", False
    for frame in reversed(frames):
        phase = frame_phase(frame)
        if inner and not loop and _named(frame, _STEP_NAMES):
            return "train"
        if phase and phase != "train" and not inner:
            inner = phase
            loop = _named(frame, _PHASE_LOOP)
        fallback = fallback or phase
    return inner or fallback


_PHASE_LOOP = re.compile(r"(?i)^(?:evaluat\w*|eval(?:_\w+)?|run_eval\w*|do_eval\w*|validation(?:_\w+)?|validate|val_epoch|"
                         r"valid_epoch|test(?:_epoch)?|save_(?:checkpoint|model|pretrained)\w*|_save_checkpoint)$")
"""A whole evaluation or save, called by name (`evaluate(model, val_loader)`, `save_checkpoint(...)`): inside a training
step too it is that phase, unlike a helper named after one (`_validate_inputs`, `predict_noise`)."""


def _named(frame: Frame, names: re.Pattern[str]) -> bool:
    """Whether a frame's function, or the call on its line, has one of these names (`_STEP_NAMES`: a training
    step's frame)."""
    return any(names.match(name.rsplit(".", 1)[-1]) for name in (frame.func, frame.call) if name)


def prefix_shape(prefix: str) -> str:
    """A regex for prefixes shaped like this one: digits vary (timestamps, ranks, pids), the rest is literal,
    spaces counted (what follows the prefix keeps its indentation)."""
    shape = "".join(r"\d" if ch.isdigit() else r"[ \t]" if ch.isspace() else re.escape(ch) for ch in prefix)
    return re.sub(r"(?:\\d)+", r"\\d+", shape)


def strip_rank(line: str) -> str:
    """A line without torchrun's `[rank1]:` or a launcher's `[80746] [rank0]:` prefix."""
    return _RANK.sub("", line, count=1) if line.startswith("[") else line


@dataclass
class TraceScanner:
    """Tracebacks in a stream of lines: the current frames and every exception (first ones kept)."""

    frames: deque[Frame] = field(default_factory=lambda: deque(maxlen=MAX_FRAMES))
    first: Raised | None = None
    last: Raised | None = None
    count: int = 0
    pending_type: str = ""  # a notebook header names the type before the frames
    _code_next: bool = False  # the line after a plain frame is that frame's current line
    _prefix: str = ""  # the shape (a regex) of what a logger printed before the header, stripped from each line
    _header_indent: int = -1  # the header's indentation (a pasted block indented as a whole), -1 before one
    _min_indent: int = 1 << 30  # the least indentation seen, the paste's margin when no header came
    _continuing: int = 0
    _since_exception: int = 0  # frames seen since the last exception (a cut-off traceback when > 0 at the end)
    writes_out: str = ""  # the words in the traceback's own code that merge, save or export the model (a script's
    # name, a cell's code or comment), '' when none
    _entry_open: bool = True  # no frame of the program's own yet in this traceback: the next one is its entry script
    _framed: bool = False  # the line before was a frame or its code: the next line at the margin is the exception
    ignoring: int = 0  # 1: Python said it ignored the exception printed next; 2: inside that traceback

    def line(self, raw: str) -> None:
        """Fold one line in."""
        text = _unquoted(strip_rank(raw).rstrip())
        if self._prefix:
            prefixed = re.match(self._prefix, text)
            text = text[prefixed.end():] if prefixed else text
        indent = len(text) - len(text.lstrip(" \t"))
        if text.strip():
            self._min_indent = min(self._min_indent, indent)
        if self._continuing and self.last is not None:
            if self._continue(text):
                return
        if "xception ignored" in text or "atexit" in text:
            if _IGNORED.search(text):
                self.ignoring = 1
                return
        if "Traceback" in text and _HEADER.search(text):
            ignoring = getattr(self, "ignoring", 0)  # getattr: a scanner pickled in an older events.idx
            self.ignoring = 2 if ignoring == 1 else 0  # a later traceback is the program's own again
            if self.ignoring:
                return
            self._header(text)
            return
        if getattr(self, "ignoring", 0):
            self._ignored(text)
            return
        if self._frame(text, raw) or self.frames and self._current_line(text):
            self._framed = True
            return
        if self.frames and (self._context_line(text) or _CARETS.match(text)):
            return
        framed, self._framed = self._framed, False  # a scanner pickled before it reads the class's default
        self._exception_line(text, raw, indent, framed)

    def _frame(self, text: str, raw: str) -> bool:
        """A frame line in any dialect (plain, cut, rich, IPython, a Jupyter cell): True when the line was one."""
        frame = (_FRAME.search(text) or _IPY_FRAME.match(text)) if "File " in text else (
            (_CUT_FRAME.match(text) if '", line ' in text else None) or
            (_RICH_FRAME.match(text) if "py:" in text else None) or
            (_OLD_IPY_FRAME.match(text) if (".py" in text or "<ipython-input" in text) and " in " in text else None))
        cell = _CELL_FRAME.match(text) if "Cell In" in text else None
        if not (frame or cell):
            return False
        seen = Frame(frame.group("path"), frame.group("func"), quoted(raw)) if frame else \
            Frame("<" + cell.group("path") + ">", "<cell>", quoted(raw))  # type: ignore[union-attr]
        self.frames.append(seen)
        self._since_exception += 1
        script = seen.path.replace("\\", "/").rsplit("/", 1)[-1]
        whose = origin(seen.path)
        entry = getattr(self, "_entry_open", False)  # getattr: a scanner pickled in an older events.idx
        # past runpy's and the interpreter's own frames (a notebook's cell is the program's): the program run
        program = whose != "python" and not seen.path.startswith(("<frozen", "<string"))
        if program:
            self._entry_open = False
        if (whose.startswith("user:") or entry and program) and _WRITER_SCRIPT.search(script):
            # the program run is a merge or export script, the user's or a tool's own (xtuner's `convert merge`
            # runs site-packages/xtuner/tools/model_converters/merge.py): what it loads, it loads to write out
            self.writes_out = script
        self._code_next = frame is not None and frame.re in (_FRAME, _CUT_FRAME)
        return True

    def _exception_line(self, text: str, raw: str, indent: int, framed: bool = False) -> None:
        """The exception's line at the traceback's margin (not a code line indented past it, not a chained one);
        a retried one clears the frames. Right after the frames (`framed`) any class name is one."""
        # with no header, the margin is the paste's least indentation, and a line one space in is a paste's stray
        # space (` **ImportError: ...**` under a sentence), not a code line (those sit four spaces in)
        margin = self._header_indent if self._header_indent >= 0 else self._min_indent + 1
        if indent > margin:
            return  # indented past the traceback's margin: a code line, not the exception
        if not _MAYBE_RAISED.search(text):  # the cheap test first: most lines name no exception
            after = _AFTER_FRAMES.match(text.strip()) if framed and self.frames else None
            if after is not None and not after.group("type").endswith("Warning"):
                self._raised(after.group("type"), (after.group("msg") or "").strip(), raw.strip())
            return
        if _CHAINED.search(text):
            return
        found = _EXCEPTION.search(text)
        if found and found.group("msg") and _RETRIED.search(found.group("msg")):
            self.frames.clear()  # the program tries again: not what stopped the run, and no cut traceback
            self._since_exception = 0
        elif found and (self.frames or found.group("msg") is not None):
            self._raised(found.group("type"), (found.group("msg") or "").strip(), raw.strip())

    def _ignored(self, text: str) -> None:
        """A line of a traceback Python said it ignored: its frames are no run's, its exception line ends it."""
        if _FRAME.search(text) or not text.strip() or text[:1].isspace():
            return
        self.ignoring = 0  # the first line at the margin is its exception (`AssertionError: can only test a child
        # process`, wandb's `Error: An unexpected error occurred`)

    def end_message(self) -> None:
        """What comes next does not continue the last exception's message (another stream's lines, or the
        run's recorded stderr tail read again at its end)."""
        self._continuing = 0

    @property
    def phase(self) -> str:
        """The phase of the current traceback's frames so far. Loading a model to merge or export it (the script
        is named for it, or the cell's code says so) is part of writing it out: that phase is the save."""
        phase = phase_of(self.frames)
        if phase == "load" and getattr(self, "writes_out", ""):
            return "save"
        if not phase and any(_EVAL_SCRIPT.match(f.path.replace("\\", "/").rsplit("/", 1)[-1]) for f in self.frames
                             if origin(f.path).startswith("user:")):
            return "eval"  # nothing more specific in the frames: the script is the evaluation's
        return phase

    @property
    def cut(self) -> bool:
        """The text ends inside a traceback: frames with no exception line after them."""
        return self._since_exception > 0 and len(self.frames) > 0

    @property
    def chosen(self) -> Raised | None:
        """The exception to explain: the first one, unless it only wraps another process's failure; with none, a
        notebook's traceback cut before its last line, whose header named the type (IPython prints it first)."""
        if self.first is not None and self.first.short_type in WRAPPERS and self.last is not None:
            return self.last if self.last.short_type not in WRAPPERS else self.first
        if self.first is None and self.cut and self.pending_type:  # a field with a default: old pickles read it
            return Raised(type=self.pending_type, message="", frames=tuple(self.frames), phase=self.phase,
                          line=f"{self.pending_type} (the notebook's traceback header; the paste ends before its "
                          "last line)")
        return self.first

    def _current_line(self, text: str) -> bool:
        """A frame's current line (the code under a plain frame, IPython's arrow): the call it makes is kept
        on the frame. True when the line was one."""
        plain, self._code_next = self._code_next, False
        arrow = _ARROW.match(text) if ">" in text or "❱" in text else None
        if arrow:
            code: str | None = arrow.group("code").replace("│", " ")
        else:
            code = text if plain and not _EXCEPTION.match(text.strip()) else None
        if code is None:
            return False
        call = _CALL.match(code)
        if call and not self.frames[-1].call:
            owner = call.group("owner") or ""
            self.frames[-1] = replace(self.frames[-1], call=call.group("name"), owner="" if owner == "self" else owner)
        return True

    def _context_line(self, text: str) -> bool:
        """A line IPython prints around a frame's current one: in the user's cell or script, code or a comment
        that writes the model out (the frame loads a model to merge it). True when the line was one."""
        context = _CONTEXT_LINE.match(text) if text[:1].isspace() else None
        if context is None:
            return False
        last = self.frames[-1]
        mine = last.path.startswith("<") and last.func.startswith("<") or origin(last.path).startswith("user:")
        if mine and _WRITES_OUT.search(context.group("code")):
            self.writes_out = context.group("code").strip()[:200]
        return True

    def _header(self, text: str) -> None:
        self.frames.clear()
        self.writes_out = ""
        self._entry_open = True
        self._since_exception = 0
        before = text[:_HEADER.search(text).start()]  # type: ignore[union-attr]
        notebook = _IPY_HEADER.match(text) or _IPY_TYPE.search(before)
        self.pending_type = notebook.group(1) if notebook else ""
        if notebook is not None and notebook.re is not _IPY_HEADER:
            before = before[:notebook.start()]
        if before.strip() and len(before) <= 120 and not _BOX.search(before):
            self._prefix = prefix_shape(before)  # `worker-1: `, `[1,0]<stderr>:`, `2024-05-01 12:00:00 | `
            text = text[len(before):]
        self._header_indent = len(text) - len(text.lstrip(" \t"))

    def _raised(self, kind: str, message: str, line: str) -> None:
        raised = Raised(type=kind, message=message[:600], line=line[:600], frames=tuple(self.frames),
                        phase=self.phase)
        self.count += 1
        self.last = raised
        if self.first is None or (self.first.short_type in WRAPPERS and kind.rsplit(".", 1)[-1] not in WRAPPERS):
            self.first = raised
        self._since_exception = 0
        self._continuing = 4

    def _continue(self, text: str) -> bool:
        """Lines after an exception that carry on its message (until a blank, frame or new traceback)."""
        self._continuing -= 1
        if not text.strip() or _HEADER.search(text) or _FRAME.search(text) or _CHAINED.search(text) \
                or _EXCEPTION.search(text) or text.startswith(("[", "```", "frame #")) \
                or _NOT_MESSAGE.search(text):
            self._continuing = 0
            return False
        last = self.last
        assert last is not None
        if len(last.message) < 600:
            last.message = (last.message + " " + text.strip()).strip()[:600]
        return True
