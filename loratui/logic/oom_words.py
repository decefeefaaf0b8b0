"""An out-of-memory error in a person's words: whether a sentence says one happened on the GPU (not the host's RAM,
not a denial or a maybe), whether the machine itself went down, and the cause the person gives for it (fragmentation,
another process, their own numbers, a remedy that worked), in English or Chinese. The message the program printed is
read in logic/oom.py; this module reads the prose around it (an issue's text, a pasted question). Pure logic.
"""

from __future__ import annotations

import re

from loratui.logic.clauses import cjk_spaced, denial, sentences
from loratui.logic.oom import FRAGMENTATION, OTHER_PROCESS, RUNTIME_OOM, is_oom_line, parse_size
from loratui.logic.oom_holders import CARD_SWAP, CLOSED_OTHER, someone_else
from loratui.units import GIB

_SAID = re.compile(r"(?<![A-Za-z])OOM(?:s|ed|'d|ing)?(?![A-Za-z])(?![-_ ]?kill)|out[- ]of[- ](?:GPU[- ]|CUDA[- ]|device[- ]|video[- ])?memory|"
                   r"\bout[- ]of[- ](?:GPU[- ])?VRAM\b|(?<![不没未])超(?:出)?(?:了)?显存|显存超(?:出|了|限)|"
                   r"(?:CUDA|GPU) (?:memory|RAM) (?:exception|error)|exceed\w* (?:the |its |the card's |the GPU's )?(?:GPU(?:'s)? )?(?:RAM|memory|VRAM)|"
                   r"\b(?:not enough|insufficient)\s+(?:free\s+)?(?:GPU\s+|CUDA\s+|device\s+|video\s+)?memory\b|"
                   r"\b(?:failed|fails|unable|cannot|can't|could not|couldn't)\s+(?:to\s+)?alloc(?:ate)?\b|"
                   r"显存[^。，！？,.!?\s]{0,4}?(?:不足|不够|(?<![不没未])溢出|(?<![不没未])爆|(?<![不没未])饱和)|爆显存|"
                   r"(?:GPU|VRAM|ビデオ)?メモリ(?:が|の)?不足|"
                   r"(?<![A-Za-z])(?:memory|VRAM)\s*(?:不足|不够|溢出|爆)|"
                   r"\b(?:memory|VRAM)\s+(?:is|was|are|were)\s+(?:still\s+|just\s+|simply\s+)?(?:not\s+enough|insufficient)\b|"
                   r"\b(?:GPU\s+memory|VRAM)\b[^.!?]{0,40}?\b(?:fills?\s+up|filled\s+up|spikes?|explodes?|blows?\s+up|keeps?\s+"
                   r"growing)\b[^.!?]{0,40}?\b(?:crash\w*|dies|died|fail\w*)\b|"
                   r"(?:显存[^。！？]{0,8}?(?:剧增|暴涨|暴增|飙升|猛增|占满)|(?:占用|占)了?(?:极大|巨大|大量|全部|所有)的?显存)"
                   r"[^。！？]{0,12}?(?:退出|崩溃|挂掉|挂了|中断)|"
                   r"\b(?:eats?|eating|consumes?|consuming|uses?|using|takes?|taking)\s+(?:up\s+)?all\s+(?:of\s+)?(?:the\s+|my\s+)?"
                   r"(?:GPU\s+memory|VRAM|GPU's\s+memory)\b|"
                   r"\b(?:uses?|needs?|takes?)\s+(?:far\s+|much\s+|way\s+|a\s+lot\s+)?more\s+(?:GPU\s+)?memory\s+than\b"
                   r"[^.!?]{0,60}?\b(?:crash\w*|dies|died|fail\w*)\b|"
                   r"\b(?:GPU|CUDA)\s+memory\s+(?:issues?|problems?)\b|"
                   r"\b(?:(?:GPU|CUDA|video|device)\s+memory|VRAM)\s+(?:(?:still|quickly|soon|always|then|just|already|"
                   r"eventually|finally|again|completely)\s+)?(?:r[au]n(?:s|ning)?|goes|went)\s+out\b"
                   r"(?!\s+of\s+(?!memory))|"
                   r"\b(?:fac(?:e|es|ed|ing)|ha(?:ve|s|d|ving)|gets?|got|getting|hit(?:s|ting)?|r[au]n(?:s|ning)?\s+into|"
                   r"encounter\w*|met|meets?|experienc\w*)\s+(?:\w+\s+){0,2}?memory\s+(?:issues?|problems?)\b", re.I)
