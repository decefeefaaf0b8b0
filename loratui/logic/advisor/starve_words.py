"""Words that say the GPU is fed too slowly, read by their parts the way a maintainer reads them: a FEEDER (the
loader, the data or input pipeline, reading or decoding files, augmentation, the disk, the CPU) and a VERDICT on it
(I/O-bound, can't keep up, not fast enough, the step dominated by it, slower than the forward pass, the
bottleneck); or the GPU as the subject with what it does meanwhile (waits ~2 s for the loader, isn't used fully);
and the same in Chinese. Pure: a line in, the kind of statement out (None when it says nothing of it)."""

from __future__ import annotations

import re

from loratui.logic.clauses import DENIED, PHRASES, clauses

DEVICE = r"(?<![A-Za-z0-9])(?:GPUs?|[AHVL]\d{2,4}s?|T4s?|RTX ?\d{4}(?: ?Ti)?s?|GTX ?\d{3,4}|MI\d{3}X?)(?![A-Za-z0-9])"
"""The GPU by name or by model (`GPU`, `A100`, `the H100s`, `A6000`, `T4`, `RTX 4090`, `MI250X`), in starve.py's
readers and this module's."""
_THINGS = (r"(?:files?|data|images?|JPE?Gs?|PNGs?|samples|shards?|records|videos?|audio|batch(?:es)?|"
           r"tfrecords?|parquet|arrow)")
_FEEDER = (r"(?:data[- ]?load(?:ing|ers?)|(?:data ?)?loaders?|data ?pipeline|input ?pipeline|data ?reading|I/?O|"
           r"__getitem__|collate(?:_fn)?|(?:data |image |video )?augmentations?|(?:image |video |audio |JPE?G )?decoding|"
           r"(?:reading|loading|decoding|fetching|augmenting) (?:the |my |our |each |every |all )?(?:[\w.-]+ ){0,2}?"
           + _THINGS + r"|data|disk|storage|CPUs?|workers?)")
"""What feeds the GPU: the loader and its parts, the files read, the disk, the CPU that prepares batches."""
NOT_DATA = re.compile(r"model|checkpoint|weight|config|tokenizer|adapter|safetensors|ckpt|pretrained", re.I)
"""Files read that are not the training data (`loading the checkpoint files`): the model's load."""

_FEEDER_VERDICT = re.compile(
    r"(?<![\w-])(?P<who>" + _FEEDER + r")(?:[- ](?:is |are |was |were |seems |looks )?(?:heavily |totally |completely )?"
    r"(?:bound|limited)\b|"
    r"[^.!?\n]{0,40}?\b(?:can(?:'|no)?t|cannot|could(?:n't| not)|(?:is|are)(?:n't| not) able to|unable to|fails? to|"
    r"does(?:n't| not)|do(?:n't| not))\s+(?:\w+\s+){0,2}?(?:keep up|feed (?:the |my |our )?(?:GPUs?|model)|"
    r"keep (?:the |my |our )?(?:\w+ )?(?:GPUs?|cards?) (?:busy|fed|saturated)|saturate|"
    r"(?:be )?(?:loaded|read|fed|decoded|delivered|load|read|deliver) fast enough)|"
    r"[^.!?\n]{0,30}?\b(?:is|are)(?:n't| not) fast enough|"
    r"[^.!?\n]{0,20}?\btoo slow to keep up|"
    r"[^.!?\n]{0,30}?\b(?:takes?|took|taking|eats?|spends?|accounts? for|dominates?)\s+(?:up\s+)?(?:most|the (?:majority|"
    r"bulk)|(?:over |more than |about |~)?(?:2[5-9]|[3-9]\d|100)\s*%|half|(?:two|three) (?:thirds|quarters))(?: of)?"
    r"(?: the| each| every)?(?: \w+)? (?:time|step|iteration|run)|"
    r"[^.!?\n]{0,30}?\b(?:takes?|is|are|was) (?:much |way |far |a lot |\d+x )?(?:longer|slower) than (?:the )?"
    r"(?:forward|backward|fwd|bwd|model|training step|compute|GPU|step|iteration))", re.I)
"""A feeder and its verdict: `the training is I/O-bound`, `data can't be loaded fast enough`, `the CPU cannot feed
the GPU`, `the loader can't keep up`, `the dataloader takes longer than the forward pass`."""
_IT_LONGER = re.compile(r"\bit\s+(?:takes?|is)\s+(?:much |way |far |a lot |\d+x )?(?:longer|slower) than (?:the )?"
                        r"(?:forward|backward|fwd|bwd|model|training step|compute|GPU)", re.I)
"""`my dataloader? It takes longer than the forward pass`: `it` is the loader the line names."""
_BOUND_RUN = re.compile(r"\b(?:training|the run|my run|the job|it|we|pipeline|loop|step|throughput|speed)\b[^.!?\n]{0,25}?"
                        r"\b(?:is|are|was|were|seems|looks|being)?\s*(?:\w+\s+)?(?P<who>CPU|I/?O|IO|data|data[- ]?loading|"
                        r"input|loader|disk)[- ]bound\b|"
                        r"\b(?:dominated|limited|bound|gated|throttled|held back|bottlenecked|starved) by (?:the |our |my )?"
                        r"(?P<who2>" + _FEEDER + r")(?!\s*(?:RAM|memory|mem)\b)", re.I)
