"""The built-in recipes: shipped inside the package, reachable by name from any directory, copied out
with `loratui init`; and the tiny model built from loratui's own data, never the user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from loratui import __version__
from loratui.cli import main as cli_main
from loratui.commands.recipes import fits, method
from loratui.recipe import BUILTIN_DIR, TINY_DATA, RecipeError, builtin_recipes, find_recipe, load_recipe
from tests.conftest import REPO

NAMES = ["llama13b-qlora", "qwen32b-qlora", "qwen7b", "tiny"]


def test_the_builtins_live_inside_the_package() -> None:
    assert BUILTIN_DIR == REPO / "loratui" / "recipes"
    assert list(builtin_recipes()) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_every_builtin_validates_names_its_card_and_its_data_exists(name: str) -> None:
    path = builtin_recipes()[name]
    text = path.read_text(encoding="utf-8")
    recipe = load_recipe(path, text)
    assert recipe.data.path and (path.parent / recipe.data.path).is_file()
    assert fits(text) != "?"


def test_top_level_recipes_folder_is_the_packaged_one() -> None:
    """A clone's recipes/ (where the README and users look) links to loratui/recipes/: one copy, no drift."""
    top = REPO / "recipes"
    assert top.is_symlink() and top.resolve() == BUILTIN_DIR.resolve()
    assert sorted(p.name for p in top.glob("*.toml")) == sorted(f"{n}.toml" for n in NAMES)