"""An OOM in words, English or Chinese: letters, not word boundaries, delimit `OOM` (`一到eval_step就爆OOM了`); memory
issues one ran into count (`I was facing memory issues while running validation`, `CUDA memory problem`), not memory
as a reason given (`reducing the layers due to memory issues`)."""
_NOT_SAID = re.compile(
    r"\b(?:no|not|without|avoid\w*|prevent\w*|reduc\w*|never|instead of|rather than|"
    r"less|fewer|risk\w*|if|whether|in case|to handle|handl\w*|catch\w*)\b[^.!?:;,]{0,30}$|n't\s[^.!?:;,]{0,30}$|"
    r"(?:没有?(?:出现|报|遇到|发生)|不会|并不|未(?:出现|报|遇到|发生)|避免|防止|以免|如果|是否|不再)"
    r"[^.!?:;,，。；：！？]{0,30}$", re.I)
"""Words before the OOM, in its clause, that say it did not happen, or might (`to avoid OOM`, `without OOM`, `if it
OOMs`, `并不会出现out of memory的错误`, `没有出现显存不足`, `如果再大就会OOM`); `did not help: still OOM` says it did.
Not `没` or `不` alone: `还没开始训练就OOM` (before training even began) says it did, `显存不足` is the OOM's own word."""
HOST_ALLOCATOR = (r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)|Cannot allocate memory|"
                  r"\bGC overhead limit exceeded\b|" + RUNTIME_OOM)
"""The host's memory refused an allocation, in PyTorch's CPU allocator's, the OS's (errno 12), the JVM's garbage
collector's and another runtime's words (oom.RUNTIME_OOM: the JVM's, Ray's and NumPy's out-of-memory errors, never
torch's `OutOfMemoryError`): what an exception's next step (advisor/failure.py) and a text's host OOM
(advisor/oom_fold.py) both read first."""
HOST_MEM_ZH = r"(?<!显)(?<!卡)(?<!卡的)(?<!GPU)(?<!GPU的)(?<!GPU )(?<!CUDA)(?<!CUDA的)(?<!CUDA )内存"
"""内存 said of the host: not of the card (显存's 存 aside, `卡的内存`, `GPU内存`, `cuda内存不够`: CUDA's memory is the card's).
Patterns that use it compile with re.I, so `cuda` and `gpu` are covered."""
_HOST = re.compile(r"(?<!GPU )(?<!GPU's )\b(?:RAM|CPU|host|system memory|swap|MPS|killed)\b|" + HOST_MEM_ZH + r"|CPUAllocator|"
                   r"被系统\s*(?:kill|杀)|\bkill(?:ed)?\s+by\s+(?:the\s+)?(?:system|OS|kernel)\b|"
                   r"alloc_cpu|Errno 12|Cannot allocate memory|\bmmap\b|shared memory", re.I)


_MEMORY_FAILED = re.compile(
    r"\b(?:crash\w*|die[sd]|dying|fail(?:s|ed|ing)?|stops?|stopped|hangs?|hung|freez\w*|froze|suspend\w*|abort\w*)\b"
    r"[^.!?]{0,40}?\b(?:due to|because of|for|with|caused by|owing to)\s+(?:an?\s+|the\s+|some\s+|insufficient\s+|"
    r"not enough\s+|lack of\s+|too little\s+|a lack of\s+){0,3}(?:GPU\s+|CUDA\s+|video\s+|device\s+)?(?:memory|VRAM)\b"
    r"(?![-_\s]*(?:usage|footprint|efficien\w*|saving|optimi\w*|format|layout|pinn\w*|map\w*|access))|"
    r"\b(?:memory|VRAM)(?:\s+to)?[-\s]+(?:crash\w*|overflow\w*|explo\w*)\b|"
    r"(?:卡|GPU|CUDA)\s?\S{0,2}?\s?(?:空间|内存)\s?(?:不足|不够|溢出|爆)|"
    r"\b(?:(?:GPU|CUDA|video)\s+)?(?:memory|VRAM)(?:\s+(?:usage|use|consumption|footprint))?\s+(?:\w+\s+)?(?:fills?|filled|"
    r"spikes?|spiked|explodes?|exploded|blows?\s+up|blew\s+up|jumps?|jumped|grows?|grew|rises?|rose|climbs?|climbed|"
    r"shoots?\s+up|shot\s+up|max(?:es|ed)?\s+out|keeps?\s+(?:growing|increasing|rising|climbing))\b[^.!?]{0,60}?"
    r"\b(?:crash\w*|dies|died|fail\w*|stops?|stopped|killed|hangs?|hung|errors?|OOM\w*)\b|"
    r"\b(?:blows?|blew|max(?:es|ed)?)\s+(?:up|out)\s+(?:the\s+|all\s+)?(?:GPU\s+|CUDA\s+|video\s+)?(?:memory|VRAM)\b|"
    r"\bout[- ]of[- ]GPU[- ]RAM\b|"
    r"显存[^。，！？,.!?]{0,8}(?:占满|满了|一直涨|涨满|爆)[^。！？.!?]{0,12}(?:报错|挂了|崩溃|失败|停|卡死)", re.I)
