"""Hostile input on every surface (issue 25): recipes, event logs, run directories, configs, trainer_state
files, alert URLs and command-line arguments. Each case runs through the real CLI entry point (or `A`'s
config writer) in a worker process under an address-space limit, each with its own time limit (SIGALRM):
no internal error, no traceback, no hang, and a refusal (exit 2) is one line. The counts are printed.

One worker process runs every case in turn (a process per case would take minutes on 2 cores); it runs
in a scratch folder so that `init` or `report` write nothing into the repository.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from tests import scenarios
from tests.conftest import REPO, SMALL_QWEN2, TINY

MEMORY = 3 << 30
CASE_S = 20
DEEP = 100_000
RECIPE = TINY.read_text().replace('path = "data/', f'path = "{TINY.parent}/data/')


# -- the worker (runs in the subprocess) ---------------------------------------------------------------


class _Hang(BaseException):
    """Raised by the case's alarm; a BaseException, so that the CLI's internal-error net lets it through."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Hang()


def worker(cases_path: str) -> None:
    """Run each case of the JSON file; print one JSON result a line."""
    from loratui import cli

    signal.signal(signal.SIGALRM, _alarm)
    for case in json.loads(Path(cases_path).read_text()):
        out, err = io.StringIO(), io.StringIO()
        began, rc = time.monotonic(), None
        signal.alarm(CASE_S)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = _config_case(case) if case.get("config") else cli.main(case["argv"])
        except SystemExit as exc:  # argparse's own refusal: usage and one error line, exit 2
            rc = exc.code if isinstance(exc.code, int) else 2
        except _Hang:
            rc = "hang"
        except BaseException as exc:  # noqa: BLE001 - anything escaping main is the finding
            rc = f"escaped {type(exc).__name__}: {str(exc)[:200]}"
        finally:
            signal.alarm(0)
        print(json.dumps({"surface": case["surface"], "name": case["name"], "rc": rc,
                          "stderr": err.getvalue()[-3000:], "s": round(time.monotonic() - began, 2)}),
              file=sys.__stdout__, flush=True)


def _config_case(case: dict[str, Any]) -> int:
    """`A` on a watched command's config: the fixed copy is written, or one ApplyError line."""
    from loratui import rundir
    from loratui.errors import ApplyError
    from loratui.supervisor.restart import write_fix

    try:
        write_fix(rundir.RunDir(Path(case["run"])), "vram_near_limit", case["fix"])
    except ApplyError as exc:
        print(f"loratui: {exc}", file=sys.stderr)
        return 2
    return 0


# -- the cases (built by the test) --------------------------------------------------------------------


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    path.write_bytes(data)
    return path


HOSTILE_VALUES: list[Any] = [None, "x", -1, 10**30, 1e308, [], {}, "\u202e\x1b]52;c;AAAA\x07", True,
                             [[[[[[[[[[]]]]]]]]]], "y" * 100_000]
"""Each field of each event kind and trainer_state gets each of these in turn."""
FEW_VALUES: list[Any] = [None, "x", 10**30, [], [[[[[[[[[[]]]]]]]]]]]
"""The same for run.json and status.json (a run directory costs more commands)."""


def _mutations(obj: dict[str, Any], values: list[Any] = HOSTILE_VALUES) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for key in obj:
        if key == "kind":
            continue
        for index, value in enumerate(values):
            found.append((f"{key}={index}", {**obj, key: value}))
    return found


def _raw_lines() -> list[tuple[str, bytes]]:
    """Whole-line damage that is not a field's value."""
    return [
        ("deep", b'{"kind":"log","t":5,"step":1,"values":{"a":' + b"[" * DEEP + b"]" * DEEP + b"}}"),
        ("deep_object", b'{"kind":"step","t":5,"x":' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"}"),
        ("digits", b'{"kind":"step","t":5,"step":' + b"9" * 5000 + b',"epoch":0,"step_time":1}'),
        ("binary", bytes(range(1, 256)) * 4),
        ("nul", b'{"kind":"state","t":5,"state":"training\x00"}'),
        ("bad_utf8", b'{"kind":"notice","t":5,"level":"info","message":"\xff\xfe\xc3"}'),
        ("long_line", b'{"kind":"output","t":5,"stream":"stdout","lines":["' + b"z" * (2 << 20) + b'"]}'),
        ("not_object", b"[1, 2, 3]"), ("number", b"42"), ("empty_object", b"{}"),
        ("kind_not_string", b'{"kind":5,"t":1}'), ("unknown_kind", b'{"kind":"from_the_future","t":1}'),
        ("crlf", b'{"kind":"state","t":5,"state":"training"}\r'),
    ]


