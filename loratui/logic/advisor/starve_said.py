"""Data starvation in the person's own words (English or Chinese): the GPU's utilisation low or swinging, a CPU at
100% while the GPU idles, a slow loader or slow storage, delays between batches, preprocessing that takes long, and
the times the person gives (starve_said_times.py). `said_starved` reads one line; StarveText (starve.py) asks it of
every line the person wrote. Pure logic."""

from __future__ import annotations

import re

from loratui.logic.advisor.prep_words import PREP_NAMED, PREP_WORK, WORK_HINTS
from loratui.logic.advisor.starve_said_times import loader_takes, slowdown_said, stall_said
from loratui.logic.advisor.starve_words import (
    DEVICE,
    ELSEWHERE,
    NOT_DATA,
    asked,
    clause_said,
    fed_slowly,
    speed_up_asked,
)
from loratui.logic.clauses import DENIED
from loratui.logic.fmt import quoted
from loratui.logic.word_gate import WordGate

_UTIL = (r"(?:" + DEVICE + r"|显卡|(?<![A-Za-z])cuda)[\s\-_']{0,3}(?:s\s+)?(?:util\w*|usage|load|activity|busy|利用率|使用率|占用率)|"
         r"(?<![A-Za-z存])(?:利用率|使用率)|"
         r"\bVolatile GPU-Util|\bSM (?:util\w*|activity)|\butili[sz]ation of (?:the |my |our )?GPUs?")
"""The GPU's utilisation by name (`GPU util`, `GPU-utilization`, `GPU usage`, nvidia-smi's `Volatile GPU-Util`,
`GPU利用率`); not its memory (`GPU memory usage` has a word between)."""

_LOW = (r"(?:very |quite |extremely |really |so |too |pretty )?(?:low|lower|poor|bad|idle|underutili[sz]ed|"
        r"under[- ]utili[sz]ed|not (?:fully )?(?:used|utili[sz]ed)|zero|spiky|spikes?|spiking|oscillat\w*|"
        r"fluctuat\w*|jump\w*|jitter\w*|unstable|up and down|intermittent\w*|drop(?:s|ping|ped)? (?:to|down)|"
        r"很低|较低|偏低|低|不高|上不去|波动|忽高忽低|时高时低|一直是?0|为0|(?:都|总|基本|几乎)?是\s*0(?![\d.])|只有|仅|"
        r"(?<=\s)0(?![\d.,]|\s*(?:GB|GiB|MB|MiB))|saw-?tooth)")
"""What a starved GPU's utilisation does: stays low, or swings between busy and idle."""

_PCT = r"(\d{1,3})\s*%"

_UTIL_SAID = re.compile(
    r"(?P<util>" + _UTIL + r")(?P<gap>[^.!?\n;。！？]{0,50}?)(?:(?P<low>" + _LOW + r")|" + _PCT + r")|"
    r"(?P<low2>" + _LOW + r")\s+(?:\w+\s+){0,2}?(?:" + _UTIL + r")|"
    + DEVICE + r"[^.!?\n,;]{0,20}?\b(?P<low3>under-?utili[sz]ed|not (?:fully )?utili[sz]ed|starv\w*|"
    r"(?:barely|hardly|rarely|scarcely) (?:being )?(?:used|utili[sz]ed|busy|working)|"
    r"(?:has|have|had) nothing to do|(?:is |are |was |were )?doing nothing|does nothing|sits? idle|(?:is |are )?idl(?:e|ing)"
    r"|wait(?:s|ing|ed)? (?:for|on) (?:the )?(?:data|input|(?:data ?)?loader|next batch|batch(?:es)?|CPU))|"
    r"(?:GPU|显卡)[^。！？\n，,；]{0,10}?(?P<low4>空闲|闲置|在等|等待数据|等数据|跑不满|没有?跑满)", re.I)

_UTIL_SAID_NEEDS = WordGate("util", "usage", "load", "activity", "busy", "used", "working", "starv", "nothing", "idl",
                            "wait", "利用率", "使用率", "占用率", "空闲", "闲置", "在等", "等待数据", "等数据", "跑不满",
                            "跑满")
"""A word every match of _UTIL_SAID holds (a utilisation's name, or a starved GPU's verb): a line without one (a
CUDA OOM message names the GPU but not its use) skips that pattern, the costliest of a line's readers. A WordGate,
not a pattern of these words: that cost some 40 us on such a message."""

