"""A failed run always gets a diagnosis: the exception, where it was raised, and the likely next step.

Used when nothing more specific (OOM, CUDA, bitsandbytes, flash-attn, NCCL) explains the failure. The next
step is read from the message where it can be: a missing module gets its `pip install`, a missing path is
named, transformers' "requires the X library" and "pip install X" hints are passed on.
"""

from __future__ import annotations

import re

from loratui import events
from loratui.logic.advisor import cuda
from loratui.logic.advisor.advice import ERROR, Advice
from loratui.logic.advisor.error_said import NAMED
from loratui.logic.advisor.oom_advice import HOST_TRAIN_MOVE
from loratui.logic import oom_words
from loratui.logic.fmt import clip
from loratui.logic.tracebacks import Frame, Raised
from loratui.recipe import Recipe

PHASE_TEXT = {"save": "while saving a checkpoint", "eval": "during evaluation", "data": "while loading data",
              "load": "while loading the model or tokenizer", "train": "in a training step"}
PIP_NAMES = {
    "sklearn": "scikit-learn", "cv2": "opencv-python", "PIL": "pillow", "yaml": "pyyaml", "flash_attn": "flash-attn",
    "google": "protobuf", "Crypto": "pycryptodome", "bs4": "beautifulsoup4", "attr": "attrs", "dateutil":
    "python-dateutil", "liger_kernel": "liger-kernel", "jieba": "jieba", "fitz": "pymupdf", "docx": "python-docx",
}
PEFT_NAMES = frozenset({"LoraConfig", "PeftModel", "PeftConfig", "get_peft_model", "TaskType",
                        "prepare_model_for_kbit_training", "PeftModelForCausalLM"})
_NO_MODULE = re.compile(r"No module named ['\"]?([\w.]+)")
_REQUIRES = re.compile(r"requires the (\w[\w-]*) library but it was not found")
_PIP = re.compile(r"`?(pip3? install [\w\-.=<>\[\], ]+?)`?(?:[.`'\"]|\s*$)")
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NAME_ERROR = re.compile(r"name '(\w+)' is not defined")
_PATH = re.compile(
    r"No such file or directory|is not a local folder|Invalid folder path|does not appear to have a file named|"
    r"Can't load (?:tokenizer|config|the model) for|Incorrect path_or_model_id|Repo id must be|does not exist|"
    r"is not a valid model identifier|Path .{1,200} not found", re.I)
_NO_WEIGHTS = re.compile(r"no file named .{1,300}? found in directory ['\"`]?(?P<dir>.+?)['\"`]?\.?\s*$")
"""transformers' from_pretrained on a folder with no weight file it knows (its config or tokenizer may be
there)."""
_UNEXPECTED = re.compile(
    r"(?:(?P<callee>[\w.]+)\(\) )?got an unexpected keyword argument ['‘’\"`]?(?P<keyword>\w+)")
_LINE_NO = re.compile(r"\bline (\d+)|\.py\S*?:(\d+)")
"""A frame line's number, in plain Python's `line 52` or rich's / IPython's `train.py:52`."""
_QUOTED = re.compile(r"'([^']{1,300})'|\"([^\"]{1,300})\"|`([^`]{1,300})`")
_TARGETS = re.compile(r"Target modules? .{0,200} not found in the base model", re.I)
_HOST_OOM = re.compile(oom_words.HOST_ALLOCATOR + r"|MemoryError", re.I)
"""An exception's message alone (its type is checked apart): oom_fold's _HOST_RAM reads any line of a text, the
person's words among them, with a bounded MemoryError; here a bare one, as before."""
_WORKER = re.compile(r"DataLoader worker \(pid", re.I)
_SHM = re.compile(r"bus error|shared memory|/dev/shm|shm_open", re.I)
_KILLED = re.compile(r"signal: Killed|SIGKILL", re.I)
_NO_GRAD = re.compile(r"does not require grad and does not have a grad_fn")
_LOOKUP = re.compile(r"\bindex out of range in self\b")
"""torch's index_select on CPU, which an embedding lookup is: an id past the end of its table."""
LOOKUP_STEP = (
    "an embedding lookup got an index past the end of its table: a token id at or above the model's vocab_size "
    "(a tokenizer with added tokens, or another model's tokenizer: model.resize_token_embeddings(len(tokenizer))), "
    "or a sequence longer than max_position_embeddings (truncate it, e.g. max_length); print the batch's "
    "input_ids.max() and shape against model.config")
