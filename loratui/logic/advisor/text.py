"""Detectors over output text that needs no telemetry: DataLoader worker warnings, an nvidia-smi table with an
idle GPU, NCCL watchdog timeouts, and where a run was (the Trainer's phase banners, the user's own words,
a checkpoint folder named at the step the run died). Each finding keeps the line it came from, verbatim; the
advice for them is built in starve.py (a starved loader) and nccl_advice.py (a timeout)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from loratui.logic.advisor.advice import Finding
from loratui.logic.advisor import nan_text
from loratui.logic.advisor.bnb_text import BnbSetup
from loratui.logic.advisor.gpu_count_words import SEVERAL_GPUS
from loratui.logic.advisor.died import process_died
from loratui.logic.advisor.error_said import introduced_message, introduces_error, said_raised
from loratui.logic.advisor.prep_timeout import PrepTimeout
from loratui.logic.advisor.prep_words import BAR, prep_bar
from loratui.logic.advisor.phase_text import PhaseText
from loratui.logic.advisor.phase_words import looks_like_code
from loratui.logic.advisor.starve import StarveText
from loratui.logic.advisor.starve_gpu_util import GPUSTAT_ROW, SMI_ROW
from loratui.logic.advisor.starve_timed import timer_keys
from loratui.logic.durations import clock_seconds
from loratui.logic.text_reader import progress, values
from loratui.logic.fmt import quoted
from loratui.logic.word_gate import WordGate

_FEW_WORKERS = re.compile(r"does not have many workers which may be a bottleneck")
_FEW_SUGGEST = re.compile(r"\(try (\d+) which is the number of cpus|`?num_workers=(\d+)`?\s+in the `DataLoader`")
_MANY_WORKERS = re.compile(r"This DataLoader will create (\d+) worker processes in total")
_QUEUE_EMPTY = re.compile(r"\bData layer prefetch queue empty\b")
"""Caffe's data layer had no batch ready when the net asked (blocking_queue.cpp logs it each time the solver
waits): the input pipeline, not the GPU, sets the pace."""
_MANY_SUGGEST = re.compile(r"suggested max number of worker in current system is (\d+)")
_DISTRIBUTED = r"NCCL|c10d|store->|TCPStore|DistStore|ProcessGroup|process group|gloo|rendezvous|barrier|collective"
_TIMED_OUT = (r"(?:(?<![\w])(?:timed out|times out|time ?out\b(?!\s*(?:\((?:ms|s|sec)\)|[:=]|set\b|is\b|of\b|value)))|"
              r"超时(?!\s*(?:时间|设置|参数|阈值|值|[:=：]|改|调)))")
"""A timeout that happened, not a setting (`TIMEOUT(ms): 1800000`, `timeout=1800`, `NCCL_IB_TIMEOUT set by`), in
English or Chinese, the program's words or the person's (`NCCL times out after 30 minutes`, `10分钟后报NCCL超时错误`;
not `NCCL超时时间设为3600`, the setting)."""
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout|WorkNCCL::checkTimeout|"
    r"store->get\('?\w*'?\) got error|retrieving ncclUniqueId from \[\d+\] via c10d key-value store|"
    r"RendezvousTimeoutError|watchdog got stuck for \d+ seconds|"
    r"\bwatchdog\b(?!.*?(?:CUDA error|device-side assert|illegal memory|with exception))"
    r".{0,80}?\b(?:kill\w*|abort\w*|terminat\w*|tim(?:ed|es) ?out|timeout)\b|"
    r"(?:" + _DISTRIBUTED + r").{0,300}?" + _TIMED_OUT + "|" + _TIMED_OUT + r".{0,300}?(?:" + _DISTRIBUTED + r")|"
    r"(?P<connect>connect\(\) timed out\. Original timeout was)|"
    r"(?P<hosts>backend initiali[sz]ation is taking more than [\d.]+ seconds\. Did you run your code on all TPU hosts)",
    re.I)
"""A collective, the rendezvous store or a barrier that timed out, in any layer's words: NCCL's watchdog, c10d's
socket wait (`waitForInput: socket ... timed out after 1800000ms`), the store (`store->get('0') got error: Socket
Timeout`, `DistStoreError: Timed out after 1801 seconds waiting for clients`), a store-based barrier; a rank that
could not reach the store at all (c10d's `connect() timed out. Original timeout was 900000 ms.`), and JAX's TPU pod
whose hosts did not all start (`TPU backend initialization is taking more than 60.0 seconds. Did you run your code on
all TPU hosts?`)."""
_WARDED = re.compile(r"\b(?:avoid\w*|prevent\w*|in case of|against|increas\w*|rais(?:e|es|ed|ing)|extend\w*|"
                     r"longer|if|whether)\b[^.!?;]{0,40}$|避免|防止|如果", re.I)
"""Words before the timeout that ward it off or suppose it (`setting ddp_timeout to 18000 to avoid NCCL timeout`,
`increase the NCCL timeout`): a precaution, not a timeout that happened."""
_NCCL_WORDS = ("nccl", "c10d", "store", "processgroup", "process group", "gloo", "rendezvous", "barrier",
               "collective", "watchdog", "original timeout", "tpu hosts")
_HANG_SAID = re.compile(r"(?<![A-Za-z])(?:hangs?|hanging|hung|stucks?|freez[A-Za-z]*|frozen|gets? no further|no progress)"
                        r"(?![A-Za-z])|卡住|卡死|不动|挂起|死锁", re.I)
"""The user's words that the run stopped moving, in Chinese too, where the English word touches the characters
(`一直hang住`: no `\b` stands between 直 and h, both word characters)."""
_HANG_WHERE = re.compile(r"\b(?:at|during|in|on|while|inside)\s+(?:the\s+)?(?:first\s+)?[\"'`]?(?:Initiali[sz]ing distributed|"
                         r"init_process_group|rendezvous|barrier|all[_-]?reduce|all[_-]?gather|broadcast|NCCL|"
                         r"communicat\w*|dist\.\w+)|\b(?:multi-?node|(?:two|three|four|\d+) nodes|across nodes)\b|"
                         r"\b(?:NCCL|all[_-]?reduce|all[_-]?gather|barrier)\s+(?:\w+\s+)?(?:hangs?|hung|hanging|stuck|freez\w*)\b|"
                         r"\b(?:hangs?|hung|hanging|stuck|freez\w*|frozen)\b[^.!?]{0,60}?\bNCCL\b|"
                         r"\bcommunicat\w*\s+(?:\w+\s+){0,3}(?:hangs?|hung|hanging|stuck|freez\w*)\b|"
                         r"(?:通信|通讯)[^，。,.!?！？]{0,6}?(?:卡住|卡死|挂起|死锁|hang)|多机|跨节点|多节点", re.I)
"""Where the person says it hangs: in a collective or the distributed setup, or on several nodes (NCCL's domain), or
the ranks' communication as what hangs (`存储模型通信卡死`), or a collective as what hangs (`with 8 GPUs and apex mixed precision, NCCL hangs`), or a hang that NCCL's error ends
(`then freezes and displays an NCCL error`, mmdetection#12392)."""
_NOT_COLLECTIVE = re.compile(r"data\s*load\w*|dataloader|(?<![A-Za-z])workers?(?![A-Za-z])|tokeni[sz]\w*|preprocess\w*|"
                             r"download\w*|(?<![A-Za-z])(?:sav(?:e|es|ing)(?![A-Za-z])|eval|loss|acc(?:uracy)?(?![A-Za-z]))|数据|保存|损失|准确率",
                             re.I)
"""A run said to hang only with several GPUs (`it stucks with multi-GPUs (2 or 4 A6000), but works with a single GPU`,
transformers#28280; `with multi-gpu, the script hangs forever`, Matcha-TTS#57; `on 4 RTX 3090 GPUs, the training
freezes`, `4x3090`, `8 x A100`, `单卡正常，两卡就卡住不动`; a ZeRO-2/3 or FSDP run shards over its ranks): what several GPUs add is their
collectives, most often a peer-to-peer path that never completes; not where the line names other work that may
stall (the data loader, tokenising, a save, an evaluation) or a loss that is stuck (in Chinese too: `两张卡，训练时loss卡住不降`,
where the letters touch the characters and no word boundary stands)."""
_DIST_SETUP = re.compile(r"^\W{0,8}(?:Initiali[sz]ing (?:torch\.)?distributed\b|Initiali[sz]ing process group)", re.I)
"""A program's line that its ranks set up their group (tacotron2's and Lightning's `Initializing distributed`): a hang
said after it, with no other work named, is the ranks' (NVIDIA/tacotron2#64: a stale rendezvous file)."""
_NCCL_FIELDS = re.compile(r"OpType=(\w+).*?Timeout\(ms\)=(\d+)(?:\) ran for (\d+) milliseconds)?")
_AFTER = re.compile(r"(?:(?:timed out|timeout) after|Original timeout was) (\d+(?:\.\d+)?)\s*"
                    r"(ms|milliseconds|s\b|seconds)", re.I)
_STORE = re.compile(r"c10d|store|socket|rendezvous|barrier", re.I)
"""The ranks' meeting point rather than a collective: a rank never arrived to set up the group."""
_NCCL_RANK = re.compile(r"\[Rank (\d+)\]")
_DICT_KEY = re.compile(r"\{\s*['\"]?[\w/.\- ]{1,60}['\"]?\s*:")
"""A printed dict's first key (`{'train/loss': nan`, `{"loss": NaN`): only such a line is a dict the NaN readers of
dicts take; a brace that opens none (TensorFlow's `abnormal_detected_host @0x... = {1, 0} LossTensor is inf or nan`,
a set, a format placeholder) leaves the line to the reader of NaNs said in words."""
_NAN_SAID = re.compile(
    r"\b(?:loss|gradients?)\b[\w ]{0,20}?\b(?:is|are|became|becomes|become|was|went|goes|got|gets?|getting|"
    r"turn(?:s|ed)?(?: into| to)?)\s+"
    r"(?:nan|inf|non-finite)\b|\b(?:nan|non-finite|inf)\s+(?:loss|gradients?)\b(?: detected| found| encountered)?|"
    r"\b(?:loss|grad_norm|grad norm|gnorm)\s*[:=|]?\s*(?:tensor\(\s*)?(?:nan|[+-]?inf)\b|"
    r"\b(?:nan|inf)\s+(?:detected|found|encountered)\s+in\s+(?:the\s+)?(?:loss|gradients?|outputs?|logits)\b|"
    r"probability tensor contains either .inf., .nan. or element < 0|"
    r"\b(?:detected|found|encountered|contains?|got)\b[\w ]{0,20}?\b(?:nan|inf|non-finite)(?: or (?:nan|inf))? "
    r"values? (?:in|for) (?:the )?(?:loss|gradients?|grads?)\b|"
    r"returned nan values in its \w+ output|NaN or Inf found in input tensor|number of nan iterations:\s*[1-9]|"
    r"[\'\"]nan[\'\"]\s+(?:is\s+|was\s+|being\s+|gets?\s+)?returned\b|"
    r"(?:loss|损失)\s*(?:值|函数)?\s*(?:就|会|又|也|突然|一直|都)*\s*(?:为|是|变成了?|变为|出现了?|成了?)\s*(?:nan|inf)\b",
    re.I)
"""The program's own words (`RuntimeError: loss became NaN`, `NaN loss detected`, `Loss is nan, stopping`) or
a NaN printed after its name in any layout (`loss    nan`, `grad_norm: nan`), and the tools that watch for one:
autograd's anomaly detection (`Function 'MulBackward0' returned nan values in its 0th output`), TensorBoard
refusing a NaN scalar (`NaN or Inf found in input tensor`), Megatron's count of NaN iterations above zero, a
printed tensor (`loss: tensor(nan, device='cuda:0')`), sampling from NaN logits (`probability tensor contains
either inf, nan or element < 0`)."""
_SCALE_DOWN = re.compile(r"reducing (?:the )?loss scale|Gradient overflow|OVERFLOW!.{0,80}loss scale", re.I)
"""fp16's dynamic loss scaler backing off from an overflow (normal now and then; beside a NaN it names fp16)."""
_SCALE_FLOOR = re.compile(r"loss scale already at minimum|Attempted loss scale: 1(?:\.0)?, reducing to 1\b|"
                          r"Minimum loss scale reached", re.I)
"""fp16's loss scaler (DeepSpeed, Megatron, apex, fairseq's `FloatingPointError: Minimum loss scale reached`) gave
up: every step overflows."""
_METER = re.compile(r"\b([A-Za-z_]*[Tt]ime|[Dd]ata|[Bb]atch(?=:?\s+\d+\.\d+\s*\()|[A-Za-z_]*(?i:data|load|fetch|step|fwd|bwd|forward|backward|compute|"
                    r"train)(?:[A-Za-z_]*|/bwd)(?=\s*[:=]?\s*\d+(?:\.\d+)?\s*m?s\b))\b\s*[:=]?\s*(\d+(?:\.\d+)?)(?P<ms>\s*ms\b)?"
                    r"(?:\s*\((\d+(?:\.\d+)?)\))?")
"""Per-iteration timers: PyTorch's examples (`Time 8.01 (7.52)  Data 7.72 (7.24)`, running averages in
brackets), MMEngine/LAVIS (`time: 0.4920  data: 0.0000`), `load_data_time: 19.6, train_step_time: 0.68`."""
_UNIT_TIMED = re.compile(r"\d\s*m?s\b")
"""A duration with its unit (`data: 2.10s  step: 0.25s`): timers named with no `time` in them."""
_EXCLUSIVE = re.compile(r"step|train|compute|forward|fwd|model", re.I)
"""A step timer named for the compute alone: the data time comes on top of it, not inside it."""
METER_SHARE = 0.25
"""Waiting for data a quarter of the wall time or more: a starved loader."""
_PREP_STATUS = re.compile(
    r"Running tokenizer on dataset|Tokeniz(?:ing|e)\b[^|\n]{0,40}?\b(?:dataset|prompts?|data|examples|samples)\b|"
    r"Grouping texts in chunks|Packing (?:the )?dataset|Converting format of dataset|Preprocessing (?:the )?dataset",
    re.I)
"""A dataset being tokenised or packed (a bar's description, a status line, a `map(desc=...)` in pasted code)."""
_WORKERS_CHOSEN = re.compile(r"num_workers\W{0,3}\s*(?:has to|must|should|needs? to|is required to|can only)\s+be\s+[01]\b|"
                             r"num_workers\W{0,3}\s*(?:=\s*)?[01]\b[^.\n]{0,30}\b(?:by design|on purpose|"
                             r"intentional\w*|required)\b", re.I)
"""The program's own note that its loader needs 0 or 1 worker (a custom loader, data already on the GPU): the
Lightning/PyTorch few-workers warning is then by design, not a bottleneck."""
_NO_INPUT_GRAD = re.compile(r"None of the inputs have requires_grad=True")
"""torch.utils.checkpoint's warning: the checkpointed block's inputs need no gradient, so nothing inside
gets one."""
_CHECKPOINTING_ON = re.compile(r"gradient[_ ]checkpointing", re.I)
_CHECKPOINTING_OFF = re.compile(
    r"gradient[_ ]checkpointing\W{0,3}\s*[=:]?\s*(?:False|0|no|off)\b|disabl\w*[_ ]gradient[_ ]checkpointing|"
    r"(?:without|no|turn\w* off|switch\w* off) gradient[_ ]checkpointing|"
    r"gradient[_ ]checkpointing (?:is |was )?(?:off|disabled|not (?:on|enabled|used))", re.I)
"""A line that names gradient checkpointing only to turn it off, or to say it is off."""
BATCH_ONE = re.compile(
    r"(?<![\w-])(?<!eval_)(?<!valid_)(?<!test_)(?:--)?(?:per_device_train_|train_|micro_train_|micro[_ -]?|train[_ -]?)?"
    r"(?:batch[_ -]?size|bsize|bs)(?:_per_(?:gpu|device))?[\s\"'`]{0,3}(?:(?:is|was|to|of|at|be|set|already|even|"
    r"only|as|just|=|:|设置为|设为|为|是)[\s\"'`]*){0,4}1(?![\d.,]\d|\d|e-?\d|\s*(?:k|x|/|-\d))", re.I)
"""The person's (or the command's) training batch of one: `micro batch size to be 1`, `--per_device_train_batch_size 1`,
`batch_size为1`, `bs=1`; not an evaluation's batch, not `batch_size 16` or `(batch_size, 1)`."""
_BATCH_ONE_WORKS = re.compile(r"\b(?:works?|worked|working|fine(?![-_ ]?tun)|ok|okay|runs? (?:ok|fine|well)|succeed\w*|"
                              r"no (?:oom|problem|issue)s?)\b|正常|没问题|可以跑|>>\s+Batch size =", re.I)
"""A batch of one that worked (the fix, not the failing run's setting), or the Trainer's evaluation header; not the
`fine` of `fine-tuning` (`fine-tuning with batch size 1 runs out of memory` is the failing run's batch)."""
# Not built from phase_words.WORKS: its `passed` takes `batch_size=1 passed to the Trainer` for a batch that worked;
# this one adds `runs well`, `no OOM`, `可以跑` and the Trainer's `>> Batch size =` header.
_BATCH_OTHER = re.compile(r"(?:batch[_ -]?size|bsize|\bbs)\W{0,3}\s*(?:(?:is|was|to|of|at|=|:|为)\s*){0,2}"
                          r"(?!1(?![\d.]))\d+\b", re.I)
"""Another batch size on the same line (`bs=1 runs, bs=2 goes OOM`): which one failed is not said."""
MAC_SAID = re.compile(r"\b(?:mac ?os|macosx|macbook|mac studio|mac mini|imac|apple silicon|apple m[1-5]|"
                      r"m[1-5] (?:pro|max|ultra)|m[1-5] mac)\b|torch\.backends\.mps|device\s*=\s*[\"']mps|"
                      r"\bmps backend\b|[\"']mps[\"']|/opt/homebrew/", re.I)
"""The text is about a Mac (Apple's GPU, no CUDA): `M2 MacOS`, `on my MacBook`, `device="mps"`, a path under
Homebrew's Apple-silicon prefix (/opt/homebrew/). Not NVIDIA's own MPS (its Multi-Process Service), named bare."""
_MAC_NEEDS = WordGate("mac", "apple", "m1", "m2", "m3", "m4", "m5", "mps", "homebrew")
"""A word every match of MAC_SAID holds: the cheap test before it (`ac`: capacity, each, reached) let a CUDA OOM
message run it on every line (~30 us)."""
PREP_SLOW_S = 600
"""A preprocessing bar whose elapsed plus remaining time passes 10 minutes: the GPUs wait that long (and
under DDP the other ranks wait in a collective that times out at ddp_timeout)."""


@dataclass
class TextWatch:
    """Facts and findings from output lines; bounded state."""

    where: PhaseText = field(default_factory=PhaseText)  # where the run was: its status lines, bars, words
    starve: StarveText = field(default_factory=StarveText)  # utilisation readings, profiler rows, the user's words
    bnb: BnbSetup = field(default_factory=BnbSetup)  # bitsandbytes' CUDA runtime warning, until a CUDA binary loads
    prep_timeout: PrepTimeout = field(default_factory=PrepTimeout)  # a rank preparing data past the timeout, in words
    error_said: tuple[str, str] | None = None  # an exception the person named in words (its type, the line)
    error_intro: str = ""  # the person's line introducing an error's message, until the next line
    died: tuple[str, str] | None = None  # the first line where the OS, a shell or a launcher ended a process (the
    # line, the next step): `Illegal instruction (core dumped)`, `bad interpreter`, `srun: error: ...`
    scale_line: str = ""  # the first fp16 loss-scale message: the run is fp16
    nccl_lines: int = 0
    nccl_ranks: set[int] = field(default_factory=set)
    prep_line: str = ""  # the dataset preprocessing the text shows (the longest bar, else a status line)
    prep_s: int = 0  # that bar's elapsed plus remaining seconds
    workers_chosen: str = ""  # the text's note that the loader must run with 0 or 1 worker
    nccl_info: str = ""  # the last `NCCL INFO` line (NCCL_DEBUG=INFO set up its communicators)
    hang_said: str = ""  # the user's words that the run hangs
    dist_setup: str = ""  # a program's line that it sets up its ranks (`Initializing distributed`)
    batch_one: str = ""  # the first line that says the training batch is already 1 (no smaller batch to advise)
    mac_line: str = ""  # the first line that puts the run on a Mac (no CUDA there)
    checkpointing_line: str = ""  # torch's checkpoint warning that no input needs a gradient, else a line
    # that turns gradient checkpointing on: what explains a LoRA backward's `does not have a grad_fn`
    _many: tuple[int, str] | None = None
    _meter_data: float = 0.0  # seconds waited for data over the timer lines seen
    _meter_total: float = 0.0  # and their wall time
    _meter_lines: int = 0
    _meter_first_data: float = 0.0  # the first timed line's wait for data (the workers' start-up) and its time
    _meter_first_total: float = 0.0

    def line(self, line: str, step: int) -> list[Finding]:
        """Fold one output line in; the findings it completes."""
        found: list[Finding] = []
        lowered = line.lower()
        self.where.line(line)
        if "worker" in line or "prefetch queue" in line:
            found += self._workers(line, step)
            if not self.workers_chosen and _WORKERS_CHOSEN.search(line):
                self.workers_chosen = quoted(line)
        if "%" in line and ("MiB" in line or "MB" in line):
            found += self._idle_gpu(line, step)
        if "NCCL INFO" in line or "hang" in lowered or "stuck" in lowered or "freez" in lowered or "卡" in line or \
                "nitializ" in line:
            found += self._nccl_hang(line, step)
        if ("time" in lowered or "store->get" in line or "stuck" in lowered or "超时" in line or
                "watchdog" in lowered or "tpu hosts" in lowered) and any(word in lowered for word in _NCCL_WORDS):
            found += self._nccl(line, step)
        if ("nan" in lowered or "inf" in lowered or "scale" in lowered or "finite" in lowered or
                "floatingpoint" in lowered or "invalid" in lowered):
            printed = "{" in line and _DICT_KEY.search(line) is not None
            found += self._nan_unlogged(line, step) if printed else self._nan_said(line, step)
        if ("ata" in line or "etch" in line or "oad" in line) and ("ime" in line or "atch" in line or "_ms" in line or
                                                                  "t_" in line or _UNIT_TIMED.search(line)):
            found += self._meter(line, step)
        if ("/s" in line or "s/" in line) and "<" in line:
            found += self._preprocessing(line, step)
        if not self.prep_line and ("oken" in line or "roup" in line or "ack" in line or "rocess" in line) and \
                _PREP_STATUS.search(line):
            self.prep_line = quoted(line)
        found += self.starve.line(line, step)
        self._error_words(line)
        if self.died is None:
            self.died = process_died(line)
        if ("atch" in line or "bs" in lowered or "BATCH" in line) and not getattr(self, "batch_one", "") and \
                BATCH_ONE.search(line) and not _BATCH_ONE_WORKS.search(line) and not _BATCH_OTHER.search(line):
            self.batch_one = quoted(line)  # getattr: a text watch pickled in an older events.idx
        if ("ac" in line or "mps" in lowered or "pple" in line) and not getattr(self, "mac_line", "") and \
                _MAC_NEEDS.passes(line) and MAC_SAID.search(line):
            self.mac_line = quoted(line)  # getattr: a text watch pickled in an older events.idx
        if "heckpoint" in line or "requires_grad" in line:
            self._checkpointing(line)
        found += self._prep_timed_out(line, step)
        if "libcudart" in line or "libbitsandbytes" in line or "SETUP" in line:
            self.bnb.line(line, step)
        return found

    def _error_words(self, line: str) -> None:
        """An error in the person's words, or the message on the line after their `I got an error ...:`."""
        intro = getattr(self, "error_intro", "")  # getattr: a text watch pickled in an older events.idx
        if intro and self.error_said is None and line.strip() and not line.lstrip().startswith("```"):
            self.error_intro = ""  # the line after the person's `I got an error ...:` is the error's message
            self.error_said = introduced_message(intro, line)
        elif self.error_said is None and ("rror" in line or "xception" in line) and not looks_like_code(line):
            self.error_said = said_raised(line)
            if self.error_said is None and introduces_error(line):
                self.error_intro = quoted(line)

    def _checkpointing(self, line: str) -> None:
        """The first line that shows gradient checkpointing on; torch's warning that no input needs a
        gradient wins."""
        if _NO_INPUT_GRAD.search(line) and not _NO_INPUT_GRAD.search(getattr(self, "checkpointing_line", "")):
            self.checkpointing_line = quoted(line)
        elif not getattr(self, "checkpointing_line", "") and _CHECKPOINTING_ON.search(line) and \
                not _CHECKPOINTING_OFF.search(line):
            self.checkpointing_line = quoted(line)

    def _prep_timed_out(self, line: str, step: int) -> list[Finding]:
        """The run died at the distributed timeout while a rank prepared the data, in words (before any NCCL line)."""
        said = self.prep_timeout.line(line) if not self.nccl_lines else None
        if said is None:
            return []
        self.nccl_lines = 1
        self.prep_line = self.prep_line or str(said.pop("prep"))
        return [Finding("nccl_timeout", step, said)]

    def _idle_gpu(self, line: str, step: int) -> list[Finding]:
        """A GPU holding memory (a model is loaded) but nearly idle, in nvidia-smi's table or gpustat's line."""
        smi = SMI_ROW.search(line)
        used, util = (int(smi.group(1)), int(smi.group(3))) if smi else (0, 100)
        if smi is None:
            gpustat = GPUSTAT_ROW.search(line)
            used, util = (int(gpustat.group(2)), int(gpustat.group(1))) if gpustat else (0, 100)
        if util <= 10 and used >= 1024 and not self.starve.memory_only():
            return [Finding("data_starved", step, {"text": "idle_gpu", "line": line.strip(), "util": util,
                                                   "used_mib": used})]
        return []

    def _nan_said(self, line: str, step: int) -> list[Finding]:
        """A NaN in the program's own words, or fp16's loss scaler at its floor (every step overflows)."""
        if not self.scale_line and _SCALE_DOWN.search(line):
            self.scale_line = quoted(line)
        if _SCALE_FLOOR.search(line) or nan_text.scale_floor(line):
            return [Finding("nan_loss", step, {"what": "fp16 loss scale", "value": "at its minimum",
                                               "quote": quoted(line), "fp16_floor": True, "lr": None})]
        if looks_like_code(line):
            return []
        bar = progress.find_bar(line)  # each read once: the line's loss and bar serve both questions below
        logged = values.loss_line(line) if bar is None else None
        if _logged_non_finite(logged):
            return []
        said = nan_text.read(line)  # any dialect, in general; _NAN_SAID the phrasings it does not reach
        if said is not None or _NAN_SAID.search(line) and not nan_text.hedged(line):
            what, value = (said.what, said.value) if said else ("loss", "nan")
            if bar is not None:
                logged = values.loss_line(line)  # the line's own step (`step 11 | ...`): the logs lag a line behind
            own = logged[0] if logged is not None and logged[0] is not None else _own_step(line, bar)
            step = own if own else step
            lr = nan_text.learning_rate(line)  # `nan after 200 steps with lr 2e-4`: the person's own value
            return [Finding("nan_loss", step, {"what": what, "value": value, "quote": quoted(line),
                                               "lr": lr, "lr_said": lr is not None})]
        return []

    def _nan_unlogged(self, line: str, step: int) -> list[Finding]:
        """A printed dict the log reader does not take as a training log (`{'train/loss': nan, ...}`, a summary's
        `'train_loss': nan`): its NaN is read here, the others' by the loss watch."""
        said = nan_text.unlogged(line)
        if said is None:
            return []
        return [Finding("nan_loss", step, {"what": said.what, "value": said.value, "quote": quoted(line),
                                           "lr": None})]

    def _meter(self, line: str, step: int) -> list[Finding]:
        """Time spent waiting for data against wall time, over the timer lines seen (one 19 s stall among
        0.6 s steps counts for what it cost); running averages, when printed, are the whole run's already."""
        data = time = None
        average = False
        exclusive = False
        for name, value, ms, mean in _METER.findall(line):
            is_data = any(word in name.lower() for word in ("data", "load", "fetch"))
            number = (float(mean) if mean else float(value)) / (1000 if ms else 1)
            if is_data and data is None:
                data, average = number, average or bool(mean)
            elif not is_data and time is None:
                time, exclusive = number, bool(_EXCLUSIVE.search(name))
        if data is None or time is None:
            keyed = timer_keys(line)  # keys of other namings: `time/data`, `t_data`, `fetch_ms`
            if keyed is None:
                return []
            data, time, exclusive = keyed
        total = data + time if exclusive else time
        if total <= 0 or data > total:
            return []
        if average:
            self._meter_data, self._meter_total, self._meter_lines = data, total, max(self._meter_lines + 1, 3)
        else:
            if self._meter_lines == 0:
                self._meter_first_data, self._meter_first_total = data, total
            self._meter_data += data
            self._meter_total += total
            self._meter_lines += 1
        if self._meter_lines < 3 and not average and not self.starve.slow_said() or self._meter_total < 0.05 or \
                self._meter_data < METER_SHARE * self._meter_total or not average and self._steady_fed():
            return []
        return [Finding("data_starved", step, {"text": "data_time", "line": quoted(line),
                                               "time": self._meter_total, "data": self._meter_data,
                                               "average": average, "lines": self._meter_lines})]

    def _steady_fed(self) -> bool:
        """The lines after the first wait for data less than a quarter of their time: the first interval's wait was
        the loader's start (workers spawning, caches filling), a warm-up, not a loader that cannot keep up."""
        data, total = self._meter_data - self._meter_first_data, self._meter_total - self._meter_first_total
        return total > 0 and data < METER_SHARE * total

    def _preprocessing(self, line: str, step: int) -> list[Finding]:
        """A dataset preprocessing bar (map, tokenisation, filtering) that runs for more than 10 minutes."""
        m = BAR.search(line)
        if m is None or not prep_bar(m.group("desc"), m.group("unit")):
            return []
        spent, left = clock_seconds(m.group("spent")), clock_seconds(m.group("left"))
        if spent + left > self.prep_s:
            self.prep_line, self.prep_s = quoted(line), spent + left
        if spent + left < PREP_SLOW_S:
            return []
        return [Finding("data_starved", step, {"text": "preprocessing", "line": quoted(line),
                                               "desc": m.group("desc").strip(), "rate": float(m.group("rate")),
                                               "unit": m.group("unit"), "minutes": (spent + left) / 60})]

    def _workers(self, line: str, step: int) -> list[Finding]:
        if _QUEUE_EMPTY.search(line):
            return [Finding("data_starved", step, {"text": "queue_empty", "line": line.strip()})]
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

    def _nccl_hang(self, line: str, step: int) -> list[Finding]:
        """NCCL set up its communicators (NCCL_DEBUG=INFO lines) and the user says the run hangs: a collective
        that never completes, with no watchdog timeout in the paste (it came later, or the timeout is long)."""
        if "NCCL INFO" in line:
            self.nccl_info = quoted(line)
        elif "nitializ" in line and _DIST_SETUP.match(line):
            self.dist_setup = quoted(line)
        elif not self.hang_said and _HANG_SAID.search(line) and not looks_like_code(line) and "NCCL INFO" not in line:
            self.hang_said = quoted(line)
            several = SEVERAL_GPUS.search(line) or getattr(self, "dist_setup", "")  # getattr: an older events.idx
            if not self.nccl_info and (_HANG_WHERE.search(line) or several and not _NOT_COLLECTIVE.search(line)) \
                    and not _NCCL_TIMEOUT.search(line):
                # it hangs in a collective or across nodes, in words (a timeout said on the line is read as one)
                self.nccl_info = quoted(line)
        else:
            return []
        if not (self.nccl_info and self.hang_said) or self.nccl_lines:
            return []
        self.nccl_lines = 1
        return [Finding("nccl_timeout", step, {"line": self.hang_said, "op": "", "timeout_ms": 0, "ran_ms": 0,
                                               "timed_out": False, "hang": self.nccl_info})]

    def _nccl(self, line: str, step: int) -> list[Finding]:
        found = _NCCL_TIMEOUT.search(line)
        if not found or _WARDED.search(line, 0, found.start()):
            return []
        self.nccl_lines += 1
        rank = _NCCL_RANK.search(line)
        if rank and len(self.nccl_ranks) < 1024:
            self.nccl_ranks.add(int(rank.group(1)))
        fields = _NCCL_FIELDS.search(line)
        after = _AFTER.search(line) if fields is None else None
        timeout_ms = int(fields.group(2)) if fields else 0
        if after:
            timeout_ms = int(float(after.group(1)) * (1 if after.group(2).startswith("m") else 1000))
        store = fields is None and (_STORE.search(line) is not None or found.group("connect") is not None)
        facts = {"line": quoted(line, 400), "op": fields.group(1) if fields else "rendezvous" if store else "",
                 "timed_out": fields is not None or re.search(_TIMED_OUT, line, re.I) is not None,
                 "timeout_ms": timeout_ms, "ran_ms": int(fields.group(3)) if fields and fields.group(3) else 0}
        if found.group("connect") or found.group("hosts"):  # a rank that never reached the others: no collective ran
            facts["unreached"] = "tpu" if found.group("hosts") else "store"
        return [Finding("nccl_timeout", step, facts)]


def _own_step(line: str, bar: progress.Bar | None) -> int:
    """The step a line with a NaN names itself (`step 3 | loss nan`, a bar's `3300/3300 [..., loss=nan]`), or 0;
    `bar` is the line's bar (progress.find_bar), read once by the caller."""
    own = values.line_step(line)
    if own is None and "|" in line:
        own = bar.n if bar is not None else None
    return own or 0


def _logged_non_finite(logged: tuple[int | None, dict[str, float]] | None) -> bool:
    """Whether a line's loss reading (values.loss_line of a line with no bar: a bar's postfix is a log only on
    the training bar, and the text reads it) is a `step N | loss nan` line the text reader turns into a training
    log: the loss watch reads its NaN with the log's step and learning rate (and knows fp16's first overflows);
    read here, it would come first, at the step before (the reader holds a loss line until the next)."""
    return logged is not None and any(x != x or x in (math.inf, -math.inf) for x in logged[1].values())
