"""Someone else holds the card: the person's account of memory that is not this run's, read by its structure.

A maintainer reads "another process" from a few shapes of account, whatever the words: a run that ended (stopped,
killed, crashed, Ctrl-C) whose memory was not given back, so the next run starts on a card already taken; a card
given to, or running, another program (an inference server, another framework's job, someone else's code); a
process the person found holding the memory (in nvidia-smi, in `fuser`), not the one they started. Each reader
names the two parts of its shape separately (the ended run and the memory kept; the card and the program on it;
the process found and the memory it holds), so another person's verbs and tools read the same. Pure logic:
`oom_words.said_cause` asks these after its own readers.
"""

from __future__ import annotations

import re

HINTS = ("releas", "freed", "remain", "dedicat", "running", "serving", "hosting", "found", "there", "ctrl", "switch",
         "instead", "moved", "idle", "colleague", "team", "also", "always", "already", "free", "old", "释放", "泄",
         "在跑", "跑着", "进程", "换", "同事", "也", "twice", "same time", "simultan", "concurren", "at once",
         "side by side", "同时", "开了", "clos", "quit", "exit", "shut", "idle", "共", "另", "没", "vllm", "sglang",
         "engine", "推理", "gdm", "wayland", "display", "sddm", "terminal", "console", "tmux", "from ")
"""Words one of these readers needs (the caller's cheap test before any of them is run on a line)."""
CONTEXT = re.compile(r"CUDA_VISIBLE_DEVICES|\bcuda:\d|\bbackground\b|\bstill\s+running\b|(?:这|那|一|同一)[张块]卡|卡\s*\d|"
                     r"\d\s*号?卡|\b(?:A100|H100|H200|V100|A6000|RTX\s*\d{4})s?\b|\b(?:terminals?|shells?|consoles?|tmux)\b|"
                     r"\btwice\b|\bat the same time\b|\bside by side\b|\b(?:clos|quit|shut)\w*|关掉|关闭|同时",
                     re.I)
"""Where a holder's account names the card or the machine other than by memory or GPU (`CUDA_VISIBLE_DEVICES=2
instead of 0`, `an old training still running in the background`, `这张卡`, `卡1上`), or the run doubled or another
program closed (`launched the script twice`, `closing Chrome fixed it`): the cause it gives stands only for an OOM
the text shows."""

_RUNS = (r"(?:process(?:es)?|script|program|job|run|training|trainer|kernel|task|worker|session|experiment|launcher|"
         r"container|notebook|server)s?")
_ENDED = re.compile(
    r"\b" + _RUNS + r"\b[^.!?]{0,30}?\b(?:ended|ends|finish(?:ed|es)|exit(?:ed|s)|stopp?(?:ed|s)|kill(?:ed|s)|"
    r"crash(?:ed|es)|died|dies|terminat(?:ed|es)|interrupt(?:ed|s)|abort(?:ed|s)|completed?|(?:is|was) (?:over|done))\b|"
    r"\b(?:stop(?:ped|ping)?|kill(?:ed|ing)?|interrupt\w*|terminat\w*|abort\w*|exit(?:ed|ing)?|quit(?:ting)?|"
    r"clos(?:e|ed|ing)|cancel\w*|finish(?:ed|ing)?|end(?:ed|ing)?)\s+(?:the\s+|my\s+|a\s+|an\s+|that\s+|our\s+)?"
    r"(?:\w+\s+){0,2}?" + _RUNS + r"\b|"
    r"\b(?:previous|prior|earlier|first|old|older|former|killed|stopped|crashed|dead|finished)\s+(?:\w+\s+)?" + _RUNS +
    r"\b|\bctrl\s*[-+]?\s*c\b|\^C|KeyboardInterrupt|"
    r"(?:结束|停止|中断|终止|退出|杀掉|杀死|kill\s*掉|崩溃|挂掉|失败|报错)", re.I)
