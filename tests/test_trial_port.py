"""Fixes from the unmerged `trial` branch (last session's tmux user trial) that main still lacked: the loss
chart's labels (one point or a flat series, the lr / grad-norm axes), 'ep --' without epochs, the replay's
help at 80x24, Ctrl-C on the headless progress printer."""

from __future__ import annotations

import msgspec

from loratui import events
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from loratui.tui.widgets.loss_plot import LossPlot
from tests import scenarios
from tests.test_app import FakeClock, _folded, _screen


def _labels(app: LoratuiApp, side: str = "┤") -> list[str]:
    """The y-axis labels the loss pane draws, top to bottom (left axis; `├` the right one)."""
    plot = app.query_one(LossPlot)
    rows = _screen(app)[plot.region.y:plot.region.bottom]
    if side == "┤":
        return [line.split("┤")[0].strip("│ ") for line in rows if "┤" in line]
    return [line.split("├")[1].strip("│ ") for line in rows if "├" in line]


def _flat(found: list[events.AnyEvent]) -> list[events.AnyEvent]:
    return [msgspec.structs.replace(e, values={**e.values, "loss": 6.5, "learning_rate": 2e-4})
            if isinstance(e, events.Log) and "loss" in e.values else e for e in found]


async def test_one_point_or_a_flat_series_gets_one_clear_label() -> None:
    """A tiny run's first steps: the loss axis read 6.5, 6.5, 6.5, 6.5 (plotext's own labels on a flat
    range); a constant learning rate is the same case on the lr view."""
    cases = ((scenarios.run(1), "loss", (80, 24)), (_flat(scenarios.run(3)), "loss", (80, 24)),
             (_flat(scenarios.run(3)), "loss", (160, 48)), (_flat(scenarios.run(20)), "lr", (80, 24)))
    for found, view, size in cases:
        app = LoratuiApp(ListSource(found), clock=FakeClock())
        async with app.run_test(size=size) as pilot:
            await _folded(pilot, app)
            if view == "lr":
                await pilot.press("t")
                await pilot.pause()
            drawn = _labels(app)
        assert drawn in (["3.078"], ["6.5"], ["0.0002"]), (view, size, drawn)  # each series' one value


async def test_lr_and_grad_norm_axes_are_round_and_evenly_spaced() -> None:
    """The trial's `t` view read 0.001000, 0.000950, 0.000850, 0.000800 (and 1.18, 1.08, 0.87 on the
    right): plotext's labels where its rows fell."""
    for size in ((80, 24), (160, 48)):
        app = LoratuiApp(ListSource(scenarios.run(30)), clock=FakeClock())
        async with app.run_test(size=size) as pilot:
            await _folded(pilot, app)
            await pilot.press("t")
            await pilot.pause()
            left, right = _labels(app), _labels(app, "├")
        for labels in (left, right):
            values = [float(v) for v in labels]
            gaps = {round(a - b, 12) for a, b in zip(values, values[1:])}
            assert len(values) >= 2 and len(gaps) == 1, (size, left, right)
            assert len(set(labels)) == len(labels), (size, labels)


async def test_a_run_without_epochs_shows_no_epoch_count() -> None:
    """A watched plain loop's steps carry no epoch: the status bar said `ep 0.00` at every step."""
    from loratui.tui.widgets.status import StatusBar

    plain = [msgspec.structs.replace(e, epoch=0.0) if isinstance(e, events.Step) else e for e in scenarios.run(12)]
    for found, shown in ((plain, " ep --  "), (scenarios.run(12), " ep 0.")):
        app = LoratuiApp(ListSource(found), clock=FakeClock())
        async with app.run_test(size=(80, 24)) as pilot:
            await _folded(pilot, app)
            text = str(app.query_one(StatusBar).render())
        assert app.run_state.step == 12 and shown in text, text