"""A failure the person puts down to memory, in their own words (`the session crashes for memory problem`, `fails
due to insufficient GPU memory`, `getting the same memory crash`, `某张卡空间不足`: a card's space ran short), or memory
rising to its end and the run failing with it (`VRAM usage jumps to 24GB and it crashes`, `the GPU memory maxes out
and training stops`, `显存直接占满然后报错`)."""
_DENIED_INSIDE = denial(r"\b(?:no|nothing|without|nor)\b", chinese="没有?|不会")
"""A denial between the memory and the failure (`memory usage jumps at step 100 but nothing crashes`): no failure.
Not `不` alone: it is in the failure's own words (`显存不足`, memory ran short)."""


def denied_message(line: str) -> bool:
    """Whether a pasted line that reads as an OOM message is a person's sentence that denies it (`并不会像大多数训练框架
    一样出现out of memory的错误`: `GPU ... out of memory` is also Lua Torch's and CUDA 9's message): the denial in the
    clause before the words, as `said_oom` reads it."""
    found = _SAID.search(line)
    return found is not None and _NOT_SAID.search(line, 0, found.start()) is not None


_CANNOT_WITHOUT = re.compile(r"\b(?:cannot|can't|can not|couldn't|could not|unable to|impossible to)\b"
                             r"(?P<between>[^.!?:;,]{0,60}?)\bwithout\b", re.I)
"""Two negations that cancel (`I cannot generate sample images without running into OOM`): the OOM happens."""


def said_oom(line: str) -> bool:
    """Whether a line of prose says an out-of-memory error happened on the GPU (`It need to be dequantized so
    immediately gives OOM`, `i also met the OOM error in validation`, `训练时显存不足`): not a negation or a
    condition (`to avoid OOM`), not the host's memory (RAM, the OOM killer, the machine itself going down). The
    host's words count in the OOM's own sentence only: a later sentence's remedy (`offload the state dict to cpu`)
    says nothing of which memory ran out."""
    said = sentences(line)
    if any(_HOST.search(sentence) and _MEMORY_FULL.search(sentence) for sentence in said):
        return False  # another sentence says the host's memory is what filled (`The host RAM is full at 64 GB.`)
    for sentence in said:
        if _HOST.search(sentence) or _MACHINE_DOWN.search(sentence):
            continue
        sentence = _CANNOT_WITHOUT.sub(r"\g<between> and hit", sentence)
        # every naming counts, not only the first (`Fix memory fragmentation OOM after resume: ... causing OOM during
        # the all-gather`: the fix is negated, the OOM it fixes is not)
        if any(_NOT_SAID.search(sentence, 0, found.start()) is None and
               (words is _SAID or _DENIED_INSIDE.search(found.group()) is None)
               for words in (_SAID, _MEMORY_FAILED) for found in words.finditer(sentence)) or \
                _card_ran_short(cjk_spaced(sentence)):
            return True
    return False


_CARD_MEMORY = re.compile(r"\b(?:GPU|graphics|video|device|CUDA)\s+memory\b|\bVRAM\b|显存|"
                          r"\bmemory\s+(?:on|of)\s+(?:a|the|my|one|each)\s+(?:\w+\s+)?"
                          r"(?:GPU|card|[A-Z]\d{2,3}|\d{4}\s?Ti)\b|"
                          r"\b\d+\s?G(?:B|iB)?\s+(?:GPU|card)\b|\b(?:GPU|card)\s+with\s+\d+\s?G", re.I)
_RAN_SHORT = re.compile(r"\boverflow\w*|\bexceed\w*|\bnot\s+enough\b|\binsufficient\b|\btoo\s+(?:large|big)\b|"
                        r"\bconsum\w*\s+all\b|(?<!from )\b(?:ran|run|runs|running)\s+out\b|不足|不够|溢出|爆", re.I)