"""A run that ended, however: its own verb (`the process has ended`, `训练中断后`), the person's act (`I forcibly
stop the training process`, `Ctrl-C`), a run named as past (`the memory of the previous run`)."""
_NOT_YET = re.compile(r"(?:\b(?:until|till|unless|before|once|when)\s+(?:\w+\s+){0,3}|直到\S{0,6})$", re.I)
"""The end is a condition of release, not an event (`PyTorch keeps the cache until the process exits`): PyTorch's
caching allocator is described so in every fragmentation thread."""
_KEPT = re.compile(
    r"\b(?:memory|VRAM)\b[^.!?]{0,60}?(?:\b(?:not|never|no longer)\b|n't)\s+(?:\w+\s+){0,2}?(?:released|freed|"
    r"returned|cleared|reclaimed|cleaned|deallocated|given back)\b|"
    r"\b(?:memory|VRAM)\b[^.!?]{0,20}?\b(?:remains?|remained|stays?|stayed|still|kept|keeps? being)\s+(?:\w+\s+)?"
    r"(?:occupied|used|in use|held|allocated|reserved|taken|full|busy)\b|"
    r"\b\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b[^.!?]{0,20}?\b(?:still|remains?|stays?)\s+(?:in use|used|occupied|held|"
    r"allocated|reserved|taken)\b|"
    r"\b(?:still|keeps?|kept|continues? to|continued to)\s+(?:hold\w*|occup\w*|us(?:e|es|ing)|tak(?:e|es|ing)|"
    r"reserv\w*)\s+(?:up\s+)?(?:\w+\s+){0,3}?(?:memory|VRAM|\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b)|"
    r"(?:显存|内存|GPU|卡)[^，。！？,]{0,12}(?:没有?|未|不|无法|没法|没能)(?:能|会)?(?:被)?(?:释放|清空|回收|清理)|"
    r"(?:显存|内存)[^。！？]{0,6}(?:泄漏|泄露)|(?:仍然|依然|还是?|一直|仍)\s*(?:被)?(?:占用|占着|在占|占据)", re.I)
"""The memory kept (`the GPU memory remains occupied`, `was not released`, `显存没有释放`): said of it, not of a
release that happens (`the memory is released`); in Chinese with a modal too (`显存仍不会释放`, `显存没法释放`: it
cannot or will not be released)."""


def left_held(line: str) -> bool:
    """Whether the line says a run that ended kept its memory (`even though the process has ended, the GPU memory
    remains occupied`, `the memory is not released if I stop the training with Ctrl-C`, `训练中断后显存没有释放`):
    the next run starts on a card someone else's process holds."""
    if not _KEPT.search(line):
        return False
    return any(_NOT_YET.search(line, 0, ended.start()) is None for ended in _ENDED.finditer(line))


_OTHER_PROGRAM = (r"(?:vllm|sglang|ollama|tgi|triton|tensorflow|tf|keras|jax|paddle\w*|mxnet|caffe|"
                  r"(?:inference|serving|model|rollout|generation|api)\s+(?:server|engine|service)s?|"
                  r"(?:an?other|other|someone(?:'s| else's)?|somebody(?:'s| else's)?|a colleague's|different|separate)"
                  r"\s+(?:\w+\s+){0,2}?(?:jobs?|process(?:es)?|programs?|trainings?|models?|servers?|code|tasks?|"
                  r"experiments?|users?))")
_GIVEN_CARD = re.compile(
    r"\b(?:GPU|card|device|cuda)s?\s*:?\s*#?\d{0,2}\b[^.!?]{0,20}?\b(?:(?:is|was|are|were)\s+)?(?:already\s+|still\s+|"
    r"currently\s+)?(?:runs|running|serves|serving|hosts|hosting|busy with|dedicated\s+(?:solely\s+|only\s+|"
    r"entirely\s+|exclusively\s+)?to|reserved\s+(?:solely\s+|only\s+)?for|set aside for|assigned to)\s+"
    r"(?:the\s+|an?\s+)?" + _OTHER_PROGRAM + r"\b|"
    r"\bthe\s+(?:vllm|sglang|ollama|inference|serving|rollout|generation|tensorflow|tf)(?:'s)?\s+(?:GPU|card|device)s?\b|"
    r"(?:GPU|显卡|卡)\s*\d{1,2}\s*(?:号卡?)?\s*(?:上)?\s*(?:是|有|被)\s*(?!我|自己)[\w ]{1,16}?\s*(?:在跑|正在跑|跑着|在用|占着)",
    re.I)