_RANGE = re.compile(r"(\d{1,3})\s*%?\s*(?:-|~|to|and|–)\s*(\d{1,3})\s*%")

_PREP_SUBJECT = f"(?:{PREP_NAMED})"

_PREP_LONG = (r"(?:slow\w*|bottleneck\w*|unusabl\w*|forever|ages|a long time|too long|very long|hours?|time[- ]consuming|"
              r"(?P<n>\d+(?:\.\d+)?|half an|an|several|a few|many)\s*(?P<unit>hours?|hrs?|minutes?|mins?)\b|"
              r"半小时|小时|很慢|太慢|好慢|慢|很久|加速|提速)")

_MAP_CRAWLS = re.compile(r"(?:(?-i:\bmap\b)|\.map\b|\bmap\(\))[^.!?\n]{0,40}?\b(?:slow\w*(?! (?:GPU|model))|crawl\w*|"
                         r"takes? forever|never finish\w*|hangs?\b|stuck)", re.I)
"""`map slows down to a crawl at around 80% done`: the lowercase word (not mAP, the detection metric) and a crawl."""

_PREP_SAID = re.compile(_PREP_SUBJECT + r"(?:[^.!?\n。！？]|(?<=\w)\.(?=\w)){0,80}?" + _PREP_LONG + r"|"
                        r"\b(?:slow(?:er|est|s|ly)?|crawl\w*|takes? forever)\b[^.!?\n]{0,40}?\b(?:of|in|during|for|at) (?:the |my |our )?"
                        + _PREP_SUBJECT, re.I)
"""Preprocessing said to take long: `the tokenization process is taking forever`, `“Running tokenizer on dataset”就要等
半小时以上`, `tokenizing 7.5K rows ... instead of 17 minutes`."""

PREP_SAID_MIN = 10

_HELD = re.compile(r"\b(?:not?|never|isn't|aren't|wasn't|without|high|higher|full|fully|100%)\s*$", re.I)
"""A word just before the verdict that denies it (`GPU utilisation is not low`)."""

_GAP_OTHER = re.compile(r"\b(?:memory|mem|VRAM|RAM|CPU|temperature|temp|power|fan|disk|network|loss|lr|learning "
                        r"rate|accuracy|acc|throughput|speed|score|reward|but|while|whereas|though|although)\b|"
                        r"显存|内存|但|而", re.I)
"""Another quantity named between the GPU's utilisation and the verdict (that quantity is low, not the GPU's), or a
turn of the sentence (`GPU usage looks normal but the loss stays low`)."""

_CPU_BUSY = re.compile(r"(?<![A-Za-z0-9_])(?:CPU|cores\b|htop\b)[\w\s\-]{0,20}?(?:(?<![\d.])(?:100|9\d)\s*%|\bmax(?:ed)? out|\bfully (?:used|loaded)|\bbottleneck)|"
                       r"CPU[\w\s]{0,10}(?:占满|满载|瓶颈)", re.I)

_CPU_SLOW = re.compile(r"\bCPU\b[^.!?\n]{0,20}?\b(?:is|are|seems?|being)?\s*(?:too |very |so |the )?(?:slow|bottleneck\w*|"
                       r"(?:fully |100% )?(?:busy|saturated|maxed))\b", re.I)

_GPU_FAST = re.compile(r"\bGPUs?\b[^.!?\n]{0,12}?\b(?:is |are )?(?:fast|quick|waiting|idle|fine)\b|"
                       r"\b(?:data ?loader|num_workers|workers?|preprocess\w*|augment\w*|decod\w*)\b", re.I)
"""`gpu is fast ,but the cpu is slow`: the CPU that prepares batches is the limit (a GPU word or a loader word beside
it says the CPU is feeding training, not running it)."""

_GPU_IDLE = re.compile(r"\bGPUs?(?![A-Za-z])[\w\s\-]{0,20}?(?:\b(?:idle|idling|wait(?:s|ing)?)|(?:\b(?:is |are |at |only ))?"
                       r"(?<![\d.])(?:[0-9]|[12]\d)\s*%)|"
                       r"GPU[\w\s]{0,10}(?:空闲|闲置)", re.I)

