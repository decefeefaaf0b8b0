"""An exception named in the person's words when the text holds no traceback (`when I reach trainer.train() I get a
key error from the data collator`, `it throws an AttributeError in the collator`, or its line quoted in a sentence:
``I get `TypeError: ...` ``): the run failed on it, as a maintainer reads the thread. Not a memory, CUDA or NCCL error
(their readers own those), not one that is gone (`I no longer get the KeyError`), not a condition (`if you get a
ValueError, ...`). Pure: a line in, the exception (its type and the line) out."""

from __future__ import annotations

import re

from loratui.logic.advisor.advice import ERROR, Advice
from loratui.logic.fmt import clip, quoted
from loratui.logic.tracebacks import ERRORS_MODULE_TYPE
from loratui.logic.word_gate import WordGate

_VERB = (r"(?:get|gets|got|getting|throws?|threw|thrown|throwing|raises?|raised|raising|hits?|hitting|"
         r"encounter(?:s|ed|ing)?|receiv(?:e|es|ed|ing)|run into|ran into|running into|(?:fails?|failed|failing|"
         r"crash(?:es|ed|ing)?|dies|died|stops?|stopped) with|end(?:s|ed)? (?:up )?with|gives?|gave|giving)")
_VERB_NEEDS = WordGate("get", "got", "throw", "threw", "rais", "hit", "encounter", "receiv", "into", "with", "give",
                       "gave", "giving")
"""A word every match of _VERB holds (`into` for run/ran/running into, `with` for fails/stops/ends with): _SAID and
_UNTYPED start with it, and a line without one (a CUDA OOM message: its type names an error) skips both."""
_KIND = (r"(?P<type>[A-Z][a-z]\w*(?:Error|Exception)|(?P<words>(?:key|type|value|attribute|index|import|name|assertion|"
         r"recursion|file ?not ?found|module ?not ?found|not ?implemented|permission|unicode ?(?:decode|encode)?|"
         r"json ?decode|pickling|zero ?division)[ _-]?error))\b(?!\s*\()")
"""The exception's type, in Python's spelling or in words (`a key error`); not a call (`raise ValueError(...)`: code)."""
_SAID = re.compile(r"\b" + _VERB + r"\s+(?:an?|the|this|that|a weird|a strange|an unexpected|the following|the same)?\s*"
                   + _KIND, re.I)
_CANONICAL = {name.lower(): name for name in (
    "KeyError", "TypeError", "ValueError", "AttributeError", "IndexError", "ImportError", "NameError", "AssertionError",
    "RecursionError", "FileNotFoundError", "ModuleNotFoundError", "NotImplementedError", "PermissionError",
    "UnicodeError", "UnicodeDecodeError", "UnicodeEncodeError", "JSONDecodeError", "PicklingError",
    "ZeroDivisionError")}
"""`key error`, `keyerror`, `file not found error` as Python spells them."""
_OWNED = re.compile(r"(?<!shared )memory|cuda|cudnn|cublas|nccl|timeout|oom|nan\b", re.I)
"""Types other readers own: the memory's, CUDA's, the collectives'. Not a kernel's shared memory (Triton's
`OutOfResources: out of resource: shared memory`): no memory reader reads it."""
_GONE = re.compile(r"\b(?:no longer|not anymore|anymore|don'?t|doesn'?t|didn'?t|did not|do not|does not|never|"
                   r"used to|fixed|solved|resolved|went away|goes away|avoid\w*|prevent\w*|instead of)\b|"
                   r"\b(?:if|whether|unless|in case)\b[^.!?]{0,30}$", re.I)
"""Words before the verb that say the error is gone, avoided or only supposed."""
_GONE_AFTER = re.compile(r"\b(?:(?:is|was|are|were|has|have)\s+(?:now\s+)?(?:gone|fixed|solved|resolved)|went away|"
                         r"goes away|disappear\w*|no longer|(?:not\s+)?anymore)\b", re.I)
"""Words after a quoted error, in its sentence, that say it is gone (`I saw `ValueError: ...` but it is gone`)."""
_CLAUSE_END = re.compile(r"[.!?;]\s")


def gone_before(line: str, at: int) -> bool:
    """Whether the clause up to `at` says the error there is gone, avoided or only supposed (`_GONE`): the one test
    of it for every reader of errors said in prose (advisor/died.py's too)."""
    return _GONE.search(_CLAUSE_END.split(line[:at])[-1]) is not None


def _typed(group: str) -> str:
    """An exception's type (named `group`) and the colon after it, as Python prints them."""
    return rf"(?P<{group}>(?:[A-Za-z_]\w*\.){{0,6}}[A-Z]\w*(?:Error|Exception)|{ERRORS_MODULE_TYPE})\s*[:：]\s*"