def _card_ran_short(sentence: str) -> bool:
    """R36: a sentence that names the card's memory and its running short, in any order (`I found the GPU memory is
    overflow`, `a comparable batch size exceeds my GPU memory`, `consumes all memory on a V100`, `prompt insufficient
    graphics memory`), not denied or conditional before the later of the two (`to avoid exceeding the GPU memory`,
    `the GPU memory never runs out`, `to keep the GPU memory from running out`)."""
    card, short = _CARD_MEMORY.search(sentence), _RAN_SHORT.search(sentence)
    return card is not None and short is not None and \
        _NOT_SAID.search(sentence, 0, max(card.start(), short.start())) is None


_MACHINE = r"(?:\b(?:computer|PC|laptop|desktop|machine|server|system|session|instance|VM|node|(?<!CUDA )kernel)\b|电脑|机器|服务器)"
_MACHINE_DOWN = re.compile(
    _MACHINE + r"[^.!?]{0,40}?(?:\b(?:crash\w*|freez\w*|froze|hangs?|hung|die[sd])\b|死机|卡死|崩溃)|"
    r"\b(?:crash\w*|freez\w*|froze|hangs?|hung)\s+(?:the\s+|my\s+|our\s+|whole\s+|entire\s+)*" + _MACHINE, re.I)
"""The machine itself going down (`the computer will crash`, `crash the session`, `服务器死机`): a GPU out of memory
raises an error in the program; only the host's memory running out takes the machine (or Colab's session) with it."""


def machine_down(text: str) -> bool:
    """Whether a sentence says the machine went down from memory (`the computer will crash due to the memory being full
    (64G)`, `Colab crashes the session for memory problem`): the host's RAM ran out, not the GPU's."""
    if "emory" not in text and "存" not in text:
        return False  # the cheap test first: this runs on every line of a log
    return any(_MACHINE_DOWN.search(sentence) and (_MEMORY_FAILED.search(sentence) or _SAID.search(sentence) or
                                                    _MEMORY_FULL.search(sentence))
               for sentence in sentences(text))


_MEMORY_FULL = re.compile(r"\b(?:memory|RAM)\s+(?:is\s+|was\s+|being\s+|gets?\s+|got\s+|becomes?\s+|became\s+)?"
                          r"(?:full|exhausted|fill(?:s|ed|ing)?(?:\s+up)?)\b|\bfill(?:s|ed|ing)?\s+up\s+(?:all\s+)?(?:the\s+|my\s+)?"
                          r"(?:memory|RAM)\b|内存\S{0,3}(?:满|不足|不够|爆)", re.I)
"""Memory said to be full (`the memory fills up`, `内存满了`): beside the machine going down, the host's."""


_STAT = r"(?!:\s*\d[\d.]*\s*[KMGT]?i?B\s*\()"
"""Not a statistic's name: XLA's BufferAssignment dump prints `total fragmentation:  136.17MiB (0.47%)` beside every
OOM it reports, a measure of its own buffer packing, not the words of someone who found the allocator fragmented."""