async def test_the_replay_help_fits_80x24_and_160x48() -> None:
    """At 80x24 the replay's two-column help wrapped inside its columns ("(x1 … x1000)" and "event of note"
    on lines of their own, under the other column)."""
    from loratui.tui.replay_app import HELP, replay_app
    from tests.test_replay_app import _until

    for size in ((80, 24), (160, 48)):
        app = replay_app(scenarios.nan_run(), None, "nan", speed=1)
        async with app.run_test(size=size) as pilot:
            await _until(pilot, lambda: "help" in _screen(app)[-1])
            await pilot.press("question_mark")
            await _until(pilot, lambda: "this help" in "\n".join(_screen(app)))
            seen = "\n".join(_screen(app))
            dialog = app.screen.query_one("#dialog")
            assert dialog.region.right <= size[0] and dialog.region.bottom <= size[1]
        for line in HELP.splitlines():
            assert line.strip() in seen, (size, line)


def test_ctrl_c_on_the_progress_printer_keeps_each_command_on_one_line(runs_dir) -> None:  # type: ignore[no-untyped-def]
    """`loratui run --headless`, then Ctrl-C: the detach message was one long line that an 80-column
    terminal broke inside `loratui attach RUN` (as the app's farewell was)."""
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO, kinds, wait_for

    # Ctrl-C as a terminal's foreground command gets it: a suite run as a shell's background job ignores SIGINT,
    # and a child inherits an ignored signal (the test then timed out waiting for an answer to a Ctrl-C never felt)
    proc = subprocess.Popen([sys.executable, "-m", "loratui", "run", "--headless", "--runs-dir", str(runs_dir),
                             "--", sys.executable, "-c", "import time; print('ready-7q', flush=True); time.sleep(120)"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        def printed() -> bool:  # the command's own output, not its command line in the header
            return any("ready-7q" in line for run in runs_dir.glob("*/") for e in kinds(run, "output")
                       for line in e["lines"])  # type: ignore[attr-defined]

        wait_for(printed, timeout=120)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground command
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    run_id = next(runs_dir.glob("*/events.jsonl")).parent.name
    lines = out.splitlines()
    assert f"  loratui attach {run_id}" in lines and f"  loratui stop {run_id}" in lines, out + err
    assert proc.returncode == 0, err


def test_doctor_on_an_80_column_terminal_breaks_no_line_mid_word(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`loratui doctor - < oom.txt` in an 80-column tmux: the advice's headline and the quoted error ran
    past the edge and the terminal broke them mid-word ('... GP' / 'U 0 has a total capacity')."""
    import shutil
    import sys

    import pytest

    from tests.conftest import REPO, wait_for
    from tests.test_tmux import Tmux

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    tmux = Tmux(tmp_path / "tmux.sock")
    pasted = REPO / "tests" / "data" / "trial" / "oom_traceback.txt"
    tmux("new-session", "-d", "-s", "doc", "-x", "80", "-y", "40",
         f"cd {REPO} && {sys.executable} -m loratui doctor - < {pasted}; echo rc=$?; sleep 60")
    try:
        wait_for(lambda: "rc=" in tmux.screen("doc"), timeout=120)
        as_drawn = tmux("capture-pane", "-p", "-t", "doc")
        joined = tmux("capture-pane", "-p", "-J", "-t", "doc")  # lines the terminal wrapped, joined back
    finally:
        tmux("kill-server")
    assert "rc=1" in as_drawn and "CUDA out of memory" in as_drawn, as_drawn
    assert joined.splitlines() == as_drawn.splitlines(), as_drawn  # nothing wrapped by the terminal
    assert "1.02 GiB free of 23.65 GiB total" in as_drawn and "gradient checkpointing" in as_drawn, as_drawn


def test_the_headless_printers_first_lines_break_no_command_at_80_columns(runs_dir) -> None:  # type: ignore[no-untyped-def]
    """`loratui run --headless -- python ...` in an 80-column tmux: its first line, 'run ID in runs/ID
    (loratui attach ID; loratui stop ID)', was broken by the terminal inside the run id of `loratui attach`."""
    import shutil
    import sys

    import pytest

    from tests.conftest import REPO, wait_for
    from tests.test_tmux import Tmux

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    runs_dir.mkdir(parents=True)
    tmux = Tmux(runs_dir.parent / "tmux.sock")
    command = f"{sys.executable} -m loratui run --headless --runs-dir runs -- {sys.executable} -c \"print('hi')\""
    tmux("new-session", "-d", "-s", "hl", "-x", "80", "-y", "40",
         f"cd {runs_dir.parent} && PYTHONPATH={REPO} TERM=xterm-256color {command}; echo rc=$?; sleep 60")
    try:
        wait_for(lambda: "rc=" in tmux.screen("hl"), timeout=180)
        as_drawn = tmux("capture-pane", "-p", "-t", "hl")
    finally:
        tmux("kill-server")
    run_id = next(runs_dir.glob("*/events.jsonl")).parent.name
    assert "rc=0" in as_drawn, as_drawn
    lines = as_drawn.splitlines()
    for command in ("loratui attach", "loratui stop"):
        said = [line for line in lines if command in line]
        assert said and all(f"{command} {run_id}" in line for line in said), (command, as_drawn)


async def test_an_exploded_grad_norm_gets_short_axis_labels() -> None:
    """A diverging run's grad norm of 1e30 on the lr view: round labels in fixed point were 31 digits long."""
    found = [msgspec.structs.replace(e, values={**e.values, "grad_norm": 1e30})
             if isinstance(e, events.Log) and e.step == 20 else e for e in scenarios.run(30)]
    app = LoratuiApp(ListSource(found), clock=FakeClock())
    async with app.run_test(size=(160, 48)) as pilot:
        await _folded(pilot, app)
        await pilot.press("t")
        await pilot.pause()
        right = _labels(app, "├")
    assert len(right) >= 2 and all(len(label) <= 6 for label in right), right
    assert max(float(label) for label in right) == 1e30, right


PRESS_DURING_START = """
import os, signal, sys
from loratui.supervisor import launch
spawn = launch.spawn_supervisor
def pressed(*args, **kwargs):
    pid = spawn(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while `loratui run` is still starting the run
    return pid
launch.spawn_supervisor = pressed
from loratui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_while_the_run_is_starting_detaches_from_it(runs_dir) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C pressed after the supervisor was spawned but before the progress printer was up (a loaded machine
    makes that window long) ended `loratui run` with 130 and no word, the run training on unannounced: it is
    held, and answered as a Ctrl-C on the printer is, with how to attach and stop."""
    import subprocess
    import sys

    from tests.conftest import REPO

    proc = subprocess.run([sys.executable, "-c", PRESS_DURING_START, "run", "--headless", "--runs-dir",
                           str(runs_dir), "--", sys.executable, "-c", "import time; time.sleep(120)"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    run_id = next(runs_dir.glob("*/events.jsonl")).parent.name
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"  loratui attach {run_id}" in proc.stdout.splitlines(), proc.stdout + proc.stderr


def test_a_held_ctrl_c_is_raised_at_release_and_the_handler_restored() -> None:
    """A start that fails restores Python's handler without raising (its own error is what to say); a Ctrl-C
    pressed while held is raised once, at release."""
    import signal

    import pytest

    from loratui.held_interrupt import HeldInterrupt

    # Python's default in a terminal; ignored (SIG_IGN) when the tests run as a shell's background job: restored to
    # whichever it was (the suite failed as a background job asserting the default)
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(OSError), HeldInterrupt.hold():
        raise OSError("the start failed")

    assert signal.getsignal(signal.SIGINT) == before
    held = HeldInterrupt.hold()
    signal.raise_signal(signal.SIGINT)  # held: noted, not raised
    with pytest.raises(KeyboardInterrupt):
        held.release()
    assert signal.getsignal(signal.SIGINT) == before
