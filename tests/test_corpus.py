"""The real-world corpus (tests/data/real/corpus.jsonl plus every tests/data/real/batch-*.jsonl): `doctor`
must name each excerpt's settled cause first, and `import` must read every training log's step count and
last loss.

Excerpts come from public issue threads and repositories; each record gives its source URL, the cause the
thread settled on and the excerpt's exact text (byte for byte as collected, one JSON record per excerpt,
readable with `jq`); none was written by us, and none is edited. A label changed to what an excerpt itself
shows carries a `note` saying why. The tests write each excerpt back to a file under its original name and
read it as a user's pasted log would be read.

The sealed split (issue 23): a third of the batch records, chosen by a hash of the source URL alone, is
sealed; no rule is written against a sealed excerpt, so its table measures text the reader has not learned.
The split is computed, never chosen: `test_split_follows_the_source_hash` checks every record against it.
Only the dev split's misses are printed; the sealed table gives counts alone.
`bench/corpus_halves.py` cuts the dev split again in two (learn, whose misses it prints, and check, counts only) to
see whether a rule written from one half carries to text its writer did not read.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from loratui.commands.doctor import diagnose
from loratui.logic.categories import answer_category as top_category  # (bench/ scripts import it from here)
from loratui.sources import importers

REAL = Path(__file__).parent / "data" / "real"
CORPUS = REAL / "corpus.jsonl"
"""The first corpus (issue 18): every record in it is dev, its records carry no `split` or `tool`."""
BATCHES = sorted(REAL.glob("batch-*.jsonl"))
"""Later collections (issue 23); a missing or empty batch file is simply no records."""
CATEGORIES = frozenset({
    "oom_full", "oom_fragmentation", "oom_other_process", "oom_at_eval", "oom_at_save", "cuda_error",
    "nccl_timeout", "bnb_setup", "flash_attn_unavailable", "exception_other", "nan_loss", "loss_flat_or_zero",
    "loss_diverging", "data_starved", "healthy"})
SPLITS = ("sealed", "dev")
FLOOR = {"sealed": 0.80, "dev": 0.91}
"""Regression floors for the share of first items right, per split, a little under what `loratui doctor FILE` measured
at the end of issue 23's thirtieth session on 11,651 excerpts: sealed 3066/3770, dev 7239/7881 (the rules alone:
sealed 2767/3770); its starting code read the same sealed split 3037/3770 (rules alone 2745): its changes (G6-G7, the
host's RAM against the card's memory kinds; R33-R36, CUDA library errors, the host's and the card's memory told in a
person's words, LuaJIT's own memory error) gained 29 sealed texts, 28 of them exception_other (healthy -1). Its four
waves (batch-col119a..col122h, 728 excerpts, 235 of them sealed) were scored by counts before anyone read them, by the
code before the changes each judged: 119 148/183, 120 147/192, 121 153/173, 122 154/180 (docs/learned_fallback.md).
The dev floor fell from 0.92 to 0.91: the dev split's waves 89-122 (2,135 records) are in neither learned model (W14
was trained through wave 88) and read at about 79 % (1,486/1,891 of waves 89-120 by the code of R34); the grown dev
split read 91.85 % at the end. Each earlier session's figures, and why each floor moved, are in
docs/learned_fallback.md."""
PER_CATEGORY = {"sealed": 0.45, "dev": 0.80}
"""Regression floors for every category's share right, per split (the sealed one set at the thirteenth session's end,
when the lowest were sealed oom_other_process 21/44 and loss_flat_or_zero 33/63; the dev one raised from 0.72 at the
twentieth's, where the lowest are sealed loss_diverging 38/76 and dev loss_flat_or_zero 223/243; at the
twenty-first's: sealed loss_diverging 40/80, dev loss_flat_or_zero 241/262; at the twenty-second's: sealed
loss_diverging 44/86 and oom_fragmentation 13/25, dev loss_diverging 180/195 and loss_flat_or_zero 263/285; at the
twenty-third's: sealed loss_diverging 46/93, oom_fragmentation 13/25 and loss_flat_or_zero 79/145, dev
loss_diverging 185/203; at the twenty-fourth's: sealed loss_diverging 45/96, oom_other_process 38/77, oom_fragmentation
13/25 and loss_flat_or_zero 79/147, dev loss_diverging 192/213); issue 23's goal is 0.75."""
MIN_PER_CATEGORY = 6
"""Issue 18: at least this many excerpts of every category."""
TARGET = {"records": 300, "per_category": 20, "tools_per_category": 5, "notebook": 10}
"""Issue 23's size and diversity goals: at least 300 excerpts, every category at least 20 from at least 5 tools,
and Jupyter/Colab/Kaggle output among them (`notebook` records whose tool names a notebook)."""
NOTEBOOK = re.compile(r"jupyter|colab|kaggle|notebook", re.IGNORECASE)
"""A tool name that says the excerpt is a notebook's output (`unsloth (Colab)`, `TRL SFTTrainer (Jupyter)`)."""
BATCH_KEYS = {"file", "source", "category", "settled", "tool", "split", "text"}
OPTIONAL_KEYS = {"steps", "last_loss", "format", "note"}