def _healthy() -> list[bytes]:
    return [msgspec.json.encode(e) for e in scenarios.run(5, max_steps=5)]


def _log_cases(root: Path) -> list[dict[str, Any]]:
    """A run directory per event kind whose log holds every mutation of that kind's fields."""
    runs = root / "logs"
    healthy = _healthy()
    by_kind: dict[str, list[bytes]] = {"raw": [line for _, line in _raw_lines()]}
    for line in healthy:
        obj = json.loads(line)
        by_kind.setdefault(obj["kind"], [])
        by_kind[obj["kind"]] += [json.dumps(m).encode() for _, m in _mutations(obj)][:200]
    by_kind["end"] = [json.dumps(m).encode() for _, m in _mutations(
        {"kind": "end", "t": 1.8e9 + 100, "state": "finished", "exit_code": 0, "signal": "", "error": "", "step": 5})]
    cases = []
    for kind, lines in by_kind.items():
        run = runs / f"hostile-{kind}"
        _write(run / "events.jsonl", b"\n".join(healthy + lines) + b"\n")
        _write(run / "recipe.toml", RECIPE)
        for argv in (["replay", str(run), "--summary"], ["replay", str(run), "--headless"],
                     ["attach", str(run), "--headless"], ["doctor", str(run)], ["doctor", str(run / "events.jsonl")],
                     ["import", str(run / "events.jsonl"), "--runs-dir", str(root / "imported")],
                     ["report", str(run), "--out", str(root / "reports" / kind)]):
            cases.append({"surface": "logs", "name": f"{kind}:{argv[0]}", "argv": argv,
                          "lines": len(lines) if argv[0] == "doctor" and argv[1] == str(run) else 0})
    cases.append({"surface": "logs", "name": "ls", "argv": ["ls", "--runs-dir", str(runs)], "lines": 0})
    cases.append({"surface": "logs", "name": "ls --json", "argv": ["ls", "--json", "--runs-dir", str(runs)],
                  "lines": 0})
    return cases


def _run_dir_cases(root: Path) -> list[dict[str, Any]]:
    """Run directories whose own files (run.json, status.json, pid files, index, recipe) are hostile."""
    runs = root / "rundirs"
    settings = {"run_id": "x", "name": "x", "recipe_source": str(TINY), "recipe_dir": str(TINY.parent),
                "model_path": None, "max_steps": None, "command": [], "cwd": "", "env": {}}
    status = {"state": "training", "step": 3, "max_steps": 5, "loss": 1.0, "peak_used": 1, "t": 1.8e9}
    files: dict[str, list[tuple[str, bytes]]] = {
        "run.json": [(n, json.dumps(m).encode()) for n, m in _mutations(settings, FEW_VALUES)],
        "status.json": [(n, json.dumps(m).encode()) for n, m in _mutations(status, FEW_VALUES)],
        "supervisor.pid": [("words", b"abc def"), ("huge", b"9" * 5000), ("negative", b"-1 0 x"), ("empty", b""),
                           ("init", b"1"), ("float_stamp", b"1 nan")],
        "trainer.pid": [("huge", b"99999999999999999999 1"), ("binary", bytes(range(256)))],
        "events.idx": [("junk", b"\x80\x04junk"), ("empty", b"")],
        "recipe.toml": [("deep", "[x]\na = " + "[" * DEEP + "]" * DEEP), ("binary", bytes(range(256))),
                        ("utf16", RECIPE.encode("utf-16")), ("bom", "\ufeff" + RECIPE)],
        "control.cmds": [("binary", bytes(range(256)) * 100)],
        "trainer.hook.json": [("deep", b"[" * DEEP + b"]" * DEEP), ("list", b"[1]")],
    }
    healthy = b"\n".join(_healthy()) + b"\n"
    cases = []
    made = []
    for file, variants in files.items():
        for name, data in variants:
            run = runs / f"{file.replace('.', '_')}-{name}"
            _write(run / "events.jsonl", healthy)
            _write(run / "recipe.toml", RECIPE)
            _write(run / "run.json", json.dumps(settings))
            _write(run / file, data)
            made.append(run)
    for name in ("run.json", "status.json", "supervisor.pid", "recipe.toml"):
        run = runs / f"fifo-{name.replace('.', '_')}"
        _write(run / "events.jsonl", healthy)
        (run / name).unlink(missing_ok=True)
        os.mkfifo(run / name)
        made.append(run)
    loop = runs / "symlink-loop"
    _write(loop / "events.jsonl", healthy)
    (loop / "run.json").symlink_to(loop / "run.json")
    made.append(loop)
    for run in made:
        for argv in (["attach", str(run), "--headless"], ["stop", str(run)], ["doctor", str(run)]):
            cases.append({"surface": "run dirs", "name": f"{run.name}:{argv[0]}", "argv": argv})
    cases.append({"surface": "run dirs", "name": "ls", "argv": ["ls", "--runs-dir", str(runs)]})
    return cases