"""A newcomer's own Trainer script whose data held ids past the vocabulary (2026-12-05) got "check that the
arguments your code passes match the installed torch version"; allenai/longformer#187 is the other cause, an input
longer than the position embeddings."""
NO_GRAD_STEP = (
    "nothing the loss was computed from needs a gradient; in a LoRA/QLoRA run that is most often "
    "gradient checkpointing on a model whose inputs do not require grad: call "
    "model.enable_input_require_grads() before get_peft_model (for a 4-bit/8-bit model "
    "prepare_model_for_kbit_training does it), or pass "
    "gradient_checkpointing_kwargs={\"use_reentrant\": False}; with checkpointing off, check that LoRA "
    "left parameters trainable (model.print_trainable_parameters())")
"""huggingface/peft#137 and the threads after it (Llama-Chinese#242, Baichuan-13B#14, Qwen3-Coder#384,
transformers#26334): the frozen base's embeddings need no gradient, so a reentrant checkpoint's output has no
grad_fn."""


_NO_BF16 = re.compile(r"does not support bfloat16|doesn'?t support bf16|bf16 mixed precision requires PyTorch >= 1\.10 and "
                      r"a supported device|Bfloat16 is only supported on GPUs with compute capability|"
                      r"bf16.{0,40}(?:requires|only supported on|not supported on).{0,40}(?:Ampere|compute capability|"
                      r"supported device)", re.I)
"""The card has no bfloat16 (before Ampere: T4, V100, P100 and older), in torch's, accelerate's, transformers' and
triton's words."""
_SHARED_MEMORY = re.compile(r"out of resource: shared memory", re.I)
"""Triton's kernel asking more on-chip shared memory per block than this GPU has (`OutOfResources: out of resource:
shared memory, Required: 663808, Hardware limit: 101376`): not the card's memory, so a smaller batch does not help."""
SHARED_MEMORY_STEP = ("a Triton kernel needs more shared memory per block than this GPU has (not its VRAM: a smaller "
                      "batch does not help): smaller block sizes or num_stages in the kernel's config, a smaller head "
                      "dimension, or a GPU with more shared memory per block (A100, H100)")
NO_BF16_STEP = ("this GPU has no bfloat16 (cards before Ampere: T4, V100, P100): train in fp16 (bf16 = false, "
                "fp16 = true; 4-bit compute dtype float16) or fp32")


def next_step(raised: Raised, r: Recipe | None) -> str:
    """The most likely next step for an exception, read from its type and message."""
    message = raised.message
    install = _install_step(raised)
    if install:
        return install
    if _TARGETS.search(message):
        key = "[lora] target_modules in the recipe" if r is not None else "target_modules (LoraConfig; " \
            "LLaMA-Factory's lora_target)"
        return f"set {key} to module names this model has (print(model) lists them; ChatGLM uses query_key_value)"
    no_weights = _NO_WEIGHTS.search(message)
    if no_weights:
        return _weights_step(no_weights.group("dir"), r)
    if _PATH.search(message):
        return _path_step(message, r)
    if _WORKER.search(message):
        return _worker_step(message)
    if _HOST_OOM.search(message) or raised.short_type == "MemoryError":
        return HOST_TRAIN_MOVE
    if _NO_GRAD.search(message):
        return NO_GRAD_STEP
    if _LOOKUP.search(message):
        return LOOKUP_STEP
    if _NO_BF16.search(message):
        return NO_BF16_STEP
    if _SHARED_MEMORY.search(message):
        return SHARED_MEMORY_STEP
    if cuda.NO_GPU.search(message):
        return "this torch cannot see a GPU: install a CUDA build of torch for this driver, or check nvidia-smi"
    unexpected = _UNEXPECTED.search(message)
    if unexpected:
        return _keyword_step(raised, unexpected)
    return _where_step(raised)