_SHARE = (r"(?:most|the (?:majority|bulk)|(?:over |more than |about |~)?(?:2[5-9]|[3-9]\d|100)\s*%|half|"
          r"(?:two|three) (?:thirds|quarters))(?: of)?(?: the)?(?: \w+)? (?:time|step|iteration|run|wall[- ]?(?:clock|time))")
"""A large share of the time (`most of the time`, `80% of the step`)."""

_LOADER_SLOW = re.compile(
    r"\b(?:data ?load(?:ing|er)s?|data pipeline|input pipeline|data ?reading|I/?O|__getitem__|collate\w*|"
    r"(?:reading|loading|decoding|fetching) (?:the |my |our |each |every |all )?(?:[\w.-]+ ){0,2}?(?:files?|data|images?|"
    r"samples|shards?|records|videos?|audio|batch(?:es)?)(?: from [\w./-]+)?)\b"
    r"[^.!?\n]{0,40}?\b(?:is|are|was|were|seems?|becomes?|looks?|being)?\s*(?:the |a |very |so |too |really )*"
    r"(?:bottleneck\w*|slow\w*|time[- ]consuming|(?:CPU|IO|I/O)[- ]bound)\b|"
    r"\b(?:data ?load(?:ing|er)s?|data pipeline|input pipeline|__getitem__|collate\w*)\b[^.!?\n]{0,30}?"
    r"\b(?:takes?|taking|took|needs?)\s+(?:(?:a|very|so|too|really|extremely|quite)\s+)*(?:long|forever|ages)\b|"
    r"\b(?:bottleneck(?:ed)?|slowed down|limited)\s+(?:(?:is|was|by|on|in|lies in|(?:seems?|appears?|must|might|"
    r"could|may) (?:to )?be)\s+)?(?:the )?(?:data ?load(?:ing|er)|I/?O|data "
    r"pipeline|input pipeline|data reading|disk)\b|"
    r"数据(?:加载|读取|预处理)[^。！？\n]{0,10}(?:慢|瓶颈)|"
    r"\b(?:data ?load\w*|(?:the |our |my )(?:data ?)?loader|input pipeline|data pipeline|__getitem__|collate\w*|"
    r"fetching (?:the )?(?:next )?batch\w*|reading (?:the )?data)\b[^.!?\n]{0,30}?\b(?:takes?|took|taking|spends?|"
    r"spent|eats?|accounts? for|dominates?)\s+(?:up\s+)?" + _SHARE + r"|"
    r"(?:\b\d+(?:\.\d+)?\s*(?:h|hours?|hrs?|min\w*|s|sec\w*)|\bmost|\bthe (?:majority|bulk)|\bhalf|\d{2}\s*%)"
    r"(?: of (?:it|them|that|the \w+))?\s+(?:is |are |was |were )?(?:spent|wasted|goes|go|went) (?:on |in |for |into )?"
    r"(?:waiting (?:for|on) )?(?:the )?(?:data ?load\w*|loading|fetching|reading|(?:data ?)?loader|I/?O|__getitem__|"
    r"collat\w*)|"
    + _SHARE + r"\s+(?:is |was |goes |went )?(?:spent |wasted )?(?:in|on|into|waiting (?:for|on))\s+[^.!?\n]{0,20}?"
    r"\b(?:data ?load\w*|(?:data ?)?loader|I/?O|__getitem__|collate\w*|(?:the )?next batch|batch\w* loading|"
    r"reading (?:the )?data)|"
    r"\bnum_workers\s*(?:[=:]|to|of|is|as|at)?\s*0\b[^.!?\n]{0,60}?\b(?:slow\w*|bottleneck\w*)\b|"
    r"\b(?:slow\w*|bottleneck\w*)\b[^.!?\n]{0,60}?\bnum_workers\s*(?:[=:]|to|of|is|as|at)?\s*0\b", re.I)
"""The loader named slow or the bottleneck, in the user's words (`data loading is the bottleneck`)."""