def _recipe_cases(root: Path) -> list[dict[str, Any]]:
    data = root / "data"
    os.mkfifo(_write(data / "x", b"").with_name("fifo.jsonl"))
    (data / "zero.jsonl").symlink_to("/dev/zero")
    _write(data / "one_line.jsonl", b'{"instruction": "' + b"x" * (65 << 20) + b'"')
    texts: dict[str, str | bytes] = {
        "bom": "\ufeff" + RECIPE, "utf16": RECIPE.encode("utf-16"), "binary": bytes(range(256)) * 10,
        "empty": "", "nul": RECIPE.replace("[data]", "[da\x00ta]"), "bad_utf8": RECIPE.encode() + b"\xff\xfe",
        "deep_array": RECIPE + "\n[x]\na = " + "[" * DEEP + "]" * DEEP,
        "deep_table": RECIPE + "\n[x]\na = " + "{b = " * DEEP + "1" + "}" * DEEP,
        "dotted_key": RECIPE + "\n[x]\n" + "a." * DEEP + "b = 1",
        "digits": RECIPE.replace("seed = 0", "seed = " + "9" * 5000),
        "huge_int": RECIPE.replace("max_steps = 300", "max_steps = 99999999999999999999"),
        "nan": RECIPE.replace("max_length = 64", "max_length = nan"),
        "inf_lr": RECIPE.replace("seed = 0", "seed = 0\nlearning_rate = inf"),
        "negative": RECIPE.replace("max_steps = 300", "max_steps = -3"),
        "wrong_type": RECIPE.replace("max_steps = 300", 'max_steps = "many"'),
        "table_as_value": RECIPE.replace("[data]", "data = 3\n[data2]"),
        "duplicate_key": RECIPE.replace("seed = 0", "seed = 0\nseed = 1"),
        "huge_value": RECIPE.replace('optim = "adamw_torch"', 'optim = "' + "x" * 1_000_000 + '"'),
        "bidi_value": RECIPE.replace('optim = "adamw_torch"', 'optim = "\u202eadam\x1b[2J"'),
        "data_fifo": RECIPE.replace(f'path = "{TINY.parent}/data/tiny-instructions.jsonl"', f'path = "{data}/fifo.jsonl"'),
        "data_zero": RECIPE.replace(f'path = "{TINY.parent}/data/tiny-instructions.jsonl"', f'path = "{data}/zero.jsonl"'),
        "data_endless": RECIPE.replace(f'path = "{TINY.parent}/data/tiny-instructions.jsonl"',
                                       f'path = "{data}/one_line.jsonl"'),
    }
    cases = []
    for name, text in texts.items():
        path = _write(root / "recipes" / f"{name}.toml", text)
        cases.append({"surface": "recipes", "name": f"{name}:estimate", "argv": ["estimate", str(path)]})
        if name.startswith("data_"):  # refused by the pre-flight: nothing starts
            cases.append({"surface": "recipes", "name": f"{name}:run", "argv": [
                "run", str(path), "--headless", "--max-steps", "1", "--runs-dir", str(root / "started")]})
    model = root / "model"  # a local model whose weight index is hostile; the data path refuses the start
    _write(model / "config.json", json.dumps(SMALL_QWEN2))
    _write(model / "model.safetensors.index.json", '{"weight_map": ' + "[" * DEEP + "]" * DEEP + "}")
    path = _write(root / "recipes" / "deep_model_index.toml", texts["data_fifo"].replace(  # type: ignore[union-attr]
        'path = "loratui:tiny"', f'path = "{model}"'))
    cases.append({"surface": "recipes", "name": "deep_model_index:run", "argv": [
        "run", str(path), "--headless", "--max-steps", "1", "--runs-dir", str(root / "started")]})
    fifo = root / "recipes" / "fifo.toml"
    os.mkfifo(fifo)
    cases.append({"surface": "recipes", "name": "fifo:estimate", "argv": ["estimate", str(fifo)]})
    cases.append({"surface": "recipes", "name": "fifo:run", "argv": ["run", str(fifo), "--headless",
                                                                     "--runs-dir", str(root / "started")]})
    return cases