def _install_step(raised: Raised) -> str:
    """The package to install (or reinstall, or match) when the exception says one is missing or another version;
    '' otherwise."""
    message = raised.message
    missing = _NO_MODULE.search(message)
    if missing:
        top = missing.group(1).split(".")[0]
        package = PIP_NAMES.get(top, top.replace("_", "-"))
        if "." in missing.group(1) and raised.short_type == "ModuleNotFoundError" and _installed(raised, top):
            return f"{top} is installed but broken or mixed versions: pip install --force-reinstall -U {package}"
        return f"pip install {package}"
    lacks = _CANNOT_IMPORT.search(message)
    if lacks:
        top = lacks.group(2).split(".")[0]
        return f"the installed {top} has no {lacks.group(1)}: the code was written for another {top} version " \
               f"(pip show {PIP_NAMES.get(top, top)}; install the version its requirements name)"
    requires = _REQUIRES.search(message)
    if requires:
        return f"pip install {requires.group(1).lower()}"
    pip = _PIP.search(message)
    if pip:
        return pip.group(1).strip()
    if "sentencepiece" in message.lower():
        return "pip install sentencepiece (the slow tokenizer needs it to load or convert)"
    name = _NAME_ERROR.search(message)
    if name and name.group(1) in PEFT_NAMES:
        return f"{name.group(1)} comes from peft, which is not installed (its import was skipped): pip install peft"
    return ""


def _worker_step(message: str) -> str:
    """A DataLoader worker that died: shared memory, the kernel's OOM killer, or an error only it saw."""
    if _SHM.search(message):
        return "the DataLoader workers ran out of shared memory (/dev/shm): give the container more (docker " \
               "--shm-size=16g or --ipc=host), or use fewer workers (dataloader_num_workers=0 confirms it)"
    if _KILLED.search(message):
        return "a DataLoader worker was killed (SIGKILL), most often by the kernel's out-of-memory killer (host " \
               "RAM; dmesg shows it): fewer dataloader workers, less data held in each"
    return "a DataLoader worker died: rerun with dataloader_num_workers=0 so its own error shows in the main process"


def _installed(raised: Raised, top: str) -> bool:
    """Whether the frames show the package's own files (so it is installed, but a submodule is missing)."""
    return any(f"/{top}/" in f.path.replace("\\", "/") for f in raised.frames)


def _path_step(message: str, r: Recipe | None) -> str:
    quoted = _QUOTED.search(message)
    path = next((g for g in quoted.groups() if g), "") if quoted else message.split(" ", 1)[0]
    key = "[model] path in the recipe (or --model-path)" if r is not None else \
        "the path you passed (model_name_or_path, or the script's model argument)"
    named = f"{path!r} " if path and len(path) < 200 else ""
    return f"the path {named}does not exist where the run looked: check {key}; a relative path is taken from " \
           "the working directory, a hub id needs network access or a local copy"


def _weights_step(folder: str, r: Recipe | None) -> str:
    key = "[model] path in the recipe (or --model-path)" if r is not None else \
        "--model-path / model_name_or_path (the script's model argument)"
    return f"the model directory {clip(folder, 200)!r} holds no weights (no *.safetensors or " \
           f"pytorch_model.bin): point {key} at the folder that has them beside config.json, or at the hub " \
           "id to download; a LoRA adapter's folder (adapter_model.safetensors) loads on its base with " \
           "PeftModel.from_pretrained"


def _keyword_step(raised: Raised, unexpected: re.Match[str]) -> str:
    """A keyword the called function does not take: the installed library is not the one the code was written
    for (an argument renamed or removed, or not there yet)."""
    user = raised.user_frame
    callee = re.sub(r"\.(?:__init__|init)$", "", unexpected.group("callee") or "")
    callee = "" if callee in ("__init__", "init") else callee
    callee = callee or (user.call if user is not None else "")
    package = raised.where.split(":", 1)[1] if raised.where.startswith("library:") else ""
    inside = f" (called inside {package})" if package else ""
    mine = _place(user) if user is not None else ""
    code = f"your code ({mine})" if mine else "your code"
    whose = f"the installed {package}" if package else "the library it comes from"
    owner = callee.split(".", 1)[0]
    show = f"pip show {package}" if package else f"pip show the package {owner or 'it'} comes from"
    called = f"the installed {callee}" if callee else "the function called"
    keyword = unexpected.group("keyword")
    return f"{called}{inside} takes no keyword {keyword!r}: {whose} is not " \
           f"the version {code} was written for; {show}, then install the version its requirements name, " \
           "or pass what the installed version takes instead"


def _place(frame: Frame) -> str:
    """`train.py:52`: the frame's file and its line number where the traceback gives one."""
    number = _LINE_NO.search(frame.line)
    name = frame.path.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{name}:{number.group(1) or number.group(2)}" if number else name


