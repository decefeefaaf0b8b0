"""A CPU run at 80x24: the VRAM and GPU-util panes could only say N/A (about 5 rows); with no GPU they fold into
one line, "GPU: none (CPU run)", and the loss chart gets the rows."""

from __future__ import annotations

from loratui import events
from loratui.sources.runlog import ListSource
from loratui.tui.app import LoratuiApp
from loratui.tui.widgets.loss_plot import LossPlot
from tests import scenarios

NVML = "NVML cannot start: NVML Shared Library Not Found"


def _cpu_run(steps: int = 8) -> list[events.AnyEvent]:
    """The tiny recipe on a box without a GPU, as its log has it: NVML absent, device cpu, no torch figures."""
    found: list[events.AnyEvent] = []
    for e in scenarios.run(steps):
        if isinstance(e, events.Sample):
            continue
        if isinstance(e, events.GpuInfo):
            e = events.GpuInfo(t=e.t, available=False, reason=NVML)
        elif isinstance(e, events.TrainBegin):
            e = events.TrainBegin(t=e.t, max_steps=e.max_steps, num_epochs=e.num_epochs, device="cpu")
        elif isinstance(e, events.Estimate):
            e = events.Estimate(t=e.t, peak_device_gib=36 / 1024, peak_reserved_gib=36 / 1024)
        elif isinstance(e, events.Step):
            e = events.Step(t=e.t, step=e.step, epoch=e.epoch, step_time=e.step_time, tokens=e.tokens)
        found.append(e)
    return found


def _screen(app: LoratuiApp) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]  # noqa: SLF001


async def _folded(pilot) -> None:  # type: ignore[no-untyped-def]
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause()
    app.redraw()
    await pilot.pause()


async def test_a_cpu_run_at_80x24_says_gpu_none_on_one_line_and_the_chart_gets_the_rows() -> None:
    app = LoratuiApp(ListSource(_cpu_run()), clock=lambda: 0.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot)
        screen = _screen(app)
        chart_rows = app.query_one(LossPlot).outer_size.height
    gpu_lines = [line for line in screen if "GPU" in line or "VRAM" in line or "N/A" in line]
    # The estimate says it is a CPU run's (`loratui estimate` says its GPU figure holds the CUDA context)
    assert len(gpu_lines) == 1 and gpu_lines[0].lstrip().startswith(
        "GPU: none (CPU run) · estimate 36 MiB on CPU (no CUDA context)"), screen
    assert chart_rows >= 16, (chart_rows, screen)  # 10 before: the two panes took 4 + 3 rows
    # The NVML reason does not fit at 80 columns: it is left out whole, never cut to an alarming "NVML cannot".
    assert "NVML" not in gpu_lines[0] and gpu_lines[0].rstrip().endswith("(no CUDA context)"), gpu_lines


async def test_the_nvml_reason_still_shows_where_the_line_has_room() -> None:
    app = LoratuiApp(ListSource(_cpu_run()), clock=lambda: 0.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await _folded(pilot)
        text = "\n".join(_screen(app))
    assert text.count(NVML) == 1 and "GPU util" not in text, text


async def test_a_gpu_run_keeps_both_panes() -> None:
    app = LoratuiApp(ListSource(scenarios.run(8)), clock=lambda: 0.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot)
        text = "\n".join(_screen(app))
    assert "GPU util" in text and "VRAM NVIDIA H200" in text and "GPU: none" not in text, text


async def test_a_record_without_gpu_readings_says_so_once_instead_of_waiting() -> None:
    """`loratui replay` of a run imported from a trainer_state.json (a real one, v5_final.json) showed "device
    memory: N/A (waiting for the first sample)" and "utilisation: N/A" for a record that has ended and will never
    hold a sample: a wait that never ends, in 7 rows the loss chart needs at 80x24."""
    from pathlib import Path

    from loratui.sources import importers

    found = importers.import_path(Path(__file__).parent / "data" / "trainer_state" / "v5_final.json")
    assert isinstance(found[-1], events.End)
    app = LoratuiApp(ListSource(found[:-1]), clock=lambda: 0.0)  # a replay before its end, too
    async with app.run_test(size=(80, 24)) as pilot:
        await _folded(pilot)
        screen = _screen(app)
    text = "\n".join(screen)
    assert "waiting for the first sample" not in text and "GPU util" not in text, text
    gpu_lines = [line for line in screen if "GPU" in line or "VRAM" in line or "N/A" in line]
    assert len(gpu_lines) == 1 and gpu_lines[0].lstrip().startswith("GPU: no readings in this record"), screen


def test_a_watched_loop_without_nvml_says_why_without_nested_parentheses() -> None:
    """A plain PyTorch loop watched on a box without nvidia-ml-py (README's CPU install) read
    "GPU: none (nvidia-ml-py is not installed (pip install 'loratui[gpu]'))"."""
    from loratui.logic.runstate import RunState
    from loratui.tui.widgets.vram import _none_line
    reason = "nvidia-ml-py is not installed (pip install 'loratui[gpu]')"
    line = _none_line(RunState(gpu_available=False, gpu_reason=reason), 80).plain
    assert line == f"GPU: none · {reason}", line
    assert _none_line(RunState(gpu_available=False), 80).plain == "GPU: none found"


def test_a_cpu_run_recorded_without_nvidia_ml_py_is_not_told_to_install_it() -> None:
    """Trial 13: `loratui replay` of a tiny run recorded after the README's CPU install (`pip install .`, no [gpu])
    showed "GPU: none (CPU run) · ... · nvidia-ml-py is not installed (pip install 'loratui[gpu]')" at 160 columns:
    a run that trained on the CPU needs no NVML."""
    from loratui.logic.runstate import RunState
    from loratui.tui.widgets.vram import _none_line
    reason = "nvidia-ml-py is not installed (pip install 'loratui[gpu]')"
    line = _none_line(RunState(gpu_available=False, gpu_reason=reason, device="cpu"), 200).plain
    assert line == "GPU: none (CPU run)", line
    line = _none_line(RunState(gpu_available=False, gpu_reason=NVML, device="cpu"), 200).plain
    assert line == f"GPU: none (CPU run) · {NVML}", line  # NVML's own reason is no instruction: it stays