_STORAGE_SLOW = re.compile(
    r"\b(?:slow\w*|bottleneck\w*|crawl\w*|takes? (?:forever|ages)|very long)\b[^.!?\n]{0,60}?"
    r"\b(?:NFS|network (?:file ?system|drive|storage|disk|share)|s3|GCS|blob storage|Google Drive|mounted drive|"
    r"HDD|hard (?:disk|drive)|spinning disk|lustre|sshfs|shared file ?system)\b|"
    r"\b(?:NFS|network (?:file ?system|drive|storage|disk|share)|s3|GCS|Google Drive|mounted drive|HDD|hard (?:disk|"
    r"drive)|lustre|sshfs|shared file ?system)\b[^.!?\n]{0,60}?\b(?:slow\w*|bottleneck\w*|crawl\w*|takes? (?:forever|"
    r"ages))\b|"
    r"(?:机械硬盘|网络存储|网盘|NAS|NFS|挂载|共享存储)[^。！？\n]{0,30}(?:慢|瓶颈)|(?:慢|瓶颈)[^。！？\n]{0,30}(?:机械硬盘|网络存储|网盘|NAS|NFS)",
    re.I)
"""Reading the data from slow storage (a network file system, a bucket, a spinning disk), in the user's words."""

_DELAY = re.compile(
    r"\b(?:after|at|before|on|in|for)? ?(?:every|each) (?:few |(?:~\s*|about |around )?\d+(?:st|nd|rd|th)? |other )?(?:training )?"
    r"(?:batch|iteration|iter|"
    r"step)e?s?\b"
    r"[^.!?\n]{0,40}?\b(?:delay\w*|paus\w*|stall\w*|lag\w*|gap|freez\w*|hang\w*|hiccup\w*|wait\w*|stutter\w*)\b|"
    r"(?:\b(?:delay|pause|stall|lag|gap|freeze|hang|hiccup|wait|stutter)(?:s|ing|ed)?\b|\bstuck\b|\bfroze\b|停顿|卡顿|卡住)"
    r"[^.!?\n]{0,40}?"
    r"(?:\bbetween\b[^.!?\n]{0,20}?\b(?:batch|iteration|iter|step|mini-?batch)|"
    r"\b(?:after|before|at) (?:every|each)\s+(?:\d+\s+)?(?:batch|iteration|iter|step)|"
    r"\bevery (?:few |(?:~\s*|about |around )?\d+ )?(?:batch|iteration|iter|step)|(?:每|几)个?(?:batch|iter|step|迭代)|"
    r"\b(?:at the (?:start|beginning) of|before) (?:each|every) (?:new )?epoch)|"
    r"每个?\s*epoch[^。！？\n]{0,10}?(?:开始|开头|之前|前)[^。！？\n]{0,15}?(?:等|卡|慢|停)|"
    r"(?:每|每隔|每经过)[^。！？\n]{0,12}?(?:batch|iter\w*|step|迭代)[^。！？\n]{0,12}?(?:卡住(?!不动)|卡顿|卡一[次下]|停顿|停一[次下])|"
    r"\bfirst (?:batch|iteration|iter|step)e?s? (?:of|in) (?:each|every) (?:new )?epoch\b[^.!?\n]{0,40}?(?:\bslow\w*|"
    r"\btakes? (?:about |around |~|over |almost )?\d+(?:\.\d+)?\s*(?:s|secs?|seconds?|min\w*)\b|\blong\b|\bforever\b|"
    r"\bages\b)", re.I)
"""A delay between batches in the user's words (the GPU step is quick; the wait is for the next batch), in Chinese too
with the period first (`每经过固定的iteration后会卡住一段时间`, `每320个iteration卡一次`)."""

_LOST_TIME = re.compile(
    r"\b(?:lose|loses|losing|lost|waste[sd]?|wasting)\s+(?:about |around |roughly |~|nearly |almost |over |up to )?"
    r"\d+(?:\.\d+)?\s*(?:s|secs?|seconds?|min(?:ute)?s?)\b[^.!?\n]{0,60}?\b(?:workers?|(?:data ?)?loader|data ?load\w*|"
    r"(?:each|every|per) (?:epoch|batch|step|iteration)|between (?:epochs|batches|steps))\b", re.I)
"""Time lost to the feed (`you lose around 10 seconds because of the worker reset at the start of each epoch`)."""

_RESPAWN = re.compile(
    r"\bworkers?\b[^.!?\n]{0,40}?\b(?:re-?spawn\w*|re-?start\w*|re-?creat\w*|re-?initiali[sz]\w*|torn down|"
    r"tear(?:s|ing)? down|reset\w*|re-?launch\w*|shut ?down and (?:re)?start\w*)\b[^.!?\n]{0,40}?"
    r"\b(?:each|every|per|new) epoch|"
    r"\b(?:each|every|per|new) epoch\b[^.!?\n]{0,40}?\bworkers?\b[^.!?\n]{0,30}?\b(?:re-?spawn\w*|re-?start\w*|"
    r"re-?creat\w*|re-?initiali[sz]\w*|torn down|reset\w*|re-?launch\w*)", re.I)