def _user_where(raised: Raised) -> str:
    """Where in the user's code it was raised (`train.py:52`), for a `user:` origin."""
    user = raised.user_frame
    return _place(user) if user is not None else raised.where.split(":", 1)[1]


def _where_step(raised: Raised) -> str:
    where = raised.where
    user = raised.user_frame
    mine = f" (your code: {user.line})" if user is not None and user.line else ""
    if where.startswith("library:"):
        package = where.split(":", 1)[1]
        return f"raised inside {package}{mine}: check that the arguments your code passes match the installed " \
               f"{package} version (pip show {package})"
    if where == "loratui":
        return "raised in loratui's own code: a bug; please report it with this traceback"
    if where.startswith("user:"):
        return f"raised in your code ({_user_where(raised)}): the message says what it expected"
    return "read the message: it names what was expected"


RAISED = "The run failed on "
"""How an exception's advice title starts (exception_advice's, and error_said's for one only named in words)."""


def read_raised(item: Advice) -> bool:
    """Whether `item` is an exception read from its own printed line (`RuntimeError: Distributed package doesn't
    have NCCL built in`): its type and message are the evidence, not a word model's reading of the text around them.
    Not one only named in words (error_said), a traceback cut before its line, or a run that ended with no error."""
    return item.id == "exception" and item.title.startswith(RAISED) and NAMED not in item.title


def exception_advice(raised: Raised, r: Recipe | None, step: int, checkpointing: str = "") -> Advice:
    """The exception as advice: type and message, where, when, and the next step; `checkpointing` is the
    text's line that shows gradient checkpointing on (evidence for a backward with no grad_fn)."""
    where = _where_text(raised)
    when = PHASE_TEXT.get(raised.phase, "")
    evidence = [raised.line]
    if raised.message and raised.message not in raised.line:
        evidence.append(raised.message)
    user = raised.user_frame
    if user is not None and user.line and raised.where != f"user:{user.path.rsplit('/', 1)[-1]}":
        evidence.append("called from your code: " + user.line)
    inner = raised.frames[-1].func if raised.frames and not raised.frames[-1].func.startswith("<") else ""
    raised_at = f"raised {where}" + (f" in {inner}()" if inner else "") if where else ""
    evidence.append(" ".join(part for part in (raised_at, when) if part) or "no traceback frames in the input")
    step_text = next_step(raised, r)
    if step_text == NO_GRAD_STEP:
        evidence += _checkpointing_evidence(r, checkpointing)
    message = clip(raised.message, 160)
    title = f"{RAISED}{raised.short_type}" + (f": {message}" if message else "") + f" -> {step_text}"
    return Advice("exception", ERROR, title, evidence + ["next: " + step_text], {}, step)


def _checkpointing_evidence(r: Recipe | None, line: str) -> list[str]:
    """What shows gradient checkpointing on: the text's own line, or the recipe."""
    if line:
        return [f"the text shows gradient checkpointing: {clip(line, 200)}"]
    if r is not None and r.training.gradient_checkpointing:
        return ["the recipe sets gradient_checkpointing = true"]
    return []


def cut_traceback_advice(frames: tuple[Frame, ...], phase: str, step: int) -> Advice:
    """A traceback whose exception line is not in the input (a paste cut short)."""
    when = PHASE_TEXT.get(phase, "")
    last = frames[-1] if frames else None
    evidence = [f.line for f in frames[-3:] if f.line]
    title = (f"A traceback {when + ' ' if when else ''}ends before its exception line" +
             (f" (last frame: {last.func})" if last else "") + ": the lines after it name the error")
    return Advice("exception", ERROR, title, evidence + ["next: paste or read the lines after the last frame"],
                  {}, step)


_WARNING_LINE = re.compile(r"^\S.*:\d+: \w*Warning: |^\s+warnings\.warn\(")
"""A Python warning as `warnings` prints it (`file.py:12: FutureWarning: ...`) and the source line it prints below."""


_NO_SCRIPT = re.compile(r"can't open file ['\"](.{1,300}?)['\"]: \[Errno 2\] No such file or directory")
"""Python's own line for a script that does not exist (it then exits 2)."""