_ANNOUNCED = re.compile(r"error|exception|\b(?:got|get|gets|getting|gives?|gave|throws?|threw|raised?|raises|"
                        r"shows?|showed)\b|报错|错误|出错|エラー", re.I)
"""Words just before a double-quoted exception that say the run gave it (`it give an Error"ImportError: ..."`), not
that the person looked it up (`I searched for "ValueError: ..."`). A quote that opens its line needs none: it is the
message pasted on a line of its own, as the sentence before it introduced it."""
_PATHS = re.compile(r"\S*/\S*")
"""File paths, whose words are no subject of the error (`.../causal_conv1d_cuda.cpython-310-x86_64-linux-gnu.so`)."""
_QUOTED = re.compile(r"`\s*" + _typed("type") + r"(?P<msg>[^`]{3,})`|[\"“]\s*" + _typed("type2") +
                     r"(?P<msg2>[^\"”]{3,})(?:[\"”]|$)")
"""An exception line quoted inside a sentence, as Python prints it (``I get this error: `TypeError: forward() got an
unexpected keyword argument 'labels'` ``, `it give an Error"ImportError: ... undefined symbol: ..."`): the run raised
it, as a quote on a line of its own would say. A double quote may close on the next line (a long message pasted
whole)."""


def said_raised(line: str) -> tuple[str, str] | None:
    """(the exception's type, the line) when the line says the run raised it, else None."""
    if len(line) > 2000 or "rror" not in line and "xception" not in line:
        return None
    quote = _QUOTED.search(line) if "`" in line or '"' in line or "“" in line else None
    if quote is not None and quote.group("type2") and line[:quote.start()].strip() and \
            not _ANNOUNCED.search(line[max(0, quote.start() - 40):quote.start()]):
        quote = None  # a double quote is looser than code: only after words that say the run gave it
    if quote is not None and not _OWNED.search(_PATHS.sub(" ", quote.group())) and \
            not gone_before(line, quote.start()) and not _GONE_AFTER.search(_CLAUSE_END.split(line[quote.end():])[0]):
        return (quote.group("type") or quote.group("type2")).rsplit(".", 1)[-1], quoted(line)
    for found in _SAID.finditer(line) if _VERB_NEEDS.passes(line) else ():
        kind = found.group("type") or found.group("words")
        if _OWNED.search(kind):
            continue
        if gone_before(line, found.start()):
            continue
        if found.group("words"):
            kind = _CANONICAL.get(re.sub(r"[ _-]", "", kind.lower()), kind)
        return kind, quoted(line)
    return None


_UNTYPED = re.compile(r"\b" + _VERB + r"\s+(?:an?|the|this|that|the following|the same|some)?\s*(?:\w+\s+){0,2}?"
                      r"(?:error|exception)s?\b[^.!?:：]{0,80}[:：]\s*(?:```\w*)?\s*$", re.I)
"""A sentence that says an error came and introduces its message, which the paste goes on with (`... and got an error
complaining about no loss in the outputs:`, `I get the following error:`)."""
_NOT_MESSAGE = re.compile(r"warn|^\W*(?:\$|>>>|pip\b|python\b|conda\b|#)|^\s*[\[{]|\|", re.I)
"""What an introduced error's message is not: a warning, a command or prompt, a printed record, a bar."""


def introduces_error(line: str) -> bool:
    """Whether the person's line says an error came and introduces its message on the lines after it."""
    found = _UNTYPED.search(line) if len(line) < 500 and (":" in line or "：" in line) and _VERB_NEEDS.passes(line) \
        else None
    return found is not None and not gone_before(line, found.start())


def introduced_message(intro: str, line: str) -> tuple[str, str] | None:
    """The error the person introduced, from the first line of its message (no type in it): the program's own
    sentence (`The model did not return a loss from the inputs, only the following keys: logits.`); None when the
    line is no such message (a warning, a command, a record, another reader's memory or CUDA error)."""
    text = line.strip().strip("`").strip()
    if not text or len(text) > 600 or _NOT_MESSAGE.search(text) or _OWNED.search(text):
        return None
    # the message is the evidence, not the sentence that announced it (`It gives this error:`)
    return f"the error quoted: \"{clip(text, 120)}\"", quoted(text)


NAMED = "(named in the text, no traceback in it)"
"""What the title of an exception only named in words says after its type (failure.read_raised tells the two apart)."""


def said_advice(kind: str, line: str, step: int) -> Advice:
    """The exception the person named, with no traceback to read: name it, and ask for what says where."""
    return Advice("exception", ERROR, f"The run failed on {kind} {NAMED}: the "
                  "traceback's last frames say where it was raised and with what key, attribute or value",
                  [line, "next: paste the whole traceback (python's output from 'Traceback (most recent call "
                   "last)' to the error line)"], {}, step)
