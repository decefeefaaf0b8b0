"""What a newcomer's tmux trial of the README found outside the app (issue 26's trial)."""

from __future__ import annotations

import io

from loratui import events
from loratui.logic.runstate import RunState
from loratui.tui.headless import print_end
from tests import scenarios


def test_a_stopped_run_is_not_told_the_suspends_exit_code() -> None:
    """Suspended (`P`), then stopped: the headless end line said "stopped at step 37 (exit code 75)", the
    code of the suspend, read as a failure. A failed run still gets its exit code."""
    for end, said in ((events.End(t=scenarios.T0 + 999, state=events.STOPPED, exit_code=75, step=37),
                       "stopped at step 37\n"),
                      (events.End(t=scenarios.T0 + 999, state=events.FAILED, exit_code=1, step=37),
                       "failed at step 37 (exit code 1)\n")):
        state = RunState().feed_all(scenarios.run(37) + [end])
        out = io.StringIO()
        print_end(state, out)
        assert out.getvalue().splitlines(keepends=True)[0].endswith(said), out.getvalue()


def test_a_watched_scripts_estimate_notice_gives_its_figure() -> None:
    """`loratui run -- python train_hf.py` printed "notice: estimate at 32 tokens (the longest example)",
    with no figure: the notice says the estimate it announces."""
    from types import SimpleNamespace
    from typing import Any

    from loratui.recipe import load_recipe
    from loratui.trainer.preflight import record_estimate
    from tests.conftest import SMALL_QWEN2, TINY

    written: list[Any] = []
    model = SimpleNamespace(config=SimpleNamespace(to_dict=lambda: {**SMALL_QWEN2, "tie_word_embeddings": True}))
    recipe = load_recipe(TINY)
    record_estimate(written.append, recipe, model, False, 0, recipe.data.max_length, None, "the longest example")
    (estimate,) = [e for e in written if isinstance(e, events.Estimate)]
    notices = [e.message for e in written if isinstance(e, events.Notice) and e.key == "estimate"]
    assert notices == [f"estimate at {recipe.data.max_length} tokens (the longest example): "
                       f"{estimate.peak_device_gib * 1024:.0f} MiB"], notices  # under a GiB: MiB


def test_a_cpu_runs_estimate_under_a_gib_is_said_in_mib() -> None:
    """A CPU tiny run printed "estimate at the longest example (40 tokens): 0.0 GiB; at max_length 64 it would
    be 0.0 GiB": one decimal of a GiB says nothing of 40-60 MiB."""
    from types import SimpleNamespace
    from typing import Any

    from loratui.recipe import load_recipe
    from loratui.trainer.preflight import record_estimate
    from tests.conftest import SMALL_QWEN2, TINY

    written: list[Any] = []
    model = SimpleNamespace(config=SimpleNamespace(to_dict=lambda: {**SMALL_QWEN2, "tie_word_embeddings": True}))
    recipe = load_recipe(TINY)
    record_estimate(written.append, recipe, model, False, 0, 40)
    (estimate,) = [e for e in written if isinstance(e, events.Estimate)]
    (notice,) = [e.message for e in written if isinstance(e, events.Notice) and e.key == "estimate"]
    assert 0 < estimate.peak_device_gib < 1 and "0.0 GiB" not in notice, notice
    assert notice.startswith(f"estimate at the longest example (40 tokens): {estimate.peak_device_gib * 1024:.0f} "
                             f"MiB; at max_length {recipe.data.max_length} it would be "), notice
    assert notice.endswith(" MiB"), notice


def test_a_stop_that_was_asked_for_is_not_an_error_in_the_story() -> None:
    """`loratui attach` after `loratui stop`: the away card marked "ended stopped" with `!!`, as a failure."""
    from loratui.logic.story import ERROR, INFO, Story

    t = scenarios.T0 + 999
    for end, level in ((events.End(t=t, state=events.STOPPED, step=12), INFO),
                       (events.End(t=t, state=events.STOPPED, step=12, cause="CANCELLED"), ERROR),
                       (events.End(t=t, state=events.FAILED, step=12, error="boom"), ERROR),
                       (events.End(t=t, state=events.FINISHED, step=12), INFO)):
        story = Story().feed_all(scenarios.run(12) + [events.Control(t=t - 1, command="stop", source="cli"), end])
        assert story.moments[-1].text.startswith("ended ") and story.moments[-1].level == level, (end, story.moments[-1])


def test_an_oom_with_sizes_but_no_breakdown_is_not_said_to_give_no_numbers() -> None:
    """`loratui doctor -` on a short OOM said "(the message gives no usable numbers)" above its own evidence
    "tried to allocate 2.00 GiB", "1.02 GiB free of 23.65 GiB total"."""
    import subprocess
    import sys

    text = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    model.to("cuda")\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 23.65 GiB of which 1.02 GiB is free.\n")
    result = subprocess.run([sys.executable, "-m", "loratui", "doctor", "-"], input=text, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "does not say what holds the memory" in result.stdout and "no usable numbers" not in result.stdout
    assert "1.02 GiB free of 23.65 GiB total" in result.stdout, result.stdout


def test_an_oom_with_only_the_request_is_not_said_to_give_no_numbers() -> None:
    """Trial 7: `RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB` got the title "(the message gives no
    usable numbers)" above its own evidence "tried to allocate 2.00 GiB"."""
    from loratui.logic.advisor import Advisor
    from loratui.logic.text_reader import TextReader

    advisor, reader = Advisor(None, pasted=True), TextReader(stream="stderr")
    for line in ("Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                 "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"):
        advisor.feed_all(reader.feed(line))
    advisor.feed_all(reader.close())
    first = advisor.items()[0]
    assert first.id == "oom_full" and "no usable numbers" not in first.title, first.title
    assert "only the size it asked for" in first.title and any("2.00 GiB" in line for line in first.evidence)