"""A card given to another program (`GPU 1 dedicated solely to vLLM`, `the OOM is on the vLLM GPU`, `GPU 0 is
running someone else's job`, `gpu 0 是tf 在跑的代码`): what fills it is not this run."""
_MEMORY = re.compile(r"memory|VRAM|(?<![A-Za-z])OOM|显存|内存|爆", re.I)


def given_card(line: str) -> bool:
    """Whether the line places the memory on a card another program runs on: a card named for the program
    beside words about its memory, or a numbered card said to run another program's code."""
    found = _GIVEN_CARD.search(line)
    return found is not None and (bool(_MEMORY.search(line)) or bool(re.search(r"\d", found.group())))


_FOUND = (r"\b(?:there\s+(?:is|are|was|were)\s+|(?:found|find|see|saw|seeing|notic\w+|discover\w*|spott\w+)\s+(?:that\s+|"
          r"out\s+that\s+)?(?:there\s+(?:is|are|was|were)\s+)?|(?:nvidia-smi|it|top|htop|fuser)\s+(?:shows?|showed|lists?|"
          r"listed)\s+)")
_HOLDS = (r"(?:\s+(?:called|named)\s+\S+)?[^.!?]{0,40}?\b(?:%s)\s+(?:up\s+)?(?:\w+\s+){0,3}?(?:memory|VRAM|GPU|card|"
          r"\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b)")
_FOUND_PROCESS = re.compile(
    _FOUND + r"(?:an?|some|other|another|strange|unknown|extra|mysterious|zombie|orphan\w*|leftover|stray)\s+"
    r"(?:\w+\s+){0,2}?process(?:es)?\b" + _HOLDS % r"hold\w*|occup\w*|tak(?:e|es|ing)\s+up|took\s+up|eat\w*|hog\w*|"
    r"consum\w*|us(?:e|es|ing)|grab\w*" + "|" +
    _FOUND + r"(?:\d+|several|many|multiple|more\s+and\s+more|lots\s+of|a\s+lot\s+of|two|three|a\s+few)\s+"
    r"(?:\w+\s+){0,2}?process(?:es)?\b" + _HOLDS % r"hold\w*|occup\w*|tak(?:e|es|ing)\s+up|took\s+up|eat\w*|hog\w*|"
    r"consum\w*|grab\w*", re.I)
"""A process the person found holding the card (`nvidia-smi shows a process called X using 9 GB`, `more and more
processes are taking up the GPU`): found, so not the one they started. A count of processes merely using the GPU
(`I see 8 processes using GPU memory`) is a distributed run's ranks: a count needs a verb of taking."""
_FOUND_PROCESS_ZH = re.compile(r"(?:发现|看到|有)\s*(?:个|一个|几个|很多|多个|\d+\s*个)[^，。！？]{0,30}?进程[^。！？]{0,30}?"
                               r"(?:(?:显存|内存|GPU|所有|全部)[^。！？]{0,8}(?:占|吃)|(?:占|吃)[^。！？]{0,4}(?:显存|内存|GPU))")
"""The same in Chinese (`发现有个X进程，把所有内存基本全吃了`): 内存 is said of the card's memory beside nvidia-smi."""


def found_holder(line: str) -> bool:
    """Whether the line tells of a process the person found holding the card's memory."""
    return bool(_FOUND_PROCESS.search(line) or _FOUND_PROCESS_ZH.search(line))


_AT_START = (r"\b(?:before|when)\s+(?:I\s+|we\s+)?(?:even\s+)?(?:start\w*|launch\w*|run(?:ning)?|load\w*|began|begin\w*)\b|"
             r"\bat\s+(?:the\s+)?start\b|\bbefore\s+(?:the\s+|my\s+)?(?:training|script|run|job)\s+(?:even\s+)?"
             r"(?:start\w*|began|begins)\b")
_AT_START_RX = re.compile(_AT_START, re.I)
_HELD_ALREADY = re.compile(
    r"\balready\s+(?:\w+\s+){0,3}?(?:\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b|most\s+of|half\s+of|\d+\s*%)[^.!?]{0,30}?\b(?:used|"
    r"in use|occupied|allocated|taken|reserved|full)\b|"
    r"\bonly\s+(?:about\s+|~\s*)?\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b[^.!?]{0,20}?\b(?:free|available|left)\b", re.I)
