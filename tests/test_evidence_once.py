"""An item of `doctor`'s advice quotes each line of the paste once: the OOM line, the sentence that places it in
evaluation and the one that names what held the memory can be the same sentence, and each detector quoted it
again ("as the text says: ..." twice under the same quote)."""

from __future__ import annotations

import io

from loratui.commands import doctor
from loratui.logic.advisor.advice import distinct_evidence


def _items(text: str) -> list:
    return doctor.diagnose_stream(io.BytesIO(text.encode()), "pasted text")[0]


def test_a_sentence_that_is_the_oom_and_its_phase_is_quoted_once() -> None:
    said = ("Training goes fine, but once the evaluation loop starts my notebook throws CUDA out of memory even "
            "though I restarted the kernel.")
    items = _items(said + "\n")
    assert items and items[0].id == "oom_at_eval"
    for item in items:
        quoting = [line for line in item.evidence if said in line]
        assert len(quoting) == 1, (item.id, item.evidence)


def test_a_quote_cut_short_is_the_same_quote() -> None:
    whole = "my run stops in the validation pass with an out of memory error " + "and more words " * 30
    cut = whole[:300]  # a detector keeps 300 characters of a line
    assert distinct_evidence(["during evaluation", whole[:120].rstrip() + "…", "as the text says: " + cut]) == \
        ["during evaluation", whole[:120].rstrip() + "…"]
    assert distinct_evidence([cut, "the last NCCL line: " + cut, "rerun with NCCL_DEBUG=INFO"]) == \
        [cut, "rerun with NCCL_DEBUG=INFO"]


def test_different_lines_all_stay() -> None:
    lines = ["during evaluation", "tried to allocate 2.00 GiB on GPU 0", "as the text says: the eval step ran out",
             "the eval step ran out of memory at step 40 with batch 8"]
    assert distinct_evidence(lines) == lines


def test_a_long_sentence_quoted_says_it_stops_short() -> None:
    """A 400-character complaint quoted as evidence ended mid-word (`... in a stable fas`) with nothing to say the
    rest was left out."""
    said = ("I fine-tune a 3B model with LoRA on my own chat data and after the warmup the training loss keeps going "
            "up every few hundred steps, from 1.2 to well above 3 by the end of the first epoch, and nothing I tried "
            "about the schedule or the data order has changed that at all so far, which is why I am asking here "
            "whether the precision setting could matter for this kind of run")
    assert len(said) > 300
    items = _items(said + "\n")
    assert items and items[0].id == "loss_diverging"
    quote = next(line for line in items[0].evidence if line.startswith("I fine-tune"))
    assert quote.endswith("…") and said.startswith(quote[:-1]), quote
    assert said[len(quote) - 1] == " ", quote  # cut at a word's end, not in a word


def test_quoted_cuts_at_a_word_or_marks_the_cut() -> None:
    from loratui.logic.fmt import quoted

    assert quoted("  short line \n") == "short line"
    assert quoted("x" * 500, 300) == "x" * 299 + "…"
    words = quoted("word " * 100, 300)
    assert words.endswith("word…") and len(words) <= 300


def test_a_cuda_faults_cause_is_said_in_the_title_not_again_below() -> None:
    items = _items("RuntimeError: CUDA error: device-side assert triggered\n")
    (item,) = [i for i in items if i.id == "cuda_error"]
    assert "device-side assert, most often an id out of range" in item.title
    assert not any("most often an id out of range" in line for line in item.evidence), item.evidence


def test_an_errors_message_stops_at_the_blank_line_before_the_persons_question() -> None:
    """The reader sends no blank lines, so the exception's message ran on into the next paragraph of the paste
    (`ValueError: ...`, a blank line, `Does anyone know a fix?`, `## Steps`) and into its title."""
    text = ("After upgrading, my fine-tuning script stops with\n"
            "KeyError: 'attention_mask'\n\n"
            "Does anyone know a fix for this?\n\n## Steps to reproduce\n\npython train.py --epochs 3\n")
    (item,) = [i for i in _items(text) if i.id == "exception"]
    assert "Does anyone" not in item.title and "Steps" not in item.title, item.title
    assert not any("Does anyone" in line for line in item.evidence), item.evidence


def test_a_rise_that_ran_into_nan_in_words_names_no_step_zero() -> None:
    """A paste with no step numbers said `then loss became nan at step 0`: step 0 is no step there. A NaN said in the
    rise's own sentence leads (`diverges to NaN`: threads settle on the NaN, 16 dev records against 1 in the
    twenty-third session); the rise stays below it."""
    items = _items("While training the autoencoder the loss keeps getting bigger and finally becomes nan.\n")
    assert [i.id for i in items][:2] == ["nan_loss", "loss_diverging"], [i.id for i in items]
    for item in items:
        assert not any("step 0" in line for line in item.evidence), item.evidence


def test_an_introduced_errors_evidence_is_its_message_not_the_introduction() -> None:
    """`I started the run and got an error about the shapes:` and, on the next line, the message: the evidence was
    the first line, which shows nothing, and the title's quote was cut mid-word at 120 characters."""
    message = ("Expected input batch_size (16) to match target batch_size (2048), which usually means the labels were "
               "not shifted or padded the way the collator expects them to be")
    text = "I started the run and got an error about the shapes:\n" + message + "\n"
    (item,) = [i for i in _items(text) if i.id == "exception"]
    assert item.evidence[0] == message, item.evidence
    assert "…" in item.title and message[:60] in item.title, item.title