def test_a_name_resolves_to_the_builtin_from_any_directory(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_recipe("tiny") == BUILTIN_DIR / "tiny.toml"
    assert find_recipe(Path("qwen7b.toml")) == BUILTIN_DIR / "qwen7b.toml"
    (tmp_path / "tiny.toml").write_text("# mine\n")
    assert find_recipe("tiny.toml") == Path("tiny.toml")  # an existing path wins over a built-in name


def test_neither_a_file_nor_a_builtin_lists_the_builtins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError):
        find_recipe("recipes/tiny.toml")  # a path, not a name: never silently swapped for a built-in
    assert cli_main(["run", "tinny", "--headless", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "tinny: no such recipe file" in err and all(name in err for name in NAMES)
    assert "Traceback" not in err and not (tmp_path / "runs").exists()


def test_estimate_takes_a_builtin_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_main(["estimate", "tiny", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fits"] is True


def test_recipes_lists_model_method_and_card(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:len(NAMES) + 1]}
    assert list(rows) == NAMES
    assert "Qwen/Qwen2.5-7B-Instruct" in rows["qwen7b"] and "QLoRA 4-bit NF4" in rows["qwen7b"]
    assert "32 GB card" in rows["qwen7b"]
    assert "loratui:tiny" in rows["tiny"] and "LoRA float32" in rows["tiny"] and "any CPU" in rows["tiny"]


def test_method_names_each_kind_of_training() -> None:
    base = load_recipe(BUILTIN_DIR / "tiny.toml")
    text = (BUILTIN_DIR / "tiny.toml").read_text()
    eight = load_recipe("x.toml", text.replace("[lora]", "[quantization]\nload_in_8bit = true\n\n[lora]"))
    dora = load_recipe("x.toml", text.replace("r = 16", "r = 16\nuse_dora = true"))
    ddp = load_recipe("x.toml", text + "\n[distributed]\nnum_processes = 2\n")
    assert [method(r) for r in (base, eight, dora, ddp)] == [
        "LoRA float32, r=16", "LoRA 8-bit, r=16", "DoRA float32, r=16",
        "LoRA float32, r=16, 2 processes (ddp)"]


def test_init_copies_a_builtin_out_and_its_data_path_still_resolves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_main(["init", "qwen7b"]) == 0
    copy = tmp_path / "qwen7b.toml"
    recipe = load_recipe(copy)
    assert Path(recipe.data.path) == TINY_DATA.resolve()
    assert "replace with your JSONL" in copy.read_text()  # the comments travel with it
    assert "qwen7b.toml" in capsys.readouterr().out
    (tmp_path / "mine").mkdir()
    assert cli_main(["init", "tiny.toml", "mine"]) == 0
    assert load_recipe(tmp_path / "mine" / "tiny.toml").model.path == "loratui:tiny"


def test_init_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen7b.toml").write_text("# my edits\n")
    os.symlink(tmp_path / "elsewhere.toml", tmp_path / "link.toml")  # dangling: must not be written through
    assert cli_main(["init", "qwen7b"]) == 2
    assert "qwen7b.toml: already exists" in capsys.readouterr().err
    assert (tmp_path / "qwen7b.toml").read_text() == "# my edits\n"
    assert cli_main(["init", "tiny", "link.toml"]) == 2
    assert not (tmp_path / "elsewhere.toml").exists()
    assert cli_main(["init", "qwen9b"]) == 2
    assert "choose one of llama13b-qlora, qwen32b-qlora, qwen7b, tiny" in capsys.readouterr().err
    assert cli_main(["init", "tiny", "no/such/dir/t.toml"]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_init_into_a_folder_that_is_not_there_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`loratui init tiny configs/` (a folder meant, not made yet) wrote a file named `configs` and said `loratui run
    configs`: argparse's Path had dropped the trailing slash."""
    monkeypatch.chdir(tmp_path)
    assert cli_main(["init", "tiny", "configs/"]) == 2
    err = capsys.readouterr().err
    assert "configs/: no such folder" in err and "mkdir -p configs/" in err and "configs/tiny.toml" in err, err
    assert not (tmp_path / "configs").exists()
    (tmp_path / "configs").mkdir()
    assert cli_main(["init", "tiny", "configs/"]) == 0 and (tmp_path / "configs" / "tiny.toml").is_file()


def test_version_comes_from_one_place(capsys: pytest.CaptureFixture[str]) -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "loratui.__version__"}
    with pytest.raises(SystemExit):
        cli_main(["--version"])
    assert capsys.readouterr().out.strip() == f"loratui {__version__}"


def test_package_data_globs_name_files_inside_the_package() -> None:
    """Every glob matches something under loratui/, and together they cover every recipe and data file."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]["loratui"]
    package = REPO / "loratui"
    assert all(list(package.glob(g)) for g in globs), globs
    shipped = {p for g in globs for p in package.glob(g)}
    assert {p for p in BUILTIN_DIR.rglob("*") if p.suffix in (".toml", ".jsonl")} <= shipped
    data_files = {p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".py", ".pyc", ".md")}  # a data file the wheel lacks fails users only
    assert data_files <= shipped, sorted(str(p) for p in data_files - shipped)


def test_tiny_tokenizer_corpus_is_the_shipped_data_only() -> None:
    from loratui.trainer.tiny import corpus_lines

    lines = corpus_lines()
    assert len(lines) == len(TINY_DATA.read_text().splitlines()) == 600
    assert lines[0].startswith("Reverse the word:")


@pytest.mark.slow
def test_first_tiny_build_from_a_csv_run_uses_the_shipped_data(tmp_path: Path) -> None:
    """Issue 15: the first build in an empty cache from a run on a CSV (or a JSONL with a blank line)
    crashed, and the tokenizer it cached came from that run's data. Now it is the shipped data's."""
    from loratui.trainer.tiny import build_tiny_model

    csv = tmp_path / "mine.csv"
    csv.write_text("instruction,input,output\nSay hi,,hi\n\nSay bye,,bye\n" * 20)
    recipe = tmp_path / "mine.toml"
    recipe.write_text((BUILTIN_DIR / "tiny.toml").read_text().replace(
        'path = "data/tiny-instructions.jsonl"', 'path = "mine.csv"'))
    cache = tmp_path / "cache"
    env = {**os.environ, "LORATUI_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "loratui", "run", str(recipe), "--headless", "--max-steps",
                           "2", "--runs-dir", str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (built,) = cache.glob("tiny-qwen2-*")
    build_tiny_model(tmp_path / "reference")
    vocab = json.loads((built / "tokenizer.json").read_text())["model"]["vocab"]
    assert vocab == json.loads((tmp_path / "reference" / "tokenizer.json").read_text())["model"]["vocab"]


@pytest.mark.slow
def test_run_tiny_by_name_from_an_empty_directory(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "loratui", "run", "tiny", "--headless", "--max-steps", "3"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = (tmp_path / "runs").iterdir()
    settings = json.loads((run / "run.json").read_text())
    assert settings["recipe_source"] == str(BUILTIN_DIR / "tiny.toml")


@pytest.mark.parametrize("name", [n for n in NAMES if n != "tiny"])
def test_a_recipes_stated_peak_is_what_estimate_says(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`loratui recipes` shows each recipe's "fits:" line, and its head comment says what to expect; both
    went stale when the estimator's slack and CUDA context changed (22.6 GiB stated, 22.43 estimated for
    qwen7b), so a newcomer's two commands disagreed. Every figure "N GiB peak est." / "about N GiB" /
    "the estimate is N GiB" in the head comment is the estimate rounded to 0.1 GiB, at the batch it names."""
    import re
    monkeypatch.chdir(tmp_path)
    assert cli_main(["estimate", name, "--json"]) in (0, 1)
    peak = json.loads(capsys.readouterr().out)["peak_device_gib"]
    head = (BUILTIN_DIR / f"{name}.toml").read_text().split("\n[", 1)[0]
    stated = re.findall(r"(?:about|estimate is|\() ?(\d+\.\d) GiB", head)
    assert stated, head
    assert all(float(s) == round(peak, 1) for s in stated), (stated, peak)
    assert fits(head).startswith("a 32 GB card") and f"{round(peak, 1)} GiB peak est." in fits(head)