_HELD_BEFORE_ZH = re.compile(
    r"(?:还没|未|没有?)(?:开始|启动|运行|跑)[^。！？]{0,16}?(?:就|已经)[^。！？]{0,10}?(?:占|用了|被占|满)|"
    r"(?:启动|运行|开始|训练|跑)之?前[^。！？]{0,16}?(?:显存|GPU|卡)[^。！？]{0,10}?(?:已经|就)[^。！？]{0,8}?(?:占|用了|被占|满)",
    re.I)
"""Memory held on the card before this run began (`before launching, nvidia-smi already reported 30GB used`, `only
2 GB free when I launched the script`, `还没开始训练显存就占了10G`): what held it is not this run."""


def started_on_held(line: str) -> bool:
    """Whether the line says the card's memory was held before the run began: in one sentence, the start and the
    memory already held (or only a little free) then."""
    if _HELD_BEFORE_ZH.search(line):
        return True
    return any(_AT_START_RX.search(sentence) and _HELD_ALREADY.search(sentence)
               for sentence in re.split(r"[.!?]\s", line) if "already" in sentence or "only" in sentence)


_SHARED_WITH = re.compile(
    r"\b(?:someone|somebody|colleagues?|co-?workers?|labmates?|teammates?|classmates?|another\s+team|other\s+teams?|"
    r"other\s+people|my\s+(?:advisor|supervisor|friend))\b[^.!?]{0,40}?\b(?:same|that|this|my|our|the)\s+(?:GPU|card|"
    r"device)s?\b|"
    r"\b(?:process|program|server|app\w*|notebook|kernel|service|daemon|job|tensorboard|profiler)\b[^.!?]{0,30}?"
    r"\b(?:was|were|is|are)\s+also\s+(?:us\w+|running\s+on|on|hold\w*|occup\w*)\s+(?:the\s+|my\s+)?(?:same\s+)?"
    r"(?:GPU|card|device)s?\b|"
    r"(?:同事|师兄|师姐|师弟|师妹|同学|别人|其他人)[^。！？]{0,12}?(?:用|跑|占)[^。！？]{0,6}?(?:显卡|卡|GPU)", re.I)
"""Another person or program on the card (`someone on my team was training on the same GPU`, `a profiler process
was also using the GPU`, `同事也在用这张卡`)."""
_STILL_RUNNING = re.compile(
    r"\b(?:old|older|previous|earlier|forgotten|stuck|hung|hanging|lingering|runaway|stray)\s+(?:\w+\s+){0,2}?"
    r"(?:trainings?|runs?|jobs?|process(?:es)?|experiments?|scripts?|instances?|copy|copies)\b[^.!?]{0,40}?"
    r"(?:\bstill\s+(?:running|alive|active|there|going|holding|using|in\s+memory)\b|\bhanging\s+around\b|"
    r"\b(?:running|alive)\s+in\s+the\s+background\b|\b(?:held|holds|holding|occupying|hogging|eating)\b)|"
    r"(?:kernel|notebook|session|process|training|run|job|script|shell|terminal|instance)s?\s+from\s+(?:yesterday|before|"
    r"earlier|last\s+\w+|the\s+(?:last|previous|first|earlier|other)\s+\w+|a\s+previous\s+\w+)\b[^.!?]{0,30}?\b(?:still|was|"
    r"were|is|are)\s+(?:still\s+)?(?:running|alive|open|there|holding|using|active)\b|"
    r"(?:之前|上次|上一次|以前|旧)的?[^，。！？]{0,8}?(?:进程|程序|训练|任务)[^。！？]{0,10}?(?:还在|仍在|没有?(?:结束|退出|关))",
    re.I)
"""A run the person started before and forgot, still alive (`an old python process hanging around that held 20GB`,
`ps aux showed an old training still running in the background`, `my jupyter kernel from yesterday was still
running`, `之前的训练进程还在跑`)."""


