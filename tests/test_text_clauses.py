"""The one clause splitter and the one denial reader of the text advisor's prose readers (loratui/logic/clauses.py)."""

from __future__ import annotations

from loratui.logic.clauses import CLAUSE, DENIED, PHRASES, clause_starts, clauses, denial, sentences


def test_a_clause_ends_at_english_and_chinese_punctuation() -> None:
    assert [c.strip() for c in clauses("loss is nan. grad is inf; lr: 1e-4")] == ["loss is nan", "grad is inf", "lr",
                                                                              "1e-4"]
    assert clauses("数据加载很慢，训练很快。显存够用！") == ["数据加载很慢", "训练很快", "显存够用"]
    assert clauses("one line\nanother line") == ["one line", "another line"]


def test_a_period_inside_a_number_or_a_version_ends_nothing() -> None:
    assert clauses("loss 0.5 with peft v1.5 and lr 2.5e-5") == ["loss 0.5 with peft v1.5 and lr 2.5e-5"]


def test_a_clause_ends_where_the_sentence_turns() -> None:
    assert [c.strip() for c in clauses("tokenization is slow but training is fast")] == ["tokenization is slow",
                                                                                       "training is fast"]
    assert clauses("预处理很慢但是训练很快") == ["预处理很慢", "训练很快"]
    assert clauses("加载很慢而训练很快") == ["加载很慢", "训练很快"]


def test_a_bare_while_is_no_turn() -> None:
    """`while loading` says when: the thing and what it does stay one statement."""
    assert clauses("Things freeze while loading the next batch") == ["Things freeze while loading the next batch"]


def test_phrases_keep_an_opening_phrase_with_its_clause() -> None:
    text = "With augmentations on, everything crawls, while the GPU idles"
    assert [c.strip() for c in clauses(text)] == ["With augmentations on", "everything crawls", "while the GPU idles"]
    assert [c.strip() for c in clauses(text, PHRASES)] == ["With augmentations on, everything crawls",
                                                           "the GPU idles"]


def test_clause_starts_are_where_each_clause_begins() -> None:
    text = "eval runs fine, but saving fails"
    starts = clause_starts(text)
    assert starts == [0] + [found.end() for found in CLAUSE.finditer(text)]
    assert [text[start:start + 6] for start in starts] == ["eval r", " but s", " savin"]


def test_a_denial_in_english_or_chinese() -> None:
    for said in ("it is not slow", "never stalls", "no longer slow", "isn't slow", "doesn't stall", "wasn't the loader",
                 "不慢", "没有卡住"):
        assert DENIED.search(said), said
    for said in ("nothing to note", "a knot", "the notebook is slow", "it is slow"):
        assert not DENIED.search(said), said


def test_a_reader_adds_its_own_denials_or_other_chinese() -> None:
    oom = denial(r"\b(?:no|nothing|without|nor)\b", chinese="没有?|不会")
    assert oom.search("but nothing crashes") and oom.search("没有报错") and oom.search("isn't a crash")
    assert not oom.search("显存不足 and it crashes")  # `不足` is the failure itself, not a denial
    assert DENIED.search("显存不足")
    prep = denial(r"\b(?:only|just)\b")
    assert prep.search("only takes 5 minutes") and prep.search("does not take long") and prep.search("不慢")


def test_a_sentence_keeps_its_stop() -> None:
    """`Is it slow?` stays a question; an English stop ends a sentence before white space only."""
    assert sentences("Is the loader slow? It takes 0.5 s per batch. 训练很慢！数据加载要3秒。") == [
        "Is the loader slow?", "It takes 0.5 s per batch.", "训练很慢！", "数据加载要3秒。"]


def test_no_sentence_ends_inside_a_number_a_version_or_a_word() -> None:
    assert sentences("peft v1.5 with lr 2.5e-5 on node.js, e.g.this") == ["peft v1.5 with lr 2.5e-5 on node.js, e.g.this"]


def test_a_line_end_ends_a_sentence() -> None:
    assert sentences("first line\nsecond line\n\n") == ["first line", "second line"]
