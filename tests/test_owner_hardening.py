"""The owner side under damage: torn lines, a full disk, crowded control sockets, endless output lines,
pid reuse and zombies, odd run names. Each test fails without its fix (issue 15)."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import psutil
import pytest

from loratui import events, rundir, runstatus
from loratui.eventlog import EventWriter, read_log
from loratui.outputtail import MAX_PENDING, OutputFollower
from loratui.supervisor import control
from tests.conftest import wait_for


def _notice(i: int) -> events.Notice:
    return events.Notice(t=float(i), level="info", key="n", message=str(i))


def test_a_torn_line_never_swallows_another_writers_event(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    with open(log, "ab") as torn:
        torn.write(b'{"kind":"output","t":1,"stream":"stdout","lines":["half an ev')  # killed mid-write
    writer = EventWriter(log)
    writer.write(_notice(2))
    writer.close()
    contents = read_log(log)
    assert contents.events == [_notice(2)] and contents.skipped == 1


_KILLED_WRITER = """
import sys, time
from pathlib import Path
from loratui import events
from loratui.eventlog import EventWriter
w = EventWriter(Path(sys.argv[1]))
big = ["x" * 4000] * 200  # ~800 KB a line: a kill often lands inside the write
print("ready", flush=True)
while True:
    w.write(events.Output(t=time.time(), stream="stdout", lines=big))
"""


def test_writer_killed_mid_event_x20_damages_no_line_of_the_other_writer(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    mine = EventWriter(log)
    written = 0
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(log)], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        mine.write(_notice(written))
        written += 1
    mine.close()
    notices = [e for e in read_log(log).events if isinstance(e, events.Notice)]
    assert notices == [_notice(i) for i in range(20)]


def test_a_full_disk_drops_events_without_raising_and_says_so_when_space_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "events.jsonl"
    writer = EventWriter(log)
    writer.write(_notice(0))
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    for i in range(1, 4):
        writer.write(_notice(i))  # the trainer's callback must not die of this
    assert writer.dropped == 3
    monkeypatch.setattr(os, "write", real_write)
    writer.write(_notice(4))
    writer.close()
    found = read_log(log).events
    assert found[:2] == [_notice(0), _notice(4)]
    assert isinstance(found[2], events.Notice) and found[2].key == "disk_full" and "3 event(s)" in found[2].message


def test_an_oversized_event_becomes_a_notice(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path / "events.jsonl")
    writer.write(events.Output(t=1.0, stream="stdout", lines=["y" * (2 << 20)]))
    writer.close()
    (found,) = read_log(tmp_path / "events.jsonl").events
    assert isinstance(found, events.Notice) and found.key == "event_too_large"


def _server(tmp_path: Path, handle: control.HandleFn) -> tuple[Path, socket.socket]:
    path = tmp_path / "c.sock"
    server = control.listen(path)
    threading.Thread(target=control.serve, args=(server, handle), daemon=True).start()
    return path, server


def test_an_idle_client_does_not_hold_up_the_control_socket(tmp_path: Path) -> None:
    path, server = _server(tmp_path, lambda request: None)
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect(os.fspath(path))  # connects, says nothing
    start = time.monotonic()
    control.send(path, "pause")
    assert time.monotonic() - start < control.CLIENT_TIMEOUT_S / 2
    idle.close()
    server.close()


def test_200_clients_at_once_are_all_answered(tmp_path: Path) -> None:
    seen: list[str] = []
    path, server = _server(tmp_path, lambda request: seen.append(request.command))  # type: ignore[func-returns-value]
    errors: list[Exception] = []

    def one() -> None:
        try:
            control.send(path, "save")
        except Exception as exc:  # noqa: BLE001 - counted below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    server.close()
    assert errors == [] and len(seen) == 200


def test_output_without_newlines_is_bounded_and_keeps_the_last_redraw() -> None:
    got: list[list[str]] = []
    follower = OutputFollower(Path("unused"), got.append)
    for i in range(20000):  # a \r progress bar redrawn for hours: ~1.3 MB with no newline
        follower.feed(f"\r 40%|####      | {i}/50000 [00:10<00:15]".encode())
        assert len(follower.pending) <= MAX_PENDING + 64
    follower.feed(b"\n")
    assert got == [[" 40%|####      | 19999/50000 [00:10<00:15]"]]


def test_an_output_file_over_its_limit_is_rotated(tmp_path: Path) -> None:
    path = tmp_path / "trainer.stdout.log"
    path.write_bytes(b"")
    got: list[str] = []
    follower = OutputFollower(path, got.extend, max_file=4096)
    done = threading.Event()
    thread = threading.Thread(target=follower.run, args=(done,))
    thread.start()
    with open(path, "ab") as out:
        for i in range(300):
            out.write(f"line {i:04d} ".encode() + b"." * 40 + b"\n")
            out.flush()
            if i % 50 == 0:
                time.sleep(0.3)  # bursts apart: the follower reads in between (no result depends on it)
    wait_for(lambda: got and got[-1].split()[1] == "0299")  # read to the end, however slow the box
    done.set()
    thread.join()
    assert path.stat().st_size < 4096 * 4 and path.with_name(path.name + ".1").exists()
    assert [g.split()[1] for g in got][-1] == "0299"


def test_a_zombie_or_a_reused_pid_is_not_a_live_supervisor(tmp_path: Path) -> None:
    run = rundir.RunDir(tmp_path)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    rundir.write_pidfile(run.pidfile, child.pid)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie, which
    # os.kill(pid, 0) calls alive
    assert run.supervisor_pid() is None
    child.wait()
    run.pidfile.write_text(f"{os.getpid()} 12345.000\n")  # our pid, someone else's start time
    assert run.supervisor_pid() is None
    rundir.write_pidfile(run.pidfile)
    assert run.supervisor_pid() == os.getpid()
    pid, created, stamp, host = run.pidfile.read_text().split()
    assert host == f"host={rundir.node_name()}"  # whose pid it is: a viewer on another host cannot check it
    run.pidfile.write_text(f"{pid} {created} {stamp.split(':')[0]}:{int(stamp.split(':')[1]) + 1} {host}\n")
    assert run.supervisor_pid() is None  # same pid, started a tick later: another process


def test_a_stepped_wall_clock_does_not_make_a_live_process_look_dead(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The CI box's clock jumped 41 s: psutil's create_time of every process moved with the kernel's boot
    time, the supervisor read as dead, its trainer went orphan and the headless viewer gave up."""
    run = rundir.RunDir(tmp_path)
    rundir.write_pidfile(run.pidfile)
    real = psutil.Process.create_time
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: real(self) + 41.0)
    assert run.supervisor_pid() == os.getpid()


