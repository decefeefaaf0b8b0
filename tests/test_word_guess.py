"""The word model's guess (issue 23): where no rule fires on a pasted text, `doctor` may say which kind of report it
reads like, as a guess it names as one. Its numpy reader must give what scikit-learn gave at training, it must have
learned from no sealed excerpt, and it must stay quiet where the rules spoke or the text is a whole log."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from loratui.cli import main
from loratui.commands.doctor import _with_guess
from loratui.logic.advisor.advice import ERROR, Advice
from loratui.logic import word_guess
from loratui.logic.clauses import cjk_spaced
from loratui.logic.word_guess import MAX_CHARS, SPEAK_AT, char_grams, guess, probabilities, word_grams
from loratui.sources.word_model import PATH, load

REAL = Path(__file__).parent / "data" / "real"
SLOW_LOADER = ("Training is very slow, the GPU utilization stays around 10% the whole time and the CPU is at 100%. "
               "Is the dataloader the bottleneck?")
"""Written for this test (not a corpus excerpt): a person's words with no number a rule reads as a measure."""
PREDICT = "predict() on the test set crashes the kernel with an allocator message after a few batches."
"""Written for this test: no rule reads it today (if one comes to, take a text no rule reads: the test is of the
wiring, that the guess reaches the terminal where the rules are silent)."""


@pytest.fixture(autouse=True)
def no_arbiter(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are the word guess's own gates; the arbiter, which may put another answer before them, is
    tests/test_arbiter.py's."""
    from loratui.sources import word_model

    monkeypatch.setattr(word_model, "load_arbiter", lambda: None)


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    found = load()
    assert found is not None, f"{PATH} is missing or unreadable: run bench/train_word_model.py"
    return found


def test_the_numpy_reader_gives_what_scikit_learn_gave(model) -> None:  # type: ignore[no-untyped-def]
    with np.load(PATH) as data:
        texts = data["ref_texts"].tobytes().decode("utf-8").split("\0")
        sick, kinds = data["ref_sick"], data["ref_kind"]
    assert len(texts) == len(sick) >= 20
    for k, text in enumerate(texts):
        p_sick, p_kinds = probabilities(model, text)
        assert p_sick == pytest.approx(float(sick[k]), abs=1e-6)
        assert p_kinds == pytest.approx([float(p) for p in kinds[k]], abs=1e-6)


def test_the_analyzers_are_scikit_learns() -> None:
    sklearn = pytest.importorskip("sklearn.feature_extraction.text")  # the `experiments` extra; CI installs it
    text = "RuntimeError: CUDA out of memory.\tTried  to allocate 2.00 GiB (GPU 0; 23.69 GiB total) a b 显存不足 x"
    word = sklearn.TfidfVectorizer(analyzer="word", ngram_range=(1, 2), token_pattern=r"(?u)\b[a-zA-Z_][a-zA-Z_]+\b",
                                   preprocessor=word_guess.prepared)
    char = sklearn.TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), preprocessor=word_guess.prepared)
    for pasted in (text, "训练时loss不降，显存OOM了 step 100"):
        assert word_grams(pasted) == word.build_analyzer()(pasted)
        assert char_grams(pasted) == char.build_analyzer()(pasted)


@pytest.mark.parametrize("tight", ["训练时loss一直不降，lr是2e-4", "用4卡训练DDP时一直hang住，GPU利用率100%"])
def test_chinese_beside_latin_words_reads_the_same_spaced_or_not(model, tight: str) -> None:  # type: ignore[no-untyped-def]
    """A space where Chinese touches a Latin word, or none: the same features (the word analyzer's `\\b` found no
    `loss` in `时loss不`), so the same guess."""
    spaced = cjk_spaced(tight)
    assert spaced != tight
    assert word_guess.features(model, tight) == pytest.approx(word_guess.features(model, spaced))


@pytest.mark.parametrize(("text", "words"), [
    ("训练时显存不够用了，怎么办", True),  # Chinese alone: a word to every two characters
    ("用4卡训练时一直hang住", True),  # the English word touching the characters counts
    ("显存不足", False),  # too short to be a report
])
def test_chinese_text_has_words(text: str, words: bool) -> None:
    """Chinese has no spaces between its words: it was counted as none, and a Chinese report got no guess (held out
    over 24 waves, bench/guess_gate.py: 899 -> 908 of 1,282 with the shipped gates)."""
    assert word_guess.has_words(text) is words