_CAUSES = ((FRAGMENTATION, re.compile(r"(?<!%\s)\bfragment(?:ed|ation|s)?\b" + _STAT + r"|碎片|"
                                     r"(?:expandable_segments|max_split_size_mb)"
                                     r"[^.!?]{0,80}?\b(?:fix\w*|solv\w*|resolv\w*|help\w*|work\w*|gone|disappear\w*)|"
                                     r"\b(?:no|not (?:enough|a)|lack of|large enough|largest|big enough)\s+(?:\w+\s+){0,2}"
                                     r"contiguous\b|\bcontiguous[- ](?:\w+[- ])?(?:block|chunk|region|hole|allocation|space)s?\b|"
                                     r"\b(?:although|though|even|despite|while|but|yet)\b[^.!?]{0,60}?\b(?:plenty|lots|ample|"
                                     r"\d+(?:\.\d+)?\s*(?:GB|GiB|MB|MiB|G))\b[^.!?]{0,30}?\b(?:cached|in (?:the )?(?:memory )?pool|"
                                     r"reserved but unallocated|unallocated)\b|"
                                     r"reserved[- ]but[- ]unallocated", re.I)),
           (OTHER_PROCESS, re.compile(
               r"\b(?:other|another|different|second|zombie|stale|orphan\w*|leftover|previous|dead|defunct|ghost|"
               r"background|parallel|concurrent)\s+(?:\w+\s+){0,2}"
               r"(?:process(?:es)?|programs?|jobs?|users?|applications?|apps?|sessions?|kernels?|people|ranks?|"
               r"containers?|instances?|notebooks?|terminals?|shells?|consoles?)\b|\bsome(?:one|body) else\b|"
               r"\b(?:zombie|stale|orphan\w*|leftover|dead|defunct|ghost|background|parallel|concurrent)\s+(?:\w+\s+){0,2}"
               r"(?:runs?|trainings?|experiments?|tasks?)\b|"
               # an interrupted run's children that live on (`the child processes stay alive and keep their GPU memory`)
               r"\b(?:child|sub)[- ]?process(?:es)?\b[^.!?]{0,30}?\b(?:stay\w*|remain\w*|left\b|alive|still|keep\w*|"
               r"hold\w*|occup\w*)|子プロセス[^。]{0,10}?残|子进程[^。，]{0,10}?(?:残留|没有?退出|未退出|还在)|"
               # a run (or an ML task) compared (`with the previous run batch 8 worked`) is no holder: only one still there or beside
               r"\b(?:other|another|different|second|previous)\s+(?:\w+\s+){0,2}(?:runs?|trainings?|experiments?|tasks?)\b"
               r"[^.!?]{0,40}?\b(?:still|running|alive|hold\w*|held|occup\w*|same\s+(?:GPU|card|device)|on\s+(?:the\s+)?"
               r"(?:GPU|card|device)|in\s+(?:the\s+)?background|at\s+the\s+same\s+time|simultaneous\w*)\b|"
               r"\b(?:all|every|each|\d+|two|three|four|eight|several|multiple)\s+(?:\w+\s+){0,2}(?:ranks?|process(?:es)?|"
               r"workers?)"
               r"\b[^.!?]{0,40}?\b(?:(?:share|sharing)\s+(?:the same |one |a single |the first )?(?:GPU|card|device|cuda)\b|"
               # `on`/`use` a named card: `8 processes using GPU memory` is a distributed run's ranks, one per card
               r"(?:on|onto|to|into|use|using)\s+(?:(?:the same |one |a single |the first )(?:GPU|card|device)\b|(?:GPU|card|device|cuda)"
               r"\s*:?\s*\d))|"
               r"\b(?:both|two|three|four|multiple|several|all)\s+(?:\w+\s+){0,2}(?:jobs|processes|servers|runs|"
               r"trainings|instances|containers|users|programs)\b[^.!?]{0,60}?\b(?:same|one|a single)\s+(?!per\b|for\s+each\b)"
               r"(?:\w+\s+){0,2}(?:GPUs?|cards?|devices?)\b(?!\s+(?:each|apiece)\b)|"  # not `one per GPU`, `one GPU each`
               r"\b(?:GPU|card|device|cuda)\s*:?\d{0,2}\s+(?:is|was|were|are)\s+(?:already\s+|still\s+)?(?:busy|occupied|"
               r"taken|in use by|used by)\b(?!\s+(?:me|my|this|our)\b)(?![^.!?,]{0,12}?\d+(?:\.\d+)?\s*%)|"
               # (not `the GPU is occupied on 0%`, R29: a percentage after it is the card's utilisation)
               # a restart that did not help says the memory was not someone else's (`tried restarting the runtime many
               # times without change`, neurips2019_intrus#2)
               r"(?<!tried )(?<!tried to )\brestart(?:ing|ed|s)?\s+(?:the\s+)?(?:python\s+process|kernel|runtime|"
               r"notebook|session|jupyter)\b(?![^.!?]{0,40}(?:\b(?:not|never|no|without|still)\b|n't))|"
               r"\b(?:every|each|all)\s+(?:\w+\s+)?(?:ranks?|process(?:es)?|workers?)\b[^.!?]{0,60}?\b(?:contexts?|memory|"
               r"allocat\w*)\b[^.!?]{0,30}?\b(?:on|to)\s+(?:the\s+first\s+GPU|(?:GPU|cuda|device)\s*:?\s*0)\b|"
               r"\b(?:process(?:es)?|jobs?|servers?|instances?|containers?)\b[^.!?]{0,40}?\bshar\w*\s+(?:the\s+|one\s+|a\s+)?"
               r"(?:same\s+|single\s+)?(?:GPU|card|device)\b|"
               r"(?:其他|别的|其它|别人的?)(?:进程|程序|用户|人|任务)|(?:所有|全部|每个)的?\s*(?:进程|rank|worker)[^。！？]{0,10}?"
               r"(?:跑|放|在|分配|挤)(?:到|在)?了?\s*(?:0\s*号?卡|卡\s*0|GPU\s*0|第一张卡)|僵尸进程|被[^，。,.!?！？]{0,20}占用|"
               # several processes on every card (`8 processes on each GPU`, `每张卡上面进程的数量=用了多少卡`): every
               # rank made a context on every card, each card holds the others' too (a device never set per rank)
               r"\b(?:[2-9]|\d{2,}|multiple|several|many)\s+(?:\w+\s+)?process(?:es)?\s+(?:on|per)\s+(?:each|every)\s+"
               r"(?:GPU|card|device)\b|\b(?:each|every)\s+(?:GPU|card|device)\s+(?:has|shows|runs|gets|holds|carries)\s+"
               r"(?:[2-9]|\d{2,}|multiple|several|many|all)\s+(?:\w+\s+)?process(?:es)?\b|"
               r"(?:每张|每个|每块|各)\s*(?:卡|GPU|显卡)[^。！？]{0,8}?(?:[2-9]|\d{2,}|多|几|很多|好几)\s*个\s*进程|"
               r"(?:每张|每个|每块|各)\s*(?:卡|GPU|显卡)[^。！？]{0,6}?进程的?(?:数量|个数|数)", re.I)))