def test_a_half_written_checkpoint_is_never_resumed_from(tmp_path: Path) -> None:
    for step, complete in ((10, True), (20, False)):
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        (ckpt / "adapter_model.safetensors").write_bytes(b"x")
        if complete:
            (ckpt / "trainer_state.json").write_text('{"global_step": 10}')
    assert rundir.latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")


def _settings(run_id: str) -> rundir.RunSettings:
    return rundir.RunSettings(run_id=run_id, name="x", recipe_source="/r.toml")


def test_a_dangling_symlink_at_the_next_run_id_is_skipped_not_followed(tmp_path: Path) -> None:
    (tmp_path / "20260101-000000-x").symlink_to(tmp_path / "elsewhere")
    run = rundir.create(tmp_path, _settings("20260101-000000-x"), "")
    assert run.path.name == "20260101-000000-x-2" and not (tmp_path / "elsewhere").exists()


def test_a_300_character_run_name_makes_a_usable_id() -> None:
    assert len(rundir.new_run_id("n" * 300)) < 120


def test_status_reads_only_the_tail_of_a_long_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = rundir.RunDir(tmp_path)
    writer = EventWriter(run.events)
    writer.write(events.Header(t=1.0, schema=1, run_id="r", recipe_hash="h"))
    writer.write(events.TrainBegin(t=2.0, max_steps=100, num_epochs=1.0))
    for i in range(20000):
        writer.write(events.Sample(t=3.0 + i / 10, gpu=0, used_max=(i % 7) << 30, used_last=0, used_min=0, total=1))
    writer.write(events.Step(t=5000.0, step=42, epoch=0.5, step_time=1.0))
    writer.write(events.Log(t=5000.1, step=42, values={"loss": "NaN"}))
    writer.close()
    status = runstatus.Status()
    runstatus.fold(status, read_log(run.events).events)
    runstatus.write(run, status)
    starts: list[int] = []
    real = runstatus._events
    monkeypatch.setattr(runstatus, "_events", lambda path, start: starts.append(start) or real(path, start))
    got = runstatus.read(run)
    assert starts == [run.events.stat().st_size - runstatus.TAIL_BYTES]
    assert (got.step, got.max_steps, got.loss, got.peak_used, got.state) == (42, 100, "NaN", 6 << 30, runstatus.LOST)
    assert msgspec.json.decode(run.status_file.read_bytes(), type=runstatus.Status).step == 42


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "loratui", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def _fake_run(runs: Path, run_id: str) -> None:
    run = runs / run_id
    run.mkdir(parents=True)
    (run / "events.jsonl").write_bytes(events.encode(events.Header(t=1.0, schema=1, run_id=run_id, recipe_hash="h"))
                                       + events.encode(events.End(t=2.0, state="finished")))