def test_the_model_learned_from_no_sealed_excerpt(model) -> None:  # type: ignore[no-untyped-def]
    with np.load(PATH) as data:
        trained = set(data["sources"].tobytes().decode().split("\n"))
    sealed = {hashlib.sha256(row["source"].encode()).hexdigest()
              for path in REAL.glob("*.jsonl") for line in path.read_text(encoding="utf-8").splitlines()
              if line.strip() and (row := json.loads(line)).get("split") == "sealed"}
    assert sealed and not trained & sealed
    assert model.records >= 600 and len(trained) >= 600


def test_a_confident_guess_is_first_and_says_it_is_one(model) -> None:  # type: ignore[no-untyped-def]
    found = guess(model, SLOW_LOADER)
    assert found is not None and found.kind == "data_starved" and found.p_problem >= SPEAK_AT
    items = _with_guess([], SLOW_LOADER)
    assert [item.id for item in items] == ["data_starved"] and items[0].severity == "warning"
    assert "a guess" in items[0].title and f"trained on {model.records} real reports" in items[0].evidence[0]


def test_no_guess_where_a_rule_spoke_or_on_a_whole_log(model) -> None:  # type: ignore[no-untyped-def]
    ruled = [Advice(id="oom_full", severity=ERROR, title="t", evidence=[], change={}, step=0)]
    assert _with_guess(ruled, SLOW_LOADER) == ruled
    assert guess(model, (SLOW_LOADER + "\n") * (MAX_CHARS // len(SLOW_LOADER) + 1)) is None
    assert guess(model, "  \n") is None


def test_a_healthy_trainer_log_gets_no_guess(model) -> None:  # type: ignore[no-untyped-def]
    log = "\n".join(f"{{'loss': {2.6 - 0.04 * i:.4f}, 'grad_norm': {1.3 - 0.01 * i:.3f}, 'learning_rate': 0.0002, "
                    f"'epoch': {i / 20:.2f}}}" for i in range(1, 40))
    assert guess(model, log) is None
    assert _with_guess([], log) == []


def test_doctor_prints_the_guess_for_a_paste(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paste = tmp_path / "question.txt"
    paste.write_text(PREDICT + "\n", encoding="utf-8")
    assert main(["doctor", str(paste)]) == 0  # a warning, not an error: a guess stops nothing
    out = capsys.readouterr().out
    assert "WARNING oom_at_eval" in out and "a guess: no log line or number here shows it" in out
    assert "check first:" in out


def test_no_guess_says_only_what_a_rule_reads(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paste = tmp_path / "question.txt"
    paste.write_text(PREDICT + "\n", encoding="utf-8")
    assert main(["doctor", str(paste), "--no-guess"]) == 0
    assert "no problems found" in capsys.readouterr().out


def test_a_healthy_keras_log_gets_no_guess(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Found in the session's tmux trial: a falling Keras log read as `loss that does not move` by its words. A text
    with its own loss series is judged by the numbers, which outrank words."""
    lines = []
    for epoch, (loss, val) in enumerate([(0.6931, 0.68), (0.52, 0.55), (0.39, 0.47)], start=1):
        lines += [f"Epoch {epoch}/3", (f"500/500 [==============================] - 12s 24ms/step - loss: {loss:.4f} - "
                  f"val_loss: {val:.4f}")]
    log = tmp_path / "keras.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert guess(load(), log.read_text(encoding="utf-8")) is not None  # the words alone would raise it
    assert main(["doctor", str(log)]) == 0
    assert "a guess" not in capsys.readouterr().out


NVIDIA_SMI = """Thu Mar  6 09:12:44 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  |   00000000:07:00.0 Off |                    0 |
| N/A   61C    P0            312W /  400W |   41235MiB /  81920MiB |     97%      Default |
+-----------------------------------------+------------------------+----------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Usage |
|=========================================================================================|
|    0   N/A  N/A     18211      C   python                                      41224MiB |
+-----------------------------------------------------------------------------------------+
"""


def test_a_bare_nvidia_smi_table_gets_no_guess(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Trial 7: a healthy nvidia-smi paste (one python process, 97 % busy) was guessed as another process holding
    the memory (p=0.99): the table's words are the same healthy or not. With a sentence of the person's own, the
    model reads it as before."""
    paste = tmp_path / "smi.txt"
    paste.write_text(NVIDIA_SMI, encoding="utf-8")
    assert main(["doctor", str(paste)]) == 0
    assert "a guess" not in capsys.readouterr().out
    asked = "CUDA out of memory although nothing of mine runs; a stray process holds the card:\n" + NVIDIA_SMI
    assert word_guess.has_words(asked) and not word_guess.has_words(NVIDIA_SMI)


def test_the_guess_is_not_asked_where_fp16s_loss_scaler_speaks(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    """The loss scaler's back-off is the run's own log, which the rules judged (one overflow is normal): the words
    around it must not outvote that reading."""
    from loratui.commands import doctor

    asked: list[str] = []
    monkeypatch.setattr(word_guess, "first_guess", lambda reading, catch_all=None, memory=False, plain=False:
                        asked.append("plain") if plain else None)
    paste = tmp_path / "fp16.txt"
    paste.write_text("Is this fine? It printed this once at the start\n[deepspeed] OVERFLOW! Rank 0 Skipping step. "
                     "Attempted loss scale: 65536, reducing to 32768\n", encoding="utf-8")
    assert doctor.diagnose(paste, guess=True)[0] == [] and asked == []
    paste.write_text("Is this fine? It printed this once at the start, then the run went on\n", encoding="utf-8")
    doctor.diagnose(paste, guess=True)
    assert len(asked) == 1  # the same words without the scaler's line: the guess is asked


def test_no_guess_where_the_person_asks_whether_it_is_normal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """G5 (twenty-ninth session): where no rule found a problem and the person asks whether what they see is normal,
    neither the word model nor the arbiter speaks (held out, the words named a problem there wrongly more often than
    rightly). The words are ours; without the question the guess is asked as before."""
    from loratui.commands import doctor
    from loratui.sources import word_model

    loaded: list[str] = []
    real = word_model.load
    monkeypatch.setattr(word_model, "load", lambda: loaded.append("words") or real())
    paste = tmp_path / "asks.txt"
    paste.write_text("Training the detector on my own dataset takes about 20 hours for 50 epochs on one 2080 Ti. "
                     "Is this normal?\n", encoding="utf-8")
    assert doctor.diagnose(paste, guess=True)[0] == [] and loaded == []
    paste.write_text("Training the detector on my own dataset takes about 20 hours for 50 epochs on one 2080 Ti.\n",
                     encoding="utf-8")
    doctor.diagnose(paste, guess=True)
    assert loaded == ["words"]


def test_a_kind_is_named_when_it_holds_kind_at_of_the_problem_kinds(model) -> None:  # type: ignore[no-untyped-def]
    """The gate's arithmetic on the shipped model's arrays: the kinds' scores are set so that one kind holds a
    known share of the problem kinds' probability."""
    from dataclasses import replace

    kinds = list(model.kinds)
    top = kinds.index("oom_full")

    def share_model(share: float):  # type: ignore[no-untyped-def]
        others = len(kinds) - 2  # healthy and the top kind left out
        rest = (1 - share) / others
        scores = np.full(len(kinds), np.log(rest))
        scores[top], scores[kinds.index("healthy")] = np.log(share), np.log(rest)
        return replace(model, sick_coef=np.zeros_like(model.sick_coef), sick_intercept=10.0,
                       kind_coef=np.zeros_like(model.kind_coef), kind_intercept=scores)

    above = guess(share_model(word_guess.KIND_AT + 0.02), SLOW_LOADER)
    assert above is not None and above.kind == "oom_full"
    assert guess(share_model(word_guess.KIND_AT - 0.02), SLOW_LOADER) is None


SEVEN_SCRIPTS = ("RuntimeError: CUDA out of memory.\nI start 7 training scripts, one per GPU, with "
                 "torch.device(f'cuda:{i}'), and every script after the first dies with this.\n")
"""Written for this test: an OOM message with no numbers, and words that tell of other processes in a way no rule
reads (if one comes to, take words no rule reads: the test is of the wiring)."""


def test_an_oom_whose_message_settles_nothing_gets_the_words_reading_first(tmp_path: Path) -> None:
    from loratui.commands import doctor

    paste = tmp_path / "seven.txt"
    paste.write_text(SEVEN_SCRIPTS, encoding="utf-8")
    items, _ = doctor.diagnose(paste, guess=True)
    assert [item.id for item in items[:2]] == ["oom_other_process", "oom_full"]
    assert "a guess: the OOM message does not say what held the memory" in items[0].title
    assert "of the out-of-memory kinds, this reads most like oom_other_process" in items[0].evidence[0]
    assert "(the message gives no usable numbers)" in items[1].title  # the rules' default stays, second
    assert doctor.diagnose(paste, guess=False)[0][0].id == "oom_full"


def test_an_oom_whose_numbers_settle_it_is_not_second_guessed(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    from loratui.commands import doctor

    asked: list[str] = []
    monkeypatch.setattr(word_guess, "first_guess", lambda reading, catch_all=None, memory=False, plain=False:
                        asked.append("memory") if memory else None)
    paste = tmp_path / "numbers.txt"
    paste.write_text(SEVEN_SCRIPTS.replace(
        "RuntimeError: CUDA out of memory.", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.15 GiB of which 1.20 GiB is free. Including non-PyTorch memory, this "
        "process has 77.90 GiB memory in use. Of the allocated memory 76.10 GiB is allocated by PyTorch, and 1.30 "
        "GiB is reserved by PyTorch but unallocated."), encoding="utf-8")
    items, _ = doctor.diagnose(paste, guess=True)
    assert items[0].id == "oom_full" and asked == []  # this process holds the card: full, read from numbers


def test_a_memory_kind_is_named_at_memory_at_of_the_memory_kinds(model) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    kinds = list(model.kinds)

    def share_model(share: float, cuda_error: float = 1e-6):  # type: ignore[no-untyped-def]
        scores = np.full(len(kinds), np.log(1e-6))
        scores[kinds.index("oom_fragmentation")] = np.log(share)
        scores[kinds.index("oom_full")] = np.log(1 - share)
        scores[kinds.index("cuda_error")] = np.log(cuda_error)
        return replace(model, kind_coef=np.zeros_like(model.kind_coef), kind_intercept=scores)

    above = word_guess.memory_kind(share_model(word_guess.MEMORY_AT + 0.02), SLOW_LOADER)
    assert above is not None and above.kind == "oom_fragmentation"
    assert word_guess.memory_kind(share_model(word_guess.MEMORY_AT - 0.02), SLOW_LOADER) is None
    assert word_guess.memory_kind(share_model(0.1), SLOW_LOADER) is None  # "full" is the rules' own default
    # the words read as a CUDA error: the memory kinds' shares are noise, whatever their ratio
    assert word_guess.memory_kind(share_model(0.9, cuda_error=50.0), SLOW_LOADER) is None


def test_an_oom_only_words_put_on_the_card_is_the_hosts_where_the_text_names_ram_and_no_card() -> None:
    """G7 (thirtieth session): an OOM of the card that the word model (or only a person's word for an OOM) put first is
    the host's RAM where the text names the host's memory and no GPU or other accelerator anywhere; a card named
    anywhere, Chinese beside it or not, keeps the words' answer, and so does an OOM whose message's numbers settled
    it. The texts are ours."""
    from loratui.commands.doctor import _host_named
    from loratui.logic.advisor.oom_advice import host_memory

    guess = word_guess.guessed_advice("oom_full", "no log line or number here shows it", "the words")
    ram = "Training stops after two epochs: the RAM fills up to 64 GB and the job is killed.\n"
    assert host_memory(_host_named([guess], ram)[0])
    for card in ("Training on my RTX 3090 stops: the RAM fills up and it is killed.\n", "我用GPU训练，内存不够\n",
                 "nvidia-smi shows the memory full, then the RAM fills and it is killed.\n"):
        assert _host_named([guess], card) == [guess]
    assert _host_named([guess], "Training stops after two epochs with out of memory.\n") == [guess]
    settled = Advice(id="oom_full", severity=ERROR, title="CUDA out of memory: the batch needs more than the card",
                     evidence=[], change={}, step=0)
    assert _host_named([settled], ram) == [settled]