def still_running(line: str) -> bool:
    """Whether the line says an earlier run is still alive or holding the card."""
    return bool(_STILL_RUNNING.search(line))


_FIRST_CARD = r"(?:the\s+first\s+(?:GPU|card|device)|(?:GPU|cuda|card|device)\s*[:#]?\s*0)\b"
_SOME_MEMORY = (r"(?:(?:a\s+)?(?:small|little|tiny)\s+(?:part|portion|bit|amount)|some|part|portion|(?:small|little|tiny|extra)"
                r")\s+(?:of\s+(?:the\s+)?)?(?:\w+\s+)?(?:memory|VRAM|contexts?|process(?:es)?)\b|"
                r"\b\d+(?:\.\d+)?\s*(?:MiB|MB|M|GiB|GB)\b")
_STRAY_ON_FIRST = re.compile(
    r"\b(?:always|also|still|however|but|extra|unexpected\w*|stray)\b[^.!?]{0,40}?(?:" + _SOME_MEMORY + r")[^.!?]{0,40}?"
    r"\b(?:on|in|to|onto)\s+" + _FIRST_CARD + "|"
    r"(?:" + _SOME_MEMORY + r")[^.!?]{0,40}?\b(?:always|also|still)\b[^.!?]{0,30}?\b(?:on|in|to|onto)\s+" + _FIRST_CARD + "|"
    r"(?:卡|GPU|显卡)\s*0\s*(?:号卡)?\s*上?[^。！？]{0,10}?(?:也|还|总|一直)[^。！？]{0,10}?(?:显存|占用|进程)|"
    r"(?:传|放|跑|分配)到\s*(?:卡|GPU|显卡)\s*0", re.I)
"""Part of the run's memory on the first card, though it was pointed at another (`there always a small part of the
memory in gpu 0`, `about 500MB is also allocated on cuda:0`, `卡0上也有一部分显存被占用`): a CUDA context made on the
default card, which the machine's other work fills; the fix is to set each process's device."""


_ON_FIRST = re.compile(_FIRST_CARD + r"|(?:卡|GPU|显卡)\s*0(?!\d)|(?<!\d)0\s*号卡|第一张卡", re.I)


def names_first_card(line: str) -> bool:
    """Whether the text that gave the cause names the first card (GPU 0, cuda:0, 卡0): the default card every
    process opens a context on unless it sets its own device."""
    return bool(_ON_FIRST.search(line))


def stray_on_first(line: str) -> bool:
    """Whether the line says part of the run's memory lands on the first card besides the one it was given."""
    return bool(_STRAY_ON_FIRST.search(line))


CLOSED_OTHER = re.compile(
    r"\b(?:clos\w*|quit\w*|exit\w*|shut\w*\s+down|kill\w*)\s+(?:the\s+|my\s+|all\s+|every\s+)?(?:other\s+|another\s+|"
    r"open\s+|running\s+)?(?:\w+\s+)?(?:notebooks?|apps?|applications?|programs?|browsers?|chrome|firefox|games?|tabs?|"
    r"kernels?|instances?|webui|servers?|jupyter|ide|vs\s?code|steam|discord)\b|"
    r"(?:关掉|关闭|关了|退出)[^，。！？]{0,10}(?:程序|软件|浏览器|游戏|notebook|jupyter|kernel|窗口|实例)", re.I)
"""A fix that worked by closing another program on the machine (`closing Chrome and the other notebook fixed it`,
`关掉其他程序就好了`): it held the card."""
CARD_SWAP = re.compile(
    r"^(?![^\n]*(?:\bbigger|\blarger|\bmore\s+(?:GPU\s+)?memory|\bA100|\bH100|\bH200|\b\d+\s*G(?:i?B)?\b|更大|大显存))"
    r"[^\n]*?(?:\b(?:switch\w*|mov\w*|chang\w*|us(?:e|ed|ing)|pick\w*|choos\w*|chose|select\w*|run\w*|ran|went)\s+"
    r"(?:it\s+|the\s+\w+\s+)?(?:to\s+|on\s+|onto\s+|with\s+)?(?:a\s+|an\s+|the\s+)?(?:different|another|other|idle|free|"
    r"empty|unused|spare)\s+(?:GPU|card|device)s?\b|"
    r"\b(?:switch\w*|mov\w*|chang\w*)\s+(?:it\s+|the\s+\w+\s+)?(?:to|onto)\s+(?:GPU|cuda|device|card)\s*:?\s*\d|"
    r"(?:CUDA_VISIBLE_DEVICES\s*=\s*|GPU\s*|cuda:|device\s*|card\s*)\d{1,2}\s+instead\s+of\b|"
    r"换(?:了|成|到)?\s*(?:一张|另一张|另外一张|别的|其他的?|其它的?|空闲的?|一块|另一块)\s*(?:显)?卡|换到\s*(?:GPU|卡)\s*\d|换到\s*\d\s*号?卡)", re.I)