def _state_cases(root: Path) -> list[dict[str, Any]]:
    good = {"log_history": [{"step": 1, "loss": 2.0, "learning_rate": 1e-4}, {"step": 2, "loss": 1.5}],
            "global_step": 2, "max_steps": 2, "num_train_epochs": 1, "train_batch_size": 4}
    variants: list[tuple[str, bytes]] = [
        (n, json.dumps(m).encode()) for n, m in _mutations(good)]
    variants += [(f"entry_{n}", json.dumps({**good, "log_history": [m]}).encode())
                 for n, m in _mutations({"step": 1, "loss": 2.0, "epoch": 0.1})]
    variants += [("deep", b'{"log_history": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
                 ("digits", b'{"log_history": [{"step": ' + b"9" * 5000 + b', "loss": 1}]}'),
                 ("nan", b'{"log_history": [{"step": NaN, "loss": NaN}], "global_step": Infinity}'),
                 ("utf16", json.dumps(good).encode("utf-16")), ("bom", b"\xef\xbb\xbf" + json.dumps(good).encode()),
                 ("binary", bytes(range(256))), ("empty", b""), ("list", b"[1, 2]"), ("truncated", b'{"log_history": [')]
    cases = []
    for name, data in variants:
        path = _write(root / "states" / name / "trainer_state.json", data)
        for argv in (["import", str(path), "--runs-dir", str(root / "imported")], ["replay", str(path), "--summary"],
                     ["doctor", str(path)]):
            cases.append({"surface": "trainer_state", "name": f"{name}:{argv[0]}", "argv": argv})
    return cases


def _config_cases(root: Path) -> list[dict[str, Any]]:
    from loratui import rundir
    from loratui.logic import command_keys

    bomb = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"{n}: &{n} [" + ", ".join([f"*{p}"] * 9) + "]\n" for p, n in zip("abcdefgh", "bcdefghi"))
    texts = {
        "alias_bomb.yaml": bomb, "deep.yaml": "a: " + "[" * DEEP + "]" * DEEP, "digits.yaml": "s: " + "9" * 5000,
        "deep_block.yaml": "".join(" " * i + f"k{i}:\n" for i in range(1000)), "bom.yaml": "\ufeffcutoff_len: 2048\n",
        "binary.yaml": bytes(range(256)), "flow.yaml": "{cutoff_len: 2048}", "list.yaml": "- 1\n- 2\n",
        "tabs.yaml": "cutoff_len:\t2048\n\tx: 1\n", "anchors.yaml": "base: &b {cutoff_len: 2048}\n<<: *b\n",
        "deep.json": '{"a": ' + "[" * DEEP + "]" * DEEP + "}", "digits.json": '{"s": ' + "9" * 5000 + "}",
        "bom.json": '\ufeff{"cutoff_len": 2048}', "nan.json": '{"cutoff_len": NaN}', "list.json": "[1]",
    }
    cases = []
    for name, text in texts.items():
        command = ["llamafactory-cli", "train", name]
        _write(root / "work" / name, text)
        settings = rundir.RunSettings(run_id=name, name="cfg", recipe_source="", recipe_dir=str(root / "work"),
                                      command=command, cwd=str(root / "work"))
        run = rundir.create(root / "cfgruns", settings, '[model]\npath = "loratui:watched"\n')
        spoken = command_keys.speak({"data.max_length": 1024}, command_keys.dialect(command),
                                    command_keys.config_file(command), command)
        cases.append({"surface": "configs", "name": name, "config": True, "run": str(run.path), "fix": spoken.fix})
    return cases


def _url_cases() -> list[dict[str, Any]]:
    # Refused before anything is sent (no network in CI), issue 25 items 8-10 among them: a CR/LF, a malformed
    # host, link-local and cloud metadata addresses (alerts.check_url).
    urls = ["", "not a url", "ftp://example.com/x", "ntfy.sh/topic", "javascript:alert(1)", "http://",
            "https://" + "a" * 100_000 + ".com/", "\u202ehttps://x", "file:///etc/passwd",
            "https://ntfy.sh/topic\r\nX-Injected: 1", "http://[::1", "http://169.254.169.254/latest/meta-data",
            "http://[fe80::1]/x", "http://metadata.google.internal/computeMetadata/v1/", "http://0xa9fea9fe/"]
    return [{"surface": "URLs", "name": repr(url[:30]), "argv": ["notify-test", url]} for url in urls]


