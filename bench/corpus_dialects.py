"""The doctor on the corpus's dev records, as they are and wrapped in the dialects of where text is copied from.

A log reaches `loratui doctor` through a launcher, a logger, a container runtime or a forum, each of which wraps the
same lines its own way; the doctor should read the same text the same way however it was pasted (issue 23). For every
dev record of `tests/data/real/*.jsonl` (the sealed split is dropped before any text is touched: never wrapped,
written or read), this writes the text as it is and under each wrapping to a file under the record's own name, and
scores `loratui.commands.doctor.diagnose` on it with `tests/test_corpus.py`'s `top_category`, with the word model's
guess off (the rules alone) and on (what `loratui doctor FILE` answers).

    python bench/corpus_dialects.py                    # every dev record, every wrapping (about 4 min on 2 cores)
    python bench/corpus_dialects.py --sample 300       # 300 dev records drawn with a fixed seed (0)
    python bench/corpus_dialects.py --wrap torchrun crlf --changed   # some wrappings, and the records they change

Per wrapping it prints how many dev records keep their unwrapped answer and how many are right, beside the unwrapped
figures. Records read as structured files (`.json`: a trainer_state.json, `.ipynb`: a notebook) are left out: they
are parsed, not pasted as lines, so a line wrapping only makes them unreadable.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from loratui.logic.clauses import CJK, cjk_spaced  # noqa: E402  (the reader's own spacing)
STRUCTURED = (".json", ".ipynb")
ERROR_WORD = ("Error", "error")


def corpus_module():
    """tests/test_corpus.py, loaded by path (tests/ is not a package): its records and scorer are the test's own."""
    spec = importlib.util.spec_from_file_location("corpus_test", ROOT / "tests" / "test_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def every_line(prefix: Callable[[int], str], blank: Callable[[int], str] | None = None) -> Callable[[str], str]:
    """A wrapping that puts `prefix(n)` before the n-th line (0-based), blank lines included (`blank(n)` there when
    the tool writes something else before an empty line)."""
    def wrap(text: str) -> str:
        lines = text.split("\n")
        return "\n".join((blank or prefix)(n) + line if not line.strip() else prefix(n) + line
                         for n, line in enumerate(lines))
    return wrap


def clock(n: int) -> str:
    """A time of day that moves on with the line: a real log's timestamps differ from line to line."""
    return f"12:{n // 60 % 60:02d}:{n % 60:02d}"


SENTENCE = "I get this when I run the training script:\n\n"
_CJK_GAP = re.compile(f"(?<=[{CJK}]) +(?=[A-Za-z0-9])|(?<=[A-Za-z0-9]) +(?=[{CJK}])")
"""The spaces between Chinese and Latin words that `cjk_tight` takes out (`cjk_spaced` is the reader's own
loratui.logic.clauses.cjk_spaced)."""


def fenced(info: str, sentence: str = SENTENCE) -> Callable[[str], str]:
    """The text inside a Markdown fence (` ``` ` with an info string or none) with a sentence before it, as an issue
    or forum post pastes a log."""
    def wrap(text: str) -> str:
        return f"{sentence}```{info}\n{text.rstrip(chr(10))}\n```\n"
    return wrap


def ansi_errors(text: str) -> str:
    """Red around every line that holds `Error`/`error`, as a coloured terminal (loguru, rich, colorama) prints
    them and a terminal's copy or a `script` capture keeps them."""
    return "\n".join(f"\x1b[31m{line}\x1b[0m" if any(w in line for w in ERROR_WORD) else line
                     for line in text.split("\n"))


WRAPPINGS: dict[str, Callable[[str], str]] = {
    # torchrun (torch >= 2.2) prefixes each line of a worker's output with its rank: `[rank1]:[2024-01-16 ...`
    # (pytorch/pytorch#117383); the dev records show `[rank7]: torch.cuda.OutOfMemoryError: ...`
    # (oom_full/openrlhf_ppo_8xa100_40g_rank7.txt) and `[rank3]:[W602 ...` (nccl_timeout/...flight_recorder.txt).
    "torchrun": every_line(lambda n: "[rank0]: "),
    # Slurm `srun --label` (`-l`): "Prepend task number to lines of stdout/err" (srun(1)), `0: `.
    "srun_label": every_line(lambda n: "0: "),
    # Python logging with `format="%(asctime)s - %(levelname)s - %(message)s"` (the logging cookbook's, and the HF
    # example scripts' `%(asctime)s - %(levelname)s - %(name)s - %(message)s` without the name).
    "logging": every_line(lambda n: f"2024-06-01 {clock(n)},123 - INFO - "),
    # loguru, short form `{time:YYYY-MM-DD HH:mm:ss} | {level} | {message}`, as the brief gives it ...
    "loguru_short": every_line(lambda n: f"2024-06-01 {clock(n)} | ERROR | "),
    # ... and loguru's default format: `{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - `.
    "loguru_default": every_line(lambda n: f"2024-06-01 {clock(n)}.123 | ERROR    | __main__:main:42 - "),
    # `kubectl logs --timestamps`: "Include timestamps on each line" (RFC3339Nano, kubectl reference).
    "kubectl": every_line(lambda n: f"2024-06-01T{clock(n)}.123456789Z "),
    # `docker compose logs` / `up`: the service's container name and a bar, `trainer-1  | ` (Compose v2 names).
    "docker_compose": every_line(lambda n: "trainer-1  | "),
    # Open MPI `mpirun --tag-output`: `[jobid,rank]<stdout>:` before each line (mpirun(1)); tracebacks.py names it.
    "mpirun_tag": every_line(lambda n: "[1,0]<stderr>:"),
    # A log viewer's copy with each line's number in brackets: the dev records show `[1824] frame #2: ...`,
    # `[1830] [rank3]:[W602 ...` (nccl_timeout/llamafactory_watchdog_frames_flight_recorder.txt).
    "line_numbers": every_line(lambda n: f"[{1800 + n}] "),
    # GitHub's quote reply (and e-mail's): `> ` before every line, a bare `>` on an empty one.
    "quote_reply": every_line(lambda n: "> ", lambda n: ">"),
    # A forum's code block (Markdown's indented code, Stack Overflow, Discourse): 4 spaces; empty lines stay empty.
    "indent4": every_line(lambda n: "    ", lambda n: ""),
    # Markdown fences, as an issue template's log field or a chat message pastes a log.
    "fence": fenced(""),
    "fence_text": fenced("text"),
    # The two halves of it apart: the fence's lines alone, and the sentence alone (a person's words, which the word
    # model reads as words of the text: a change here is the guess's, not the reader's).
    "fence_bare": fenced("text", ""),
    "sentence": lambda text: SENTENCE + text,
    # Windows line ends (a log saved on Windows, a paste from a Windows terminal).
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "ansi_errors": ansi_errors,
    # Chinese writers put a space between Chinese and Latin words or none (`训练时 loss 不降` / `训练时loss不降`): the
    # reader must not depend on it (a `\b` never stands between 时 and l, both word characters). Records without
    # Chinese are unchanged.
    "cjk_spaced": cjk_spaced,
    "cjk_tight": lambda text: _CJK_GAP.sub("", text),
}


def answers(rows: list[dict], wrap: Callable[[str], str] | None, root: Path, corpus, guess: bool) -> dict[str, str]:
    """Per record file, the doctor's top category on its text under `wrap` (None: as it is); a crash or a usage
    error is its own answer (`crash: ...`), counted as wrong."""
    from loratui.commands.doctor import diagnose

    found = {}
    for row in rows:
        path = root / row["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((wrap(row["text"]) if wrap else row["text"]).encode("utf-8"))
        try:
            items, _ = diagnose(path, guess=guess)
            found[row["file"]] = corpus.top_category(items)
        except Exception as error:  # noqa: BLE001 - a bench: count it and go on
            found[row["file"]] = f"crash: {type(error).__name__}"
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wrap", nargs="*", choices=sorted(WRAPPINGS), help="only these wrappings")
    parser.add_argument("--sample", type=int, default=0, help="this many dev records, drawn with seed 0")
    parser.add_argument("--changed", action="store_true", help="list the dev records whose answer a wrapping changes")
    parser.add_argument("--guess", choices=("off", "on", "both"), default="both")
    args = parser.parse_args()
    corpus = corpus_module()
    # dev only, chosen before any text is written: a sealed record is never wrapped, written or read
    rows = [row for row in corpus.ROWS if corpus.split_of(row) == "dev" and not row["file"].endswith(STRUCTURED)]
    if args.sample and args.sample < len(rows):
        rows = random.Random(0).sample(rows, args.sample)
    label = {row["file"]: row["category"] for row in rows}
    names = args.wrap or list(WRAPPINGS)
    guesses = {"off": [False], "on": [True], "both": [False, True]}[args.guess]
    print(f"{len(rows)} dev records ({'a sample, seed 0' if args.sample else 'all but .json/.ipynb'})")
    for guess in guesses:
        start = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            plain = answers(rows, None, Path(tmp) / "plain", corpus, guess)
            right0 = sum(plain[f] == label[f] for f in plain)
            print(f"\nguess {'on' if guess else 'off'}: unwrapped {right0}/{len(rows)} right")
            print(f"{'wrapping':<16}{'kept':>6}{'right':>7}{'vs plain':>10}{'crash':>7}")
            changed = []
            for name in names:
                got = answers(rows, WRAPPINGS[name], Path(tmp) / name, corpus, guess)
                kept = sum(got[f] == plain[f] for f in got)
                right = sum(got[f] == label[f] for f in got)
                crashes = sum(got[f].startswith("crash") for f in got)
                print(f"{name:<16}{kept:>6}{right:>7}{right - right0:>+10}{crashes:>7}", flush=True)
                changed += [f"  {name}: {f}: {plain[f]} -> {got[f]} (label {label[f]})" for f in got if got[f] != plain[f]]
        print(f"({time.monotonic() - start:.0f} s)")
        if args.changed and changed:
            print("changed:\n" + "\n".join(changed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