"""The run said bound by its feeding: `the training seems to be CPU bound`, `we are data-loading bound`, `step time
is dominated by data loading`."""
_FED_PASSIVE = (r"(?:batch(?:es)?|data|images?|samples|files?|videos?|clips?|frames)\s+(?:are |is |were |was )?(?:getting |being )?"
                r"(?:loaded|read|fetched|decoded|transferred|prepared|preprocessed|augmented)")
_NECK_NEAR = re.compile(r"\bbottleneck\w*\b[^.!?\n]{0,60}?\b(?:when|while|as|because|during|in|at|from)\b[^.!?\n]{0,30}?(?:"
                        + _FED_PASSIVE + r"|" + _FEEDER + r")|" + _FED_PASSIVE + r"[^.!?\n]{0,40}?\bbottleneck", re.I)
"""A bottleneck beside the feeding (`a bottleneck in training time as the batches are getting loaded`)."""
_CPU_NECK = re.compile(r"\bCPU[- ](?:is |was )?(?:the )?bottleneck|\bbottleneck\w*\s+(?:is|was|seems to be|appears to be|"
                       r"lies in|must be|might be)\s+(?:the |my |our )?(?:CPU|data|input|I/?O|disk)\b", re.I)
"""The CPU (or the input) named the bottleneck: `the bottleneck is the CPU, not the GPU`, `a CPU bottleneck`."""
_GPU_WAITS = re.compile(
    DEVICE + r"[^.!?\n,;]{0,25}?\b(?:wait(?:s|ing|ed)?\s+(?:[~≈]?\s*\d+(?:\.\d+)?\s*(?:s|ms|secs?|seconds?)\s+|"
    r"(?:a |an )?(?:\w+ ){0,2}?(?:time|while)\s+)?"
    r"(?:for|on)\s+(?:the |its )?(?:data|input|I/?O|IO|disk|storage|(?:data ?)?loader|next batch|batch(?:es)?|CPU|workers?)|"
    r"(?:is|are)(?:n't| not)\s+(?:being\s+)?(?:(?:fully|completely)\s+(?:used|utili[sz]ed)|(?:used|utili[sz]ed)\s+"
    r"(?:fully|completely|enough)|(?:kept\s+)?(?:busy|saturated|fed)))\b", re.I)
"""The GPU waiting for its feed (`each step the GPU waits ~2 s for the loader`, `the A100s are waiting on I/O`) or
not kept busy (`the GPU isn't being used fully`); not `the GPU is not used` (at all: the device is not found)."""
_ZH = re.compile(r"(?:加载|读取|读|取)数据[^。！？\n]{0,10}(?:慢|瓶颈)|"
                 r"(?:data ?loader|dataloader|数据加载器?|取数据|读数据|加载数据)[^。！？\n]{0,15}?(?:时快时慢|忽快忽慢|卡)|"
                 r"(?:batch|迭代|step)[^。！？\n，,]{0,10}?卡\s*(?:了|住)?\s*\d+(?:\.\d+)?\s*(?:秒|s)|"
                 r"(?:IO|I/O|磁盘|硬盘|读盘)\s*(?:是|成为|成了|有)?\s*瓶颈|(?:data ?loader|数据加载器?)\s*(?:很|太|非常|特别|好|比较)?慢|"
                 r"(?:GPU|显卡)[^。！？\n，,；]{0,10}?(?:等待|空转|闲着)", re.I)
"""`读取数据太慢`, `dataloader 很慢`, `GPU 经常处于等待状态`."""
_ZH_CPU = re.compile(r"CPU\s*(?:是|成为|成了)\s*瓶颈|CPU\s*瓶颈|CPU\s*(?:跟不上|喂不饱)", re.I)
"""`CPU 成为瓶颈`, `CPU跟不上` (the CPU cannot keep up)."""
_QUESTION = re.compile(r"^\s*(?:is|are|could|can|would|does|do|should|how (?:do|can) (?:I|we) (?:know|tell|check))\b[^?]*\?",
                       re.I)
"""A question whether it is so (`Is data loading the bottleneck?`): asked, not said."""


def asked(line: str) -> bool:
    """The line asks whether it is so (`Is data loading the bottleneck?`)."""
    return _QUESTION.search(line) is not None