"""The loader's workers started again every epoch (no persistent_workers): a pause at each epoch's start."""

_DELAY_HERE = re.compile(
    r"\b(?:\d+(?:\.\d+)?(?:\s*[~\-]\s*\d+(?:\.\d+)?)?|a few|several|a couple of)\s*(?:s|secs?|seconds?|minutes?|"
    r"mins?)\s+(?:of\s+)?(?:delay|pause|stall|lag|gap|wait|freeze)\b|"
    r"\b(?:delay|pause|stall|lag|gap|wait|freeze)s?\s+(?:of\s+)?(?:about |around |~)?\d+(?:\.\d+)?\s*(?:s|secs?|"
    r"seconds?)\b", re.I)
"""A delay of some seconds: starvation when it is written between two logged iterations."""

_TURN = re.compile(r"\b(?:but|whereas|although|though|however|fine|fast|quick)\b", re.I)
"""A turn inside the words (`data loading is fast but training is slow`): the verdict is another subject's."""


PROGRAM = re.compile(r"^\s*(?:\[?\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|[A-Z]+:|\w+(?:Warning|Error)\b)|\{|"
                     r"\bwarnings\.warn|File \"")
"""A line the program printed (a logger prefix, a warning, a dict, a traceback frame), not the user's prose."""


def code_line(line: str) -> bool:
    # not phase_words.looks_like_code: any assignment (`num_workers = 8`) and a shell or REPL prompt are code here,
    # where a config line names the loader words the person's account of a slow loader is read for
    return bool(re.match(r"\s*(?:def |class |import |from |#|>>>|\$ |[\w.\[\]'\"]+\s*[-+*/]?=\s)", line))

_SAID_WORDS = ("load", "pipeline", "read", "i/o", "getitem", "collate", "bottleneck", "slow", "limited", "数据", "epoch",
               "stream", "iterabledataset", "h5", "hdf5", "lmdb", "zarr", "tfrecord", "transform", "speed", "faster",
               "every", "each", "硬盘", "存储", "nas", "nfs",
               "num_workers", "delay", "pause", "stall", "lag", "gap", "freez", "hang", "hiccup", "wait", "停顿", "卡",
               "crawl", "forever", " s ", "sec", "second", "min")
"""Words one of the loader, storage and delay patterns needs (lowercase): those patterns run only on such lines."""

_FED_WORDS = ("bound", "keep up", "enough", "feed", "bottleneck", "than", "dominat", "limited", "wait", "throttl",
              "starved", "held back", "used", "utili", "busy", "saturat", "慢", "等", "空转", "闲着", "most", "half",
              "majority", "bulk", "% of", "卡", "瓶颈", "跟不上", "喂不饱")
"""Words one of starve_words' verdicts needs (lowercase)."""

_THEN_WORDS = ("first epoch", "used to", "previous", "earlier", "yesterday", "last ", "instead of", "slow", "sudden", "以前", "之前", "变慢",
               "/s", "/it", "longer", "faster", "speed", "increase", "improve", "boost", "gain", "from ")

_UTIL_WORDS = ("gpu", "显卡", "利用率", "使用率", "cuda", "sm ", "util", "usage", "nvidia-smi")

_LOADER_WORDS = ("load", "getitem", "collate", "fetch", "next(iter", "加载", "读取", "batch")

ON_CPU = re.compile(
    r"\b(?:runs?|running|ran|trains?|training|is|are|was|were)\s+(?:\w+\s+)?on\s+(?:the\s+)?CPU\b(?!\s*(?:side|workers?|"
    r"threads?|cores?))|\bCPU instead of (?:the )?GPU|\bnot (?:even )?(?:being )?(?:used|utili[sz]ed) at all|"
    r"\b(?:does ?n[o']t|is ?n[o']t|not) (?:even )?(?:use|using) (?:the |my |any )?GPU|"
    r"cuda\.is_available\(\)\W{0,3}\s*(?:returns?|returned|is|gives|gave|=+|->|prints?)\s*False", re.I)
"""The run is on the CPU (no CUDA, the CPU trains): the GPU idles because nothing runs on it, not because it waits
for data."""