_HELD_WHAT = r"(?:\s+(?:\d+(?:\.\d+)?\s*%|of|the|my|all|its|\w+(?=\s+(?:of|the|my)\b)|\w+(?=\s+\d))){0,3}?\s+(?:\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b|(?:\w+\s+)?(?:memory|VRAM|GPU|card)\b)"
_HOLDER = re.compile(
    r"\b(?:notebook|kernel|session|runtime)s?\b[^.!?]{0,40}?\bstill\s+(?:hold\w*|held|occup\w*|us(?:e|es|ing)|tak(?:e|es|ing)|"
    r"keep\w*|allocat\w*|reserv\w*)" + _HELD_WHAT + "|"
    r"\b(?:xorg|x ?server|gnome[- ]shell|kwin|compositor|(?:the\s+|my\s+)desktop|(?:the\s+|my\s+)display|gdm|lightdm|sddm|"
    r"x?wayland|display\s+manager|"
    r"window\s+manager|chrome|chromium|firefox|(?:web )?browsers?|steam|discord|"
    r"vllm|sglang|ollama|(?:inference|model|serving)\s+server)\b"
    r"[^.!?]{0,40}?\b(?:hold\w*|held|occup\w*|us(?:e|es|ed|ing)|tak(?:e|es|ing)|took|eat\w*|hog\w*|grab\w*|consum\w*)" +
    _HELD_WHAT, re.I)
"""Who else holds the card's memory, in the person's words: a notebook or its kernel still holding it after the
attempt that failed (`my jupyter notebook was still holding the memory`), the desktop's programs (`Xorg and chrome
taking 3GB of my 8GB card`); what they hold follows the verb (`still uses gradient checkpointing` holds nothing)."""
_PHANTOM = re.compile(
    r"(?:even though|although|though|but|while|yet|despite|however|and)\s*,?\s*(?:there\s+(?:is|are)\s+)?"
    r"(?:nothing|no\s+(?:\w+\s+)?(?:process(?:es)?|programs?|jobs?|one))\b(?!\s+else\b[^.!?]{0,40}\bmy\b)|"
    r"\bbefore\s+(?:I\s+|we\s+)?(?:even\s+)?(?:start\w*|run\w*|launch\w*|load\w*)\b[^.!?]{0,60}\b(?:shows?|"
    r"says?|lists?|reports?)\b|"
    r"\bafter\s+(?:I\s+|we\s+)?(?:kill(?:ed)?|stopp?(?:ed)?|exit(?:ed)?|terminat\w+|interrupt\w*|clos\w+|ctrl\W?c)\b|"
    r"\bafter\s+(?:the|my|a|its)\s+(?:\w+\s+)?(?:process|script|program|job|run|training|kernel)\s+(?:exits?|exited|"
    r"ends?|ended|finish\w*|crash\w*|dies|died|stops?|stopped|(?:is|was|gets|got)\s+killed)\b|"
    r"\buntil\s+(?:I\s+|we\s+)?(?:a\s+|the\s+)?reboot\w*\b",
    re.I)