def fed_slowly(line: str) -> str | None:
    """`cpu_busy` when the CPU is the feeder named, `util` when the GPU is the subject, else `loader`."""
    if len(line) > 2000 or _QUESTION.search(line):
        return None
    found = _FEEDER_VERDICT.search(line)
    if found and not NOT_DATA.search(found.group("who")):
        return "cpu_busy" if found.group("who").upper().startswith("CPU") else "loader"
    if _IT_LONGER.search(line) and re.search(r"load|__getitem__|collate", line, re.I):
        return "loader"
    bound = _BOUND_RUN.search(line)
    if bound and not DENIED.search(bound.group(0)) and not NOT_DATA.search(bound.group(0)):
        return "cpu_busy" if (bound.group("who") or bound.group("who2")).upper().startswith("CPU") else "loader"
    near = _NECK_NEAR.search(line)
    if near and not DENIED.search(near.group(0)) and not NOT_DATA.search(near.group(0)):
        return "loader"
    neck = _CPU_NECK.search(line)
    if neck and not DENIED.search(neck.group(0)):
        return "cpu_busy" if "CPU" in neck.group(0).upper() else "loader"
    if _GPU_WAITS.search(line):
        return "util"
    if _ZH_CPU.search(line):
        return "cpu_busy"
    return "loader" if _ZH.search(line) else None


# -- the fallback: a feeder and slowness in one clause, in any order --------------------------------------------

_CLAUSE_FEEDER = re.compile(
    r"\b(?:data ?loaders?|data[- ]?loading|loading (?:the |my |a |each |the next )?(?:data|dataset|batch(?:es)?|images?|"
    r"samples)|"
    r"input pipeline|data pipeline|__getitem__|collate\w*|num_workers|dataloader workers?|I/?O\b|NFS|HDD|S3\b|"
    r"network (?:drive|storage|disk)|reading (?:the )?(?:data|files?|images?)|decoding|augmentations?|"
    r"IterableDataset|streaming(?:=True| datasets?| mode| data)?|webdataset|h5py|hdf5|LMDB|zarr|tfrecords?|"
    r"(?:data ?set|image|data) transforms?|transforms? in (?:my |the )?(?:data ?set|__getitem__))|"
    r"数据加载|读取数据|数据读取|加载数据|取数据|读数据", re.I)
"""What feeds the GPU, in a clause that calls it slow: the loader and its parts, streamed or lazily read sources."""
_CLAUSE_SLOW = re.compile(r"\b(?:slow\w*|bottleneck\w*|stall\w*|lag(?:s|gy|ging)?|freez\w*|stuck|crawl\w*|forever|time[- ]consuming|"
                          r"takes? (?:ages|hours)|idl(?:e|ing))\b|慢|瓶颈|卡住|卡顿", re.I)
_CLAUSE_WELL = re.compile(r"\b(?:not|never|no|isn't|aren't|wasn't|n't|fine|fast|quick\w*|ok|okay|normal|solved|fixed|"
                          r"NCCL|rank|barrier|all-?reduce|process group|generat\w*|inference|checkpoint\w*|models?|weights?|"
                          r"upload\w*|sav(?:e|es|ed|ing)|push\w*|writ\w*|eval\w*|validat\w*|errors?|fail\w*|exception|"
                          r"crash\w*)\b|"
                          r"不|没|正常|很快", re.I)
"""A clause that says it is not so, or fine, or names another wait (a collective, generation, the model's load)."""


_SPEED_UP_FEED = re.compile(
    r"\b(?:speed(?:ing)? up|accelerat\w*|make|making|get)\s+(?:the |my |our )?(?:data ?load\w*|dataloaders?|data "
    r"pipeline|input pipeline|pre-?processing|tokeni[sz]ation|dataset\.map|map\(\)|__getitem__|collate\w*)"
    r"(?:\s+(?:faster|quicker|more efficient))?|\bfaster\s+(?:data ?load\w*|dataloaders?|pre-?processing|"
    r"tokeni[sz]ation)\b|(?:加速|加快|提速)\s*(?:数据加载|数据读取|数据预处理|dataloader|分词)", re.I)
"""Asked to make the feed faster (`How can I speed up data loading?`): the person found the loader slow."""


_CONTENT = re.compile(r"\b(?:fine|ok|okay|not (?:too |that )?slow|fast enough|plan(?:ning)? to|in the future|later on)\b|"
                      r"还行|还可以|不慢", re.I)
"""It is fast enough now (`It is fine now but I plan to use a larger dataset`): a question ahead of need."""


def speed_up_asked(line: str) -> bool:
    """The person asks how to make the loader or the preprocessing faster, not ahead of need."""
    return len(line) <= 2000 and _SPEED_UP_FEED.search(line) is not None and _CONTENT.search(line) is None


def clause_said(line: str) -> bool:
    """A feeder and slowness in one clause (`the HDD-based loading is painfully slow`, `stalls in the dataloader`,
    `数据加载这块卡住`), when no clause of its own says it is not so or fine."""
    if len(line) > 2000 or _QUESTION.search(line):
        return False
    for clause in clauses(line, PHRASES):
        if _CLAUSE_FEEDER.search(clause) and _CLAUSE_SLOW.search(clause) and \
                not _CLAUSE_WELL.search(clause):
            return True
    return False


ELSEWHERE = re.compile(r"\b(?:sav\w*|checkpoint\w*|eval\w*|validat\w*|logging|print\w*|upload\w*|push\w*|"
                       r"writ\w*)\b|保存|验证", re.I)
"""A pause at a save, an evaluation or a log line is that work, not the loader; slow storage written to (a
checkpoint uploaded to s3) is not the data read."""