def read_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every record of one JSONL file, each with `file:line` to name it in a failure."""
    if not path.exists():
        return []
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            where = f"{path.name}:{number}"
            try:
                found.append((where, json.loads(line)))
            except json.JSONDecodeError as error:
                pytest.fail(f"{where}: not a JSON record ({error}); fix the line", pytrace=False)
    return found


FIRST = read_records(CORPUS)
FIRST_SOURCES = frozenset(row["source"] for _, row in FIRST)
LATER = [record for path in BATCHES for record in read_records(path)]
RECORDS = FIRST + LATER
ROWS = [row for _, row in RECORDS]


def expected_split(source: str) -> str:
    """Sealed for a third of the sources by hash, never a source the first corpus already holds."""
    sealed = int(hashlib.sha256(source.encode()).hexdigest(), 16) % 3 == 0 and source not in FIRST_SOURCES
    return "sealed" if sealed else "dev"


def split_of(row: dict[str, Any]) -> str:
    return row.get("split", "dev")


@pytest.fixture(scope="module")
def excerpts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every excerpt as a file under its original name (the extension tells `import` the format)."""
    root = tmp_path_factory.mktemp("real")
    for row in ROWS:
        path = root / row["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(row["text"].encode("utf-8"))
    return root


def record_problems(row: dict[str, Any], batch: bool) -> list[str]:
    """What is wrong with one record's fields (empty when nothing is)."""
    required = BATCH_KEYS if batch else BATCH_KEYS - {"tool", "split"}
    problems = [f"missing {key!r}" for key in sorted(required - row.keys())]
    problems += [f"unknown key {key!r}" for key in sorted(row.keys() - BATCH_KEYS - OPTIONAL_KEYS)]
    if not str(row.get("source", "")).startswith("https://"):
        problems.append("source is not an https:// URL")
    if row.get("category") not in CATEGORIES:
        problems.append(f"category {row.get('category')!r} is none of the corpus categories")
    if not str(row.get("text", "")).strip() or not str(row.get("settled", "")).strip():
        problems.append("empty text or settled")
    if ("steps" in row) != ("last_loss" in row):
        problems.append("steps and last_loss go together")
    return problems


def test_records_are_complete() -> None:
    batch_places = {where for where, _ in LATER}
    problems = [f"{where}: {problem}" for where, row in RECORDS
                for problem in record_problems(row, where in batch_places)]
    assert problems == []
    assert len(ROWS) >= 100


def test_split_follows_the_source_hash() -> None:
    wrong = [f"{where}: split {split_of(row)!r}, the hash rule says {expected_split(row['source'])!r}"
             for where, row in RECORDS if split_of(row) != expected_split(row["source"])]
    assert wrong == []


def duplicates(values: list[tuple[str, str]]) -> list[str]:
    """The places whose value an earlier place already holds."""
    first: dict[str, str] = {}
    found = []
    for where, value in values:
        if value in first:
            found.append(f"{where} repeats {first[value]}")
        first.setdefault(value, where)
    return found


def test_no_excerpt_is_there_twice() -> None:
    assert duplicates([(where, row["file"]) for where, row in RECORDS]) == []
    assert duplicates([(where, row["text"].strip()) for where, row in RECORDS]) == []


SECRET = re.compile(r"\bhf_[A-Za-z0-9]{30,}|\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}|"
                    r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36}\b|\bgithub_pat_\w{50,}|\bAKIA[0-9A-Z]{16}\b|"
                    r"(?i:wandb)[^\n]{0,60}?\b[0-9a-f]{40}\b|\bxox[abp]-[A-Za-z0-9-]{20,}")
"""What an access token or API key looks like: Hugging Face's, OpenAI's and Anthropic's, GitHub's, AWS's, a wandb key,
Slack's. People paste logs with them (`huggingface-cli login --token hf_...`); a public thread may still hold one."""


def test_no_excerpt_holds_a_secret() -> None:
    """A key copied from a public thread is still someone's key: the excerpt must be cut before it (or skipped).
    Names the record and the kind of key, never the text (a third of the records are sealed)."""
    found = [f"{where}: {match.group(0)[:4]}... ({len(match.group(0))} characters)" for where, row in RECORDS
             for match in [SECRET.search(row["text"])] if match]
    assert found == []


@pytest.mark.parametrize("made", [
    "hf_" + "aB3" * 11, "sk-proj-" + "x9Y_" * 10, "ghp_" + "Zz09" * 9, "AKIA" + "Q7" * 8,
    "wandb: Appending key for api.wandb.ai to your netrc file: " + "0f" * 20,
])
def test_the_secret_pattern_finds_keys_of_every_kind(made: str) -> None:
    assert SECRET.search(f"$ export TOKEN={made}\n") is not None
    assert SECRET.search("RuntimeError: CUDA out of memory. sk-learn hf_hub_download failed; risk-averse") is None