_ON_A_KILL = re.compile(r"\bkill(?:ed|s|ing)?\b|SIGKILL|signal 9\b|\boom|out of memory|\bmemory\b|"
                        r"MemoryError|Cannot allocate|\banon-rss\b|\bRSS\b|\bswap\b", re.IGNORECASE)
"""A line that bears on a SIGKILL: the kill itself, the kernel's OOM killer (`Out of memory: Killed process`,
`oom-kill`), memory running short."""


def ended_advice(end: events.End, tail: list[str], who: str = "trainer") -> Advice:
    """A run that ended failed with no traceback: the exit, and the last lines it printed, warnings left out (a
    deprecation printed at start is no reason for a kill; it crowded out the last log). A SIGKILL's lines are
    only those that bear on it: a loss log or a checkpoint line before it says nothing of why. `who`: "command"
    for a watched command (`loratui run -- python train.py`), whose exit is the user's program's, not loratui's
    trainer's."""
    how = f"was killed by {end.signal}" if end.signal else (
        f"exited with code {end.exit_code}" if end.exit_code is not None else "failed")
    killed = end.signal in ("SIGKILL", "9")
    if killed:
        evidence = _on_the_kill(end.error.strip().splitlines() + tail)
    else:
        first = end.error.strip().splitlines()[-1] if end.error.strip() else ""
        evidence = ([first] if first else []) + [line for line in tail if not _WARNING_LINE.match(line)][-5:]
    hint = "SIGKILL with no error is often the kernel's out-of-memory killer (host RAM): check dmesg" \
        if killed else f"the {who}'s last lines are above; the full output is in the run directory"
    title = f"The {who} {how} at step {end.step}"
    missing = next((m for m in map(_NO_SCRIPT.search, reversed(evidence)) if m), None) if not killed else None
    if missing:  # `python nosuch.py`, each torchrun rank's too: the script's name, not only the exit code
        title += f": Python cannot open {missing.group(1)} (no such file)"
        hint = "check the script's name and the directory the command runs in (its path is taken from there)"
    return Advice("exception", ERROR, title, evidence + ["next: " + hint], {}, end.step)


def _on_the_kill(lines: list[str]) -> list[str]:
    """The lines (error first, then the tail) that speak of the kill or memory, each once, the last five; else
    that none does."""
    kept = [line.strip() for line in lines if _ON_A_KILL.search(line) and not _WARNING_LINE.match(line)]
    kept = list(dict.fromkeys(line for line in kept if line))[-5:]
    return kept or ["its last output lines say nothing of the kill or of memory"]


SCHEDULER_STEPS = {
    "TIMEOUT": "ask for more time (#SBATCH --time), or let the run save before the limit and go on in a "
               "requeued job: [slurm] save_before_limit = \"10m\" and requeue = true (watched commands: "
               "--save-before-limit 10m --requeue)",
    "CANCELLED": "someone cancelled the job (scancel, or an administrator); submitting it again starts a new "
                 "run from step 0 (an ended run is not resumed)",
    "OUT_OF_MEMORY": "the job's host memory (RAM) limit, not the GPU's: ask for more (#SBATCH --mem or "
                     "--mem-per-gpu), or hold less in RAM (fewer dataloader workers, a streamed dataset)",
    "PREEMPTED": "a higher-priority job took the nodes: submit with --requeue and set [slurm] requeue = true "
                 "so the run goes on from its checkpoint when the job runs again",
    "NODE_FAIL": "a node of the job failed; submitting it again (with --exclude NODE if it fails again) starts "
                 "a new run from step 0 (an ended run is not resumed)",
}


def scheduler_advice(end: events.End) -> Advice:
    """A run the scheduler ended: what Slurm said, and what to do about it."""
    said = end.error.strip().splitlines()[0] if end.error.strip() else f"Slurm: {end.cause}"
    step_text = SCHEDULER_STEPS.get(end.cause, "read the job's output file (#SBATCH --output) for Slurm's words")
    return Advice("scheduler_end", ERROR, f"Slurm ended the job ({end.cause}) at step {end.step} -> {step_text}",
                  [said, "next: " + step_text], {}, end.step)


def _where_text(raised: Raised) -> str:
    where = raised.where
    if where.startswith("library:"):
        return f"inside the {where.split(':', 1)[1]} library"
    if where == "loratui":
        return "in loratui's code"
    if where == "python":
        return "in Python's standard library"
    if where.startswith("user:"):
        return f"in your code ({_user_where(raised)})"
    return ""