def _argument_cases(root: Path) -> list[dict[str, Any]]:
    hostile = ["", "-", "--", "x" * 100_000, "\u202e\x1b]0;title\x07", "line\nbreak", "../../../../etc/passwd",
               "~", "/dev/zero", "/proc/self/mem", "nan", "-1", "99999999999999999999999"]
    cases = []
    for value in hostile:
        for argv in (["attach", value, "--headless"], ["stop", value], ["replay", value, "--summary"],
                     ["doctor", value], ["estimate", value], ["init", value, str(root / "init" / "x.toml")],
                     ["import", value, "--runs-dir", str(root / "imported")], ["report", value],
                     ["stacks", value], ["replay", str(REPO / "tests"), "--speed", value],
                     ["replay", "x", "--from", value], ["estimate", str(TINY), "--gpu-gb", value],
                     ["ls", "--runs-dir", value]):
            cases.append({"surface": "CLI arguments", "name": f"{argv[0]} {value[:20]!r}", "argv": argv})
    return cases


def _verdict(result: dict[str, Any]) -> str:
    rc, stderr = result["rc"], result["stderr"]
    if rc == "hang":
        return "hang"
    if not isinstance(rc, int):
        return "escaped"
    if "internal error" in stderr or "Traceback" in stderr:
        return "internal error"
    lines = [line for line in stderr.splitlines() if not line.startswith("loratui: note:")]
    if rc == 2 and not (len(lines) == 1 or (lines and lines[0].startswith("usage:") and "error:" in lines[-1])):
        return "not one message"
    return "ok"


def test_every_input_surface_takes_hostile_input(tmp_path: Path) -> None:
    cases = (_log_cases(tmp_path) + _run_dir_cases(tmp_path) + _recipe_cases(tmp_path) + _state_cases(tmp_path)
             + _config_cases(tmp_path) + _url_cases() + _argument_cases(tmp_path))
    listing = tmp_path / "cases.json"
    listing.write_text(json.dumps(cases))
    scratch = tmp_path / "cwd"
    scratch.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO), LORATUI_RUNS=str(tmp_path / "default-runs"))

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", f"import tests.test_fuzz_inputs as f; f.worker({str(listing)!r})"],
                          capture_output=True, text=True, cwd=scratch, env=env, timeout=600, preexec_fn=limit)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases), done.stderr[-3000:]
    verdicts = Counter(_verdict(r) for r in results)
    per_surface = Counter(r["surface"] for r in results)
    lines = sum(c.get("lines", 0) for c in cases)
    print(f"\nfuzz: {len(results)} cases ({dict(per_surface)}), {lines} hostile log lines, "
          f"{time.monotonic() - began:.0f} s; verdicts {dict(verdicts)}; slowest "
          f"{max(results, key=lambda r: r['s'])['name']} {max(r['s'] for r in results)} s")
    bad = [(r["surface"], r["name"], _verdict(r), r["rc"], r["stderr"][-400:]) for r in results if _verdict(r) != "ok"]
    assert not bad, "\n".join(map(str, bad[:30]))


def test_a_pidfile_that_proves_nothing_names_no_live_process(tmp_path: Path) -> None:
    """Found by the fuzz: a copied run dir's `supervisor.pid` of `1` (init, alive) or `1 nan` made attach
    follow a dead run forever."""
    from loratui import rundir

    pidfile = tmp_path / "supervisor.pid"
    for text in ("1", "1 nan", f"{os.getpid()}", f"{os.getpid()} nan x"):
        pidfile.write_text(text)
        assert rundir.live_pid(pidfile) is None, text
    rundir.write_pidfile(pidfile)
    assert rundir.live_pid(pidfile) == os.getpid()


def test_a_newline_in_an_argument_stays_one_line() -> None:
    """Found by the fuzz: a newline in a quoted argument split the one-line refusal in two."""
    from tests.conftest import loratui

    result = loratui("estimate", "line\nbreak")
    assert result.returncode == 2 and result.stderr == (
        "loratui: line\\nbreak: no such recipe file, and no built-in recipe of that name; the built-ins are "
        "llama13b-qlora, qwen32b-qlora, qwen7b, tiny (`loratui recipes` describes them, `loratui init NAME` "
        "copies one out to edit)\n")