def test_an_ambiguous_run_name_is_refused_with_the_candidates(tmp_path: Path) -> None:
    for run_id in ("20260101-000000-tiny", "20260102-000000-tiny"):
        _fake_run(tmp_path, run_id)
    result = _cli("stop", "tiny", "--runs-dir", str(tmp_path))
    assert result.returncode == 2 and "20260101-000000-tiny" in result.stderr and "20260102" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("where", ["file", "under_file", "proc"])
def test_a_runs_dir_that_cannot_be_one_gets_one_message(tmp_path: Path, where: str) -> None:
    (tmp_path / "f").write_text("")
    runs = {"file": tmp_path / "f", "under_file": tmp_path / "f" / "runs", "proc": Path("/proc/loratui-runs")}[where]
    result = _cli("import", str(Path(__file__).parent / "data" / "stdout" / "tqdm_v4.log"), "--runs-dir", str(runs))
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path: Path) -> None:
    for i in range(40):
        _fake_run(tmp_path, f"20260101-0000{i:02d}-r")
    shell = subprocess.run(f"{sys.executable} -m loratui ls --runs-dir {tmp_path} | head -1", shell=True,
                           capture_output=True, text=True, timeout=300)
    assert shell.stdout.startswith("RUN") and shell.stderr == ""


def test_the_end_event_waits_for_room_instead_of_being_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = EventWriter(tmp_path / "events.jsonl")
    real_write, fails = os.write, [3]

    def full_three_times(fd: int, data: bytes) -> int:
        if fails[0]:
            fails[0] -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_three_times)
    writer.write_until_written(events.End(t=1.0, state="finished"), retry_s=0.01)
    writer.close()
    assert any(isinstance(e, events.End) for e in read_log(tmp_path / "events.jsonl").events)


def test_a_full_disk_under_the_trainers_stdout_does_not_end_training() -> None:
    from loratui.trainer.streams import TolerantStream

    class Full:
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    stream = TolerantStream(Full())  # type: ignore[arg-type]
    print({"loss": 1.0}, file=stream, flush=True)  # what the Trainer's PrinterCallback does
    assert stream.lost > 0


def test_stdout_and_stderr_are_read_in_turn_stdout_first(tmp_path: Path) -> None:
    """One thread reads both files, stdout first in each round: a traceback printed after the last step's line is read
    after it (two threads, each polling its own file, read the traceback first)."""
    import threading

    from loratui.outputtail import follow_together

    out, err = tmp_path / "out.log", tmp_path / "err.log"
    out.write_bytes(b""), err.write_bytes(b"")
    seen: list[str] = []
    followers = [OutputFollower(out, lambda lines: seen.extend("out:" + x for x in lines)),
                 OutputFollower(err, lambda lines: seen.extend("err:" + x for x in lines))]
    done = threading.Event()
    thread = threading.Thread(target=follow_together, args=(followers, done))
    thread.start()
    deadline = time.monotonic() + 10
    while "out:ready" not in seen and time.monotonic() < deadline:  # both files open at their end, being read
        with open(out, "ab") as o:
            o.write(b"ready\n")
        time.sleep(0.05)
    seen.clear()
    with open(out, "ab") as o, open(err, "ab") as e:
        o.write(b"step 25 loss 0.12\n")
        o.flush()
        e.write(b"Traceback (most recent call last):\n")
    done.set()
    thread.join(timeout=5)
    assert seen == ["out:step 25 loss 0.12", "err:Traceback (most recent call last):"]


def test_a_follower_that_leaves_rotation_to_another_reads_the_file_again_once_cut(tmp_path: Path) -> None:
    """The keeper reads a watched command's output beside the supervisor, which rotates it (copytruncate): from where
    it was told to start, and from the start again once the file is cut below where it was."""
    import threading

    from loratui.outputtail import follow_together

    out = tmp_path / "out.log"
    out.write_bytes(b"before\n")
    seen: list[str] = []
    done = threading.Event()
    thread = threading.Thread(target=follow_together,
                              args=([OutputFollower(out, seen.extend, max_file=0)], done, [len(b"before\n")]))
    thread.start()
    with open(out, "ab") as o:
        o.write(b"step 1 loss 2.0\n" * 4)
    deadline = time.monotonic() + 10
    while len(seen) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(out, "r+b") as o:
        o.truncate(0)  # the supervisor's rotation
    with open(out, "ab") as o:
        o.write(b"step 2 loss 1.5\n")
    while len(seen) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    done.set()
    thread.join(timeout=5)
    assert seen == ["step 1 loss 2.0"] * 4 + ["step 2 loss 1.5"] and out.stat().st_size == 16