_HELD = re.compile(r"\b(?:used|occupied|in use|taken|allocated|held|holds|holding|still|remains?|stays?)\b|占用|占着|"
                   r"\b(?:not|never)\s+(?:be(?:ing)?\s+)?(?:freed|released|returned|cleared)\b", re.I)
"""Memory held with nothing of the person's running (`nvidia-smi shows 20 GB used even though nothing is running`,
`the memory stays occupied after I killed the script`): a process the person does not see holds the card."""
_PROGRAMS = re.compile(r"^\W*(?:\[[^\]]{0,40}\]:?\s*)*(?:[\w.]*(?:Error|Exception)\b|[A-Z]\s+[\w/]+\.cc:)|Tried to allocate|"
                       r"(?:^|\s)\d{4}-\d\d-\d\d[ T]|\b(?:ERROR|WARNING|INFO)\b")
"""An OOM line that is the program's (an exception, a log record) rather than a person's sentence naming it."""
_DID_NOT = re.compile(r"\b(?:not|never|no longer)\b|n't", re.I)
"""A fix that did not work (`expandable_segments did not help`): no evidence for its cause."""
_CAUSE_HINT = re.compile(r"try setting (?:max_split_size_mb|PYTORCH_CUDA_ALLOC_CONF)|See documentation for Memory|"
                         r"If reserved (?:but unallocated )?memory is", re.I)
"""PyTorch's own advice under its message names fragmentation as a possibility, not as what happened."""


_SAID_SIZE = r"~?\s*(\d{1,6}(?:\.\d{1,3})?)\s*(GiB|GB|G|MiB|MB|M)\b"
_SAID_RESERVED = re.compile(_SAID_SIZE + r"\s+(?:(?:of|is|are|was|were|being)\s+)?reserved\b|\breserved\s*(?:memory\s+)?"
                            r"(?:of|is|was|at|:|=)?\s*" + _SAID_SIZE, re.I)
_SAID_ALLOCATED = re.compile(_SAID_SIZE + r"\s+(?:(?:of|is|are|was|were|being|actually)\s+)?(?:allocated|in use by tensors)\b|"
                             r"\ballocated\s*(?:memory\s+)?(?:of|is|was|at|:|=)?\s*" + _SAID_SIZE, re.I)
"""Sizes the person gives for the cache and for the tensors in it (`~83 GB reserved vs ~49 GB allocated`)."""


def _held_little(words: str) -> bool:
    """Whether the size a holder is said to take is under a GiB (`Chrome uses 300MB of VRAM`): a desktop's share,
    not what filled the card."""
    found = re.search(_SAID_SIZE, words, re.I)
    size = parse_size(found.group(1), found.group(2)) if found else None
    return size is not None and size < GIB