"""A fix that worked by choosing another card of the same machine (`switching to GPU 1 fixed it`, `it works with
CUDA_VISIBLE_DEVICES=2 instead of 0`, `换了一张卡就好了`): the first card was held by something else. A bigger
card (`an A100 80GB`) is no such fix: it says the run needs more memory."""


_DOUBLED = re.compile(
    r"\b(?:two|2|three|multiple|several|both)\s+(?:\w+\s+){0,2}?(?:instances|copies|servers|sessions|kernels|notebooks)\b"
    r"[^.!?]{0,40}?\b(?:at the same time|simultaneous\w*|concurrent\w*|in parallel|at once|side by side)\b|"
    r"\b(?:launch\w*|start\w*|ran|running|open\w*|execut\w*)\s+(?:the\s+|my\s+|it\s+|this\s+)?(?:\w+\s+){0,2}?"
    r"twice\b(?!\s+(?:a|per|each|every)\b)|"
    r"同时(?:跑|运行|开)了?\s*(?:两|2|多|几)个|开了\s*(?:两|2|多|几)个[^。！？]{0,8}(?:程序|训练|进程|实例|任务|窗口)", re.I)
"""The run doubled (`I had accidentally launched the script twice`, `two instances of the webui running at the
same time`, `同时跑了两个训练`): the second copy finds the first holding the card. Processes or runs in parallel are
a distributed run's ranks (one per GPU) unless one card is named (`_CAUSES` in oom.py reads that)."""


_CARDS = r"(?:GPUs?|cards?|devices?|A100s?|H100s?|H200s?|V100s?|A6000s?|\d{4}\s*Ti|\d{4})"
_SHARED_CARD = re.compile(
    r"\bshar(?:e|es|ed|ing)\s+(?:the\s+|this\s+|that\s+|my\s+|our\s+|a\s+|one\s+|its\s+)?(?:\w+\s+)?" + _CARDS +
    r"\s+with\b|\b" + _CARDS + r"\s+(?:is|are|was|were|gets?|got)\s+(?:also\s+)?shared\s+(?:with|between|among|by)\b|"
    r"(?:共用|共享|同用|合用)(?:着)?\s*(?:一张|同一张|一块|同一块|这张|那张)?\s*(?:显卡|卡|GPU)|(?:显卡|GPU)[^。！？]{0,6}(?:共用|共享)|"
    r"另(?:一|外)(?:个|一个)?(?:人的?)?(?:进程|程序|用户|任务|服务)", re.I)
"""The card shared with someone (`I'm sharing the GPU with my labmate`, `the A100 is shared between several
students`, `两个程序共用一张显卡`, `另一个程序占用了显存`). A shared server or cluster is not a shared card."""
_IDLE = re.compile(r"\b(?:with|while|when)\s+nothing\s+(?:is\s+|was\s+)?(?:running|launched|loaded)\b|"
                   r"\b(?:at|while|when)\s+idle\b|\bbefore\s+(?:I\s+|we\s+)?(?:even\s+)?(?:launch|start|ran|run|load|open)\w*\s+"
                   r"anything\b|\bbefore\s+anything\s+(?:is\s+|was\s+)?(?:running|loaded|launched)\b|"
                   r"没有?(?:运行|跑|启动|开)(?:任何)?\S{0,4}?(?:程序|任务|进程|东西|代码)|什么都没(?:跑|运行|开)", re.I)