def tool_family(tool: str) -> str:
    """The tool a record names, without its parenthesised detail: `unsloth (Colab)` and `unsloth` are one tool."""
    return tool.split(" (")[0].strip()


def corpus_counts() -> tuple[dict[str, dict[str, int]], dict[str, set[str]]]:
    """Per category its excerpts per split and the tool families they come from (records without a tool add none)."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"sealed": 0, "dev": 0})
    tools: dict[str, set[str]] = defaultdict(set)
    for row in ROWS:
        counts[row["category"]][split_of(row)] += 1
        tools[row["category"]].update([tool_family(row["tool"])] if "tool" in row else [])
    return counts, tools


def test_every_category_has_enough_excerpts() -> None:
    counts, tools = corpus_counts()
    lines = [f"{'category':<24}{'sealed':>7}{'dev':>5}{'all':>5}{'tools':>7}  tool families"]
    lines += [f"{name:<24}{n['sealed']:>7}{n['dev']:>5}{sum(n.values()):>5}{len(tools[name]):>7}  "
              + ", ".join(sorted(tools[name])) for name, n in sorted(counts.items())]
    print("\n" + "\n".join(lines))
    assert {name: n for name, n in counts.items() if sum(n.values()) < MIN_PER_CATEGORY} == {}


def target_shortfalls() -> list[str]:
    """What keeps the corpus from issue 23's size and diversity goals (empty when it meets them)."""
    counts, tools = corpus_counts()
    short = [f"{len(ROWS)} excerpts, want {TARGET['records']}"] if len(ROWS) < TARGET["records"] else []
    short += [f"{name}: {sum(counts[name].values())} excerpts, want {TARGET['per_category']}"
              for name in sorted(CATEGORIES) if sum(counts[name].values()) < TARGET["per_category"]]
    short += [f"{name}: {len(tools[name])} tools ({', '.join(sorted(tools[name]))}), want {TARGET['tools_per_category']}"
              for name in sorted(CATEGORIES) if len(tools[name]) < TARGET["tools_per_category"]]
    notebooks = sum(1 for row in ROWS if NOTEBOOK.search(row.get("tool", "")))
    short += [f"{notebooks} notebook excerpts, want {TARGET['notebook']}"] if notebooks < TARGET["notebook"] else []
    return short


def test_corpus_meets_issue_23_targets() -> None:
    """Every category counted, including one with no excerpt at all, and notebook output among the excerpts."""
    assert target_shortfalls() == []


def score(rows: list[dict[str, Any]], excerpts: Path, guess: bool = True) -> tuple[dict[str, list[int]], list[str]]:
    """Per category [right, of], and the misses as `file: what the doctor said first` (`guess`: with the word
    model's guess where no rule speaks, as `loratui doctor FILE` answers; off, the rules alone)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses = []
    for row in rows:
        items, _ = diagnose(excerpts / row["file"], guess=guess)
        got = top_category(items)
        table[row["category"]][0] += got == row["category"]
        table[row["category"]][1] += 1
        if got != row["category"]:
            misses.append(f"{row['file']}: {got}")
    return table, misses


def render(split: str, table: dict[str, list[int]]) -> list[str]:
    """One split's table: per category right, of, top-1, then overall."""
    right, total = sum(hit for hit, _ in table.values()), sum(n for _, n in table.values())
    lines = [f"{split} split", f"{'category':<24}{'right':>6}{'of':>5}{'top-1':>8}"]
    lines += [f"{name:<24}{hit:>6}{n:>5}{hit / n:>8.0%}" for name, (hit, n) in sorted(table.items())]
    lines.append(f"{'overall':<24}{right:>6}{total:>5}{right / max(total, 1):>8.0%}")
    return lines


def test_doctor_names_the_settled_cause(excerpts: Path) -> None:
    tables, lines = {}, []
    for split in SPLITS:
        tables[split], misses = score([row for row in ROWS if split_of(row) == split], excerpts)
        lines += render(split, tables[split]) + [""]
        # Sealed excerpts are read by no one writing rules, so their misses are not listed.
        lines += ["dev misses:"] + misses if split == "dev" else []
    report = "\n".join(lines)
    print("\n" + report)
    for split, table in tables.items():
        right, total = sum(hit for hit, _ in table.values()), sum(n for _, n in table.values())
        assert total == 0 or right / total >= FLOOR[split], report
        assert all(hit / n >= PER_CATEGORY[split] for hit, n in table.values()), report


LOGS = [row for row in ROWS if "steps" in row]


@pytest.mark.parametrize("row", LOGS, ids=[row["file"] for row in LOGS])
def test_import_reads_steps_and_last_loss(row: dict[str, Any], excerpts: Path) -> None:
    found = importers.import_path(excerpts / row["file"])
    losses = [e for e in found if type(e).__name__ == "Log" and "loss" in e.values and not
              any(k.startswith("eval_") or k == "train_runtime" for k in e.values)]
    assert len(losses) == row["steps"]
    last = float(losses[-1].values["loss"])
    expected = float(row["last_loss"])
    assert (math.isnan(last) and math.isnan(expected)) or last == pytest.approx(expected, rel=1e-9)