_NOTHING_ON_IT = re.compile(r"(?<![\w])device\s*(?:is\s*)?[=:]?\s*['\"]?cpu\b|\bno (?:running )?processes\b", re.I)
"""In the same words as the idle GPU only (`GPU usage 0%, the model is on device cpu`, `nvidia-smi shows no processes
and 0% util`): a config's `device: cpu` (DeepSpeed's offload) or a container's nvidia-smi that lists no process
says nothing of where training runs."""

_STOPPED = re.compile(r"\b(?:crash\w*|died|killed|OOM|out of memory|hang\w*|hung|stuck|frozen|freez\w*|deadlock\w*|"
                      r"no progress|never (?:starts?|progress\w*)|after the (?:error|exception))\b", re.I)
"""The run stopped or hangs: an idle GPU then says so, not that it is fed too slowly."""

_NOW_AND_THEN = re.compile(r"\b(?:sometimes|occasionally|periodically|intermittent\w*|from time to time|every|each|"
                           r"for (?:a (?:few|couple of) |several |\d+ |~\d+ )?(?:seconds?|secs?|s|minutes?|mins?|a while)|"
                           r"then (?:continues|resumes|goes on))\b", re.I)
"""A hang now and then is a stall (`the code sometimes just hangs at a single step ... GPU 0%`), not a stopped run."""

_AVOIDED = re.compile(r"\b(?:avoid\w*|prevent\w*|without|no more|no longer|not|never|fix\w*|solv\w*)\s+(?:an?\s+|the\s+|"
                      r"getting\s+|hitting\s+|any\s+)?(?:OOM|out of memory|crash\w*|errors?)\b", re.I)
"""A stop the change kept away (`reduced the batch size to avoid OOM, and now the GPU sits at 20%`): the run goes on."""


def idle_elsewhere(line: str) -> bool:
    """The line gives another reason for an idle GPU: the run is on the CPU, crashed or hangs for good."""
    kept = _AVOIDED.sub(" ", line)
    stopped = _STOPPED.search(kept) is not None and _NOW_AND_THEN.search(line) is None
    return bool(ON_CPU.search(line) or _NOTHING_ON_IT.search(line) or stopped)


def said_starved(line: str, after_iteration: bool) -> dict[str, object] | None:
    """The user's words that say the GPU waits for data, as facts (None when the line says nothing of it)."""
    if code_line(line) or PROGRAM.search(line):
        return None
    said = _said(line, after_iteration)
    if said is not None and said["said"] in ("util", "cpu_busy") and idle_elsewhere(line):
        # `GPU usage is 0%, torch.cuda.is_available() returns False`: idle, not waiting; the line's other words
        # still count (`the GPU drops to 0% and training hangs for 2 s every 10 steps`: a pause between batches)
        said = _said(line, after_iteration, util=False)
    return said


def _said(line: str, after_iteration: bool, util: bool = True) -> dict[str, object] | None:
    low = line.lower()  # the cheap tests first: this runs on every line of a log
    if util and ("cpu" in low or "core" in low or "htop" in low) and (_CPU_BUSY.search(line) and _GPU_IDLE.search(line) or
                         _CPU_SLOW.search(line) and _GPU_FAST.search(line)):
        # before the GPU's words: the CPU is the cause named
        return {"said": "cpu_busy", "quote": quoted(line)}
    said_util = _util_said(line) if util and (any(w in low for w in _UTIL_WORDS) or
                                              "%" in line and _GPU_NAMED.search(line)) else None
    if said_util is not None:
        return said_util
    prep = (_prep_said(line) if any(w in low for w in WORK_HINTS) else None) or \
        (slowdown_said(line) if any(w in low for w in _THEN_WORDS) else None) or \
        (stall_said(line) if "before" in low else None) or \
        (loader_takes(line) if any(w in low for w in _LOADER_WORDS) else None)
    if prep is not None:
        return prep
    if not any(word in low for word in _SAID_WORDS + _FED_WORDS):
        return None
    for pattern, what in ((_LOADER_SLOW, "loader"), (_STORAGE_SLOW, "storage"), (_DELAY, "delay"),
                          (_LOST_TIME, "delay"), (_RESPAWN, "delay")):
        found = pattern.search(line)
        if found and not _HELD.search(line[:found.start()][-16:]) and not DENIED.search(found.group(0)) and \
                not (what in ("delay", "storage") and ELSEWHERE.search(line)) and \
                not (what == "loader" and NOT_DATA.search(found.group(0))) and not asked(line) and \
                not _TURN.search(found.group(0)):
            return {"said": what, "quote": quoted(line)}
    if after_iteration and _DELAY_HERE.search(line):
        return {"said": "delay", "quote": quoted(line)}
    fed = fed_slowly(line) if any(word in low for word in _FED_WORDS) else None
    if fed is None and any(word in low for word in _SAID_WORDS) and clause_said(line):
        fed = "loader"
    if fed is None and ("speed" in low or "faster" in low or "acceler" in low or "加" in line or "提速" in line) and \
            speed_up_asked(line):
        fed = "loader"
    return {"said": fed, "quote": quoted(line)} if fed and (util or fed == "loader") else None