_IDLE_HELD = re.compile(r"\b\d+(?:\.\d+)?\s*(?:[GM]i?B|G|M)\b|\b(?:used|in use|occupied|taken|allocated|held)\b|占|用了",
                        re.I)
"""Memory held while nothing of the person's runs (`the GPU shows 10GB used with nothing running`, `memory usage is
10GB at idle`, `没有运行任何程序，显存却被占了10G`); `nothing else is running` rules a neighbour out and is not read."""


def idle_held(line: str) -> bool:
    """Whether the line tells of the card's memory held while nothing of the person's ran."""
    return bool(_IDLE.search(line) and _IDLE_HELD.search(line))


_ENGINE = r"(?:vllm|sglang|tgi|lmdeploy|(?:inference|rollout|generation|serving)\s+(?:engine|server|worker)s?|the\s+engine)"
_ENGINE_LATE = re.compile(
    r"\b(?:before|when|while|once|by the time)\s+(?:the\s+)?" + _ENGINE + r"\s+(?:\w+\s+)?(?:starts?|started|starting|"
    r"launch\w*|loads?|loaded|loading|initiali[sz]\w*|inits?|boots?)\b(?!,?\s+(?:it|this|vllm|sglang|the\s+engine)\b)"
    r"[^.!?]{0,80}?\b(?:occupy\w*|occupie[sd]|hold\w*|held|tak(?:e|es|ing)\s+up|took\s+up|loads?|loaded|loading|"
    r"already\s+\w+)\b[^.!?]{0,50}?(?:memory|VRAM|"
    r"\b\d+(?:\.\d+)?\s*(?:[GM]i?B|G)\b)|"
    r"\b" + _ENGINE + r"\b[^.!?]{0,60}?\b(?:because|since|as|after)\b[^.!?]{0,60}?\balready\s+(?:occup\w*|hold\w*|holds|"
    r"tak(?:e|es|ing)|took|uses?|using|allocated|loaded)\b|"
    r"(?:vllm|sglang|推理引擎|推理服务)[^，。！？]{0,6}(?:启动|加载|初始化)(?:之?前|时)[^。！？]{0,30}?(?:占|加载|用了)", re.I)
"""An inference engine started on a card another part of the job already held (`Before vLLM starts, Rollout Worker
loads the FSDP model, occupying redundant GPU memory`, `when the SGLang engine starts the actor already holds 30GB`,
`vllm fails to init because the training model is already taking most of the memory`): what fills the card when
the engine asks for its share is not the engine."""


def shared_with(line: str) -> bool:
    """Whether the line puts another person or program beside the run on its card."""
    return bool(_SHARED_WITH.search(line) or _DOUBLED.search(line) or _SHARED_CARD.search(line) or
                _ENGINE_LATE.search(line))


_READERS = (
    (("releas", "freed", "return", "clear", "reclaim", "clean", "dealloc", "given back", "remain", "stay", "still",
      "kept", "keep", "continu", "释放", "清空", "回收", "清理", "泄", "占"), left_held),
    (("gpu", "card", "device", "cuda", "卡"), given_card),
    (("process", "进程"), found_holder),
    (("already", "only", "还没", "未", "没", "前"), started_on_held),
    (("some", "colleague", "worker", "mate", "team", "people", "advisor", "supervisor", "friend", "also", "同事", "师",
      "同学", "别人", "其他人", "twice", "same time", "simultan", "concurren", "parallel", "at once", "side by side",
      "同时", "开了", "shar", "共", "同用", "合用", "另", "vllm", "sglang", "tgi", "lmdeploy", "engine", "server",
      "worker", "推理"), shared_with),
    (("nothing", "idle", "anything", "没", "什么都"), idle_held),
    (("old", "previous", "earlier", "forgotten", "stuck", "hung", "hanging", "lingering", "runaway", "stray", "之前",
      "上次", "以前", "旧", " from "), still_running),
    (("0",), stray_on_first),
)
"""Each reader with the words it cannot match without (a cheap test first: prose lines of a long log pass here)."""


def someone_else(line: str) -> bool:
    """Whether the person's line gives any of the accounts of another holder above."""
    lowered = line.lower()
    return any(any(word in lowered for word in words) and reader(line) for words, reader in _READERS)