def said_account(line: str) -> str:
    """FRAGMENTATION when the person's own numbers show the cache holding far more than its tensors use (a GiB and a
    quarter of the cache unused): the memory was there, in blocks the next request could not use; '' otherwise."""
    reserved, allocated = _SAID_RESERVED.search(line), _SAID_ALLOCATED.search(line)
    if reserved is None or allocated is None:
        return ""
    held = parse_size(*[g for g in reserved.groups() if g is not None][:2])
    used = parse_size(*[g for g in allocated.groups() if g is not None][:2])
    if held is None or used is None or held < used + max(GIB, held // 4):
        return ""
    return FRAGMENTATION


_REMEDIES = (
    (FRAGMENTATION, re.compile(r"expandable[_ ]segments|max_split_size_mb|cuda_malloc_async|garbage_collection_threshold|"
                               r"XLA_PYTHON_CLIENT_ALLOCATOR", re.I)),
    (OTHER_PROCESS, re.compile(r"\breboot\w*|重启|(?:杀掉|kill\s*掉|结束)(?:了)?\S{0,6}(?:进程|程序)|(?:进程|程序)\s*(?:杀掉|kill\s*掉)|\brestart\w*\s+(?:the\s+|my\s+)?(?:machine|server|computer|pc|system|node|"
                               r"instance|vm)\b|\b(?:kill\w*|pkill|terminat\w*)\s+(?:-9\s+)?(?:the\s+|a\s+|an\s+|all\s+)?"
                               r"(?:\w+\s+){0,2}(?:process(?:es)?|python|pids?|jobs?)\b|\bset_device\b", re.I)),
    (OTHER_PROCESS, CARD_SWAP),
    (OTHER_PROCESS, CLOSED_OTHER))
"""What the person did about the OOM, and the kind it tells when it worked: an allocator setting (PyTorch's expandable
segments or split size, TensorFlow's async allocator, XLA's platform allocator) mends fragmentation; rebooting the
machine, killing a process, or setting each rank's device frees memory someone else held."""
_WORKED = re.compile(r"\b(?:fix\w*|solv\w*|resolv\w*|help(?:s|ed)?|work(?:s|ed)?|gone|go(?:es)? away|went away|"
                     r"disappear\w*|runs?\s+(?:fine|ok|through|smoothly)|ran\s+(?:fine|ok|through|smoothly)|no\s+(?:more\s+)?"
                     r"(?:OOMs?|errors?)|no longer|succe\w+|without\s+(?:any\s+)?(?:errors?|OOMs?|problems?|issues?)|anymore)\b|"
                     r"(?:does|did|will|wo)(?:n't| not)\s+(?:OOM|crash|fail)\w*|解决|好了|正常|成功|不再|不(?:会)?报错|没(?:有)?(?:再)?报错|就可以了|就行了|能跑了|跑起来了", re.I)
_FIX_FAILED = re.compile(r"\b(?:not|never|still|tried)\b|n't\b", re.I)
"""A remedy that did not work (`expandable_segments did not help`, `I tried rebooting, it still fails`)."""
_NO_MORE = re.compile(r"anymore|no longer", re.IGNORECASE)
"""The failure is over (`it doesn't OOM anymore`): its `not` tells no failed remedy."""
_ZH_FAILED = re.compile(r"还是|仍然|依然|没有?(?:解决|用|效果|改善)|不行|无效|但是?[^。！？]*(?:OOM|报错|溢出|不足)|"
                        r"\bbut\b[^.!?]*(?:\bOOM|out of memory|\berror|\bfail|\bcrash)", re.I)
"""The remedy did not work, or what worked was something else (`set_device(rank) works, but it OOMs at step 5`)."""


def remedy_cause(line: str) -> str:
    """The kind a remedy that worked tells (`I fixed it by setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`,
    `rebooting the machine fixed it`), or ''; a sentence that says it failed, or names none that worked, tells none."""
    for sentence in sentences(line):
        worked = _WORKED.search(sentence)
        if worked is None:
            continue
        # the words that say it worked carry their own negation (`doesn't OOM`): the failure is read without them
        if not _NO_MORE.search(sentence) and _FIX_FAILED.search(_WORKED.sub(" ", sentence)) or \
                _ZH_FAILED.search(sentence):
            continue
        for kind, remedy in _REMEDIES:
            if remedy.search(sentence):
                return kind
    return ""


def said_cause(line: str) -> str:
    """The OOM's cause in the person's words (`the backend ooms because of memory fragmentation`, `another
    process holds the GPU`), or '': a kind for an OOM whose message gives no numbers."""
    if is_oom_line(line) and _PROGRAMS.search(line):
        return ""  # the program's message (its own hints name causes it does not know of)
    if _PHANTOM.search(line) and _HELD.search(line):
        return OTHER_PROCESS
    if "reserved" in line.lower() and "allocated" in line.lower() and said_account(line):
        return FRAGMENTATION
    remedy = remedy_cause(line)
    if remedy:
        return remedy
    holder = _HOLDER.search(line)
    if holder and _NOT_SAID.search(line, 0, holder.start()) is None and \
            not _DID_NOT.search(holder.group()) and not _held_little(holder.group()):
        return OTHER_PROCESS
    if someone_else(line):
        return OTHER_PROCESS
    for kind, words in _CAUSES:
        found = words.search(line)
        if found and (kind != FRAGMENTATION or not _CAUSE_HINT.search(line)) and \
                _hypothetical(line, found.start()) is False and not _DID_NOT.search(found.group()):
            return kind
    return ""


_OBSERVED_IF = re.compile(r"\b(?:found|find|noticed?|observed?|realized?|discovered|learned|saw|see)\s+(?:out\s+)?"
                          r"(?:that\s+)?(?:if|whenever|when)\s+[^.!?:;,]{0,30}$", re.I)
"""A condition the person observed (`I found that if two mxnet programs run on the same GPU ...`): what they saw
happen, not a maybe."""


def _hypothetical(line: str, at: int) -> bool:
    """Whether the words before `at`, in its clause, deny or only suppose what follows (`to avoid`, `if`), unless
    the condition is one the person observed."""
    return _NOT_SAID.search(line, 0, at) is not None and _OBSERVED_IF.search(line, 0, at) is None