_IDLE_SHARE = re.compile(
    DEVICE + r"[^.!?\n]{0,30}?\b(?:idle|idling|waiting|stalled|doing nothing)\s+(?:for\s+)?(?:about |around |~|over |"
    r"nearly |almost )?(?P<n>\d{1,3})\s*%\s+of\s+(?:the|its)\s+(?:\w+\s+)?time|"
    + DEVICE + r"[^.!?\n]{0,30}?\b(?:spends?|spent|is|was|sits?)\s+(?:about |around |~|over |nearly |almost )?"
    r"(?P<n2>\d{1,3})\s*%\s+of\s+(?:the|its)\s+(?:\w+\s+)?time\s+(?:idle|idling|waiting|stalled|doing nothing)", re.I)
"""The GPU's idle share as measured (`the GPU idle 63% of the time`, `the GPU spends 70% of its time idle`)."""

IDLE_SHARE = 25

_SWING = re.compile(r"spik|saw-?tooth|oscillat|fluctuat|jump|jitter|unstable|up and down|intermittent|波动|忽高忽低|时高时低", re.I)

SWING_LOW = 70
"""A swing whose low end the user gives above 70% is a busy GPU (`between 60% - 100%` starves, per MegEngine's
maintainers; `between 85% and 100%` does not)."""


def _util_said(line: str) -> dict[str, object] | None:
    """`GPU utilization is low`, `GPU util 0-30%`, `spiky GPU utilization`, `GPU利用率很低`: the utilisation low or
    swinging in the user's words; a percentage counts when it is at most half (`oscillates between 60% - 100%`
    counts by its word, `GPU utilization is 100%` does not)."""
    idle = _IDLE_SHARE.search(line) if "%" in line else None  # it and _BUSY_AT read a percentage
    if idle:  # the idle share measured: a quarter of the time or more is a GPU waiting
        share = int(idle.group("n") or idle.group("n2"))
        return {"said": "util", "quote": quoted(line), "util": 100 - share} if share >= IDLE_SHARE else None
    for found in _UTIL_SAID.finditer(line) if _UTIL_SAID_NEEDS.passes(line) else ():
        gap = found.group("gap") or ""
        if found.group("util") and _GAP_OTHER.search(gap):
            continue
        if _HELD.search(line[:found.start("low") if found.group("low") else found.start()][-20:]):
            continue
        word = found.group("low") or found.group("low2") or found.group("low3") or found.group("low4")
        low = _clause_low(line[found.start("util") if found.group("util") else found.start():])
        if word and _SWING.search(word) and low is not None and low > SWING_LOW:
            continue  # `fluctuates between 85% and 100%`: busy all the time
        if word:
            return {"said": "util", "quote": quoted(line)}
        if low is not None and low <= 50:
            return {"said": "util", "quote": quoted(line), "util": low}
    busy = _busy_at(line) if "%" in line else None
    return {"said": "util", "quote": quoted(line), "util": busy} if busy is not None and busy <= 50 else None

_BUSY_AT = re.compile(
    r"(?:nvidia-smi|nvtop|gpustat)\s+(?:shows?|showed|says|reports?|gives|is at|at|stays at|reads)\s+(?:only |about |around |~|"
    r"just )?(?P<n3>\d{1,3})\s*%(?!\s*(?:of (?:its |the |total )?)?(?:memory|mem\b|VRAM|显存))|"
    r"(?P<dev>" + DEVICE + r")(?:\s*\d\b)?(?P<gap>[^.!?\n,;%]{0,20}?)\b(?:at|around|about|only|just|~|busy|used|active|"
    r"utili[sz]ed|working|running at|hover(?:s|ing)? (?:at|around))\s+(?:at |around |about |only |just |~|for |less than |"
    r"under |below )?(?P<n>\d{1,3})(?:\s*%?\s*(?:-|~|–|to)\s*(?P<m>\d{1,3}))?\s*%"
    r"(?!\s*(?:of (?:its |the |total )?)?(?:memory|mem\b|VRAM|显存))|"
    r"(?<![\d.])(?P<n2>\d{1,3})\s*%\s*(?:(?:GPU|SM)[- ]?)?(?:util\w*|usage|load|busy)\b"
    r"(?!\s*(?:of (?:its |the |total )?)?(?:memory|mem\b|VRAM|显存))", re.I)

_GPU_NAMED = re.compile(DEVICE + r"|nvidia-smi|nvtop|gpustat|\bcuda\b", re.I)


def _busy_at(line: str) -> int | None:
    """`nvidia-smi shows the GPU at 7%`, `the GPU is only used 10% of the time`, `nvidia-smi shows 5% util`, `my GPU
    is capped at around 40-50%`: the GPU's busy share as a number, or a range's top, beside the GPU (not its
    memory's, not the CPU's)."""
    for found in _BUSY_AT.finditer(line):
        if found.group("n3"):
            return int(found.group("n3"))
        if found.group("dev"):
            if _GAP_OTHER.search(found.group("gap")) or _HELD.search(found.group("gap")):
                continue
            return int(found.group("m") or found.group("n"))  # a range's top: `capped at around 40-50%` is 50
        before = line[max(0, found.start() - 25):found.start()]
        if _GPU_NAMED.search(line) and not re.search(r"\b(?:CPU|RAM|memory|mem|VRAM|disk|cores?)\b|显存|内存", before, re.I):
            return int(found.group("n2"))
    return None


def _clause_low(clause: str) -> int | None:
    """The lowest percentage the clause gives the GPU's utilisation (`is not above 55% and most of the times its
    less than 10%` -> 10), up to the sentence's end or another quantity (`100%, CPU 20%` stays 100)."""
    end = re.search(r"[.!?;\n。！？]|" + _GAP_OTHER.pattern, clause[3:], re.I)
    clause = clause[:end.start() + 3] if end else clause[:120]
    numbers = [int(n) for n in re.findall(_PCT, clause)]
    return min(numbers) if numbers else None


_PREP_STUCK = re.compile(r"(?:\b(?:stuck|hangs?|hanging|hung|frozen|freezes|sits?|sitting|stays?|waiting)\s+(?:for "
                         r"(?:hours|ages) )?(?:at|on|in|during)|卡在|卡住在?|停在|一直在)\s*[^.!?\n。！？]{0,10}?"
                         r"(?:" + PREP_WORK + r"|(?<![\w.])\w*Dataset\b(?!\s+(?:card|page|viewer|hub)\b))", re.I)
"""A run stuck at its preprocessing (`stuck at "Running tokenizer on dataset"`, `一直卡在 tokenize`), at loading or
building its data, or at a dataset's constructor, which reads and tokenises the whole file (`the process gets stuck
at dataset = LineByLineTextDataset(...)` for a 600 MB file, transformers#5944)."""

_NOT_PREP = re.compile(r"\b(?:generat\w*|inference|predict\w*|serving|decod(?:e|ing) (?:the )?(?:output|tokens))\b", re.I)
"""Tokenising at generation or serving time: not a dataset prepared for training."""


def _prep_said(line: str) -> dict[str, object] | None:
    if _NOT_PREP.search(line):
        return None
    stuck = _PREP_STUCK.search(line)
    if stuck and not DENIED.search(stuck.group(0)):
        return {"said": "preprocessing", "quote": quoted(line)}
    crawl = _MAP_CRAWLS.search(line)
    if crawl and not DENIED.search(crawl.group(0)):
        return {"said": "preprocessing", "quote": quoted(line)}
    for found in _PREP_SAID.finditer(line):
        if _HELD.search(line[:found.start()][-16:]) or DENIED.search(found.group(0)):
            continue
        number = found.group("n")
        if number and found.group("unit").lower().startswith("m"):
            minutes = float(number) if number[0].isdigit() else 0
            if minutes < PREP_SAID_MIN and number[0].isdigit():
                continue
        return {"said": "preprocessing", "quote": quoted(line)}
    return None
