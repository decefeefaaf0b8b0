"""`A` for a watched LLaMA-Factory or axolotl command: a fixed copy of its YAML (or LLaMA-Factory JSON)
config beside the original,
only the advice's keys changed (comments and layout kept), and a restart of the same command line with the
copy's path; refused (one message) for a link, another user's file, or YAML that does not parse."""

from __future__ import annotations

import difflib
import os
import re
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from loratui import events, rundir
from loratui.errors import ApplyError
from loratui.logic import command_keys, config_keys
from loratui.logic.advisor import Advisor
from loratui.recipe import load_recipe
from loratui.sources.runlog import ListSource
from loratui.supervisor import config_fix, launch
from loratui.supervisor.restart import restart_with, write_fix
from loratui.tui.app import LoratuiApp, RunActions
from tests import scenarios
from tests.conftest import REPO, wait_for
from tests.test_app import _footer_keys, _settle

LLAMAFACTORY_YAML = """\
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all

### dataset
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048   # tokens per example
max_samples: 1000

### train
per_device_train_batch_size: 4   # fits an 80 GB card
gradient_accumulation_steps: 2
learning_rate: 1.0e-4
num_train_epochs: 3.0
bf16: true
disable_gradient_checkpointing: true  # faster on a big card
"""

AXOLOTL_YAML = """\
base_model: NousResearch/Meta-Llama-3-8B
# optionally might have model_type or tokenizer_type
model_type: LlamaForCausalLM

load_in_8bit: false
load_in_4bit: false

datasets:
    - path: mhenrichsen/alpaca_2k_test
      type: alpaca
dataset_prepared_path:
output_dir: ./outputs/lora-out

sequence_len: 4096   # long examples
sample_packing: true

adapter: lora  # plain LoRA for now
lora_model_dir:
lora_r: 32
lora_target_linear: true

gradient_accumulation_steps: 4
micro_batch_size: 2  # per GPU
optimizer: adamw_bnb_8bit
learning_rate: 0.0002
bf16: auto
gradient_checkpointing: true

plugins:
  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin
"""

PLACEHOLDER = ('[model]\npath = "loratui:watched"\n[data]\ndataset = "loratui:watched"\n'
               "[monitor]\nwarn_gb = 20.0\n")
"""The run's recipe.toml until the hooked Trainer records its live settings (as `start_command` writes it)."""
MEMORY_MOVES = {"training.per_device_train_batch_size": 1, "training.gradient_accumulation_steps": 8,
                "training.gradient_checkpointing": True, "training.use_liger_kernel": True, "data.max_length": 1024}
QLORA = {"quantization.load_in_4bit": True, "quantization.bnb_4bit_quant_type": "nf4",
         "quantization.bnb_4bit_use_double_quant": True, "quantization.bnb_4bit_compute_dtype": "bfloat16"}


def _watched_run(tmp_path: Path, command: list[str], config_text: str) -> tuple[rundir.RunDir, Path]:
    """A run directory of a watched command whose config (named relative to its cwd) holds `config_text`."""
    config = tmp_path / "work" / command[command_keys.config_index(command)]  # type: ignore[index]
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(config_text)
    settings = rundir.RunSettings(run_id="r1", name="cfg", recipe_source="", recipe_dir=str(tmp_path / "work"),
                                  command=command, cwd=str(tmp_path / "work"))
    return rundir.create(tmp_path / "runs", settings, PLACEHOLDER), config


def _fix(change: dict[str, Any], command: list[str]) -> dict[str, Any]:
    spoken = command_keys.speak(change, command_keys.dialect(command), command_keys.config_file(command), command)
    assert spoken.fix and not spoken.no_fix, spoken
    return spoken.fix


def _changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added) between two texts."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def test_a_llamafactory_config_gets_a_fixed_copy_with_only_the_advice_keys_changed(tmp_path: Path) -> None:
    command = ["llamafactory-cli", "train", "examples/llama3_lora_sft.yaml"]
    run, config = _watched_run(tmp_path, command, LLAMAFACTORY_YAML)
    path, env = write_fix(run, "vram_near_limit", _fix(MEMORY_MOVES, command))
    assert path == config.with_name("llama3_lora_sft.loratui-fix1.yaml") and env == {}
    assert config.read_text() == LLAMAFACTORY_YAML  # the user's file is never edited
    removed, added = _changed_lines(LLAMAFACTORY_YAML, path.read_text())
    assert removed == ["cutoff_len: 2048   # tokens per example", "per_device_train_batch_size: 4   # fits an 80 GB card",
                       "gradient_accumulation_steps: 2", "disable_gradient_checkpointing: true  # faster on a big card"]
    assert added[1:] == ["cutoff_len: 1024   # tokens per example", "per_device_train_batch_size: 1   # fits an 80 GB card",
                         "gradient_accumulation_steps: 8", "disable_gradient_checkpointing: false  # faster on a big card",
                         "enable_liger_kernel: true  # set by loratui advice"]
    assert added[0].startswith("# Written by loratui from run r1 (advice vram_near_limit)")
    data = yaml.safe_load(path.read_text())  # PyYAML, as LLaMA-Factory reads it
    assert data["learning_rate"] == 1e-4 and data["per_device_train_batch_size"] == 1
    again, _ = write_fix(run, "vram_near_limit", _fix({"training.per_device_train_batch_size": 2}, command))
    assert again.name == "llama3_lora_sft.loratui-fix2.yaml" and path.read_text() != again.read_text()


def test_a_llamafactory_json_config_gets_a_fixed_copy_with_its_indentation_and_key_order(tmp_path: Path) -> None:
    """LLaMA-Factory reads `train x.json` too (hparams/parser.py `read_args`); JSON keeps no comments, so
    the copy has no header (the parser refuses unknown keys): same keys in the same order, the changed
    values in place, new keys last, the original's indentation."""
    import json

    original = yaml.safe_load(LLAMAFACTORY_YAML)
    text = json.dumps(original, indent=4) + "\n"
    command = ["llamafactory-cli", "train", "examples/llama3_lora_sft.json"]
    run, config = _watched_run(tmp_path, command, text)
    path, _ = write_fix(run, "vram_near_limit", _fix(MEMORY_MOVES, command))
    assert path == config.with_name("llama3_lora_sft.loratui-fix1.json") and config.read_text() == text
    fixed = json.loads(path.read_text())
    assert list(fixed)[:len(original)] == list(original) and list(fixed)[len(original):] == ["enable_liger_kernel"]
    assert {k: v for k, v in fixed.items() if original.get(k) != v} == {
        "cutoff_len": 1024, "per_device_train_batch_size": 1, "gradient_accumulation_steps": 8,
        "disable_gradient_checkpointing": False, "enable_liger_kernel": True}
    assert path.read_text().startswith('{\n    "model_name_or_path"') and path.read_text().endswith("}\n")


def test_json_that_does_not_parse_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    command = ["llamafactory-cli", "train", "x.json"]
    run, config = _watched_run(tmp_path, command, '{\n  "cutoff_len": 2048,\n  "stage": sft\n}\n')
    with pytest.raises(ApplyError, match=re.escape(f"{config}:3: not valid JSON")):
        write_fix(run, "vram_near_limit", _fix({"data.max_length": 1024}, command))
    assert sorted(p.name for p in config.parent.iterdir()) == ["x.json"]


def test_an_axolotl_config_gets_a_fixed_copy_keeping_comments_lists_and_indentation(tmp_path: Path) -> None:
    command = ["accelerate", "launch", "--config_file", "acc.yaml", "-m", "axolotl.cli.train", "lora-8b.yml"]
    run, config = _watched_run(tmp_path, command, AXOLOTL_YAML)
    path, _ = write_fix(run, "oom_full", _fix({**MEMORY_MOVES, **QLORA, "data.max_length": 2048}, command))
    assert path.name == "lora-8b.loratui-fix1.yml"
    removed, added = _changed_lines(AXOLOTL_YAML, path.read_text())
    assert removed == ["load_in_4bit: false", "sequence_len: 4096   # long examples", "adapter: lora  # plain LoRA for now",
                       "gradient_accumulation_steps: 4", "micro_batch_size: 2  # per GPU"]
    assert added[1:] == [
        "load_in_4bit: true", "sequence_len: 2048   # long examples", "adapter: qlora  # plain LoRA for now",
        "gradient_accumulation_steps: 8", "micro_batch_size: 1  # per GPU",
        f"  - {config_keys.LIGER_PLUGIN}  # set by loratui advice",
        "liger_rope: true  # set by loratui advice", "liger_glu_activation: true  # set by loratui advice",
        "liger_fused_linear_cross_entropy: true  # set by loratui advice"]
    # gradient_checkpointing was already true: set again to the same text; the 4-space list is untouched
    assert "    - path: mhenrichsen/alpaca_2k_test\n      type: alpaca\n" in path.read_text()
    assert yaml.safe_load(path.read_text())["plugins"] == ["axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin",
                                                           config_keys.LIGER_PLUGIN]


def test_restart_runs_the_same_command_line_with_the_fixed_config(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    command = ["accelerate", "launch", "--config_file", "acc.yaml", "-m", "axolotl.cli.train", "cfg/lora-8b.yml",
               "--num_epochs", "1"]
    run, config = _watched_run(tmp_path, command, AXOLOTL_YAML)
    path, env = write_fix(run, "oom_fragmentation", _fix({"training.per_device_train_batch_size": 1,
                                                          "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                                                         command))
    started: dict[str, Any] = {}
    monkeypatch.setattr(launch, "start_command", lambda cmd, runs, name, warn, **kw: started.update(
        command=cmd, runs=runs, name=name, warn=warn, **kw) or run)
    sent: list[str] = []
    restart_with(run, path, env, sent.append)  # the run has no live process and no end: lost, so no stop
    assert started["command"] == ["accelerate", "launch", "--config_file", "acc.yaml", "-m", "axolotl.cli.train",
                                  "cfg/lora-8b.loratui-fix1.yml", "--num_epochs", "1"]
    assert started["cwd"] == tmp_path / "work" and started["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert started["warn"] == 20.0 and started["runs"] == run.path.parent and sent == []


def test_a_linked_config_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    command = ["llamafactory-cli", "train", "x.yaml"]
    run, config = _watched_run(tmp_path, command, LLAMAFACTORY_YAML)
    real = tmp_path / "real.yaml"
    config.rename(real)
    config.symlink_to(real)
    with pytest.raises(ApplyError, match="is a symbolic link"):
        write_fix(run, "vram_near_limit", _fix(MEMORY_MOVES, command))
    assert sorted(p.name for p in config.parent.iterdir()) == ["x.yaml"]


def test_another_users_config_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "x.yaml"
    config.write_text(LLAMAFACTORY_YAML)
    real_uid = os.getuid()
    monkeypatch.setattr(config_fix.os, "getuid", lambda: real_uid + 4242)
    with pytest.raises(ApplyError, match=r"belongs to another user \(uid \d+\).*copy it"):
        config_fix.read_own(config)


def test_yaml_that_does_not_parse_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    command = ["axolotl", "train", "x.yml"]
    broken = AXOLOTL_YAML.replace("micro_batch_size: 2  # per GPU", "micro_batch_size: [2  # per GPU")
    run, config = _watched_run(tmp_path, command, broken)
    with pytest.raises(ApplyError) as caught:
        write_fix(run, "vram_near_limit", _fix({"training.per_device_train_batch_size": 1}, command))
    message = str(caught.value)
    assert re.search(rf"{re.escape(str(config))}:\d+: not valid YAML", message) and "fix the file" in message
    assert "Traceback" not in message and sorted(p.name for p in config.parent.iterdir()) == ["x.yml"]


def test_a_name_taken_by_a_link_is_skipped_never_written_through(tmp_path: Path) -> None:
    command = ["llamafactory-cli", "train", "x.yaml"]
    run, config = _watched_run(tmp_path, command, LLAMAFACTORY_YAML)
    target = tmp_path / "victim.txt"
    target.write_text("keep")
    (config.parent / "x.loratui-fix1.yaml").symlink_to(target)
    path, _ = write_fix(run, "vram_near_limit", _fix({"training.per_device_train_batch_size": 1}, command))
    assert path.name == "x.loratui-fix2.yaml" and target.read_text() == "keep"


@pytest.mark.parametrize(("command", "change", "why"), [
    (["axolotl", "train", "x.yml"], {"training.eval_accumulation_steps": 1}, "axolotl has no config key for eval_accumulation_steps"),
    (["llamafactory-cli", "train", "x.yaml", "per_device_train_batch_size=4"],
     {"training.per_device_train_batch_size": 2}, "the command line sets per_device_train_batch_size"),
    (["axolotl", "train", "x.json"], {"training.per_device_train_batch_size": 2}, "YAML configs only"),
    (["axolotl", "train", "x.yml"], {"env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, "only the environment"),
])
def test_a_move_the_config_cannot_carry_gets_no_fix_and_one_line_why(command: list[str], change: dict[str, Any],
                                                                      why: str) -> None:
    spoken = command_keys.speak(change, command_keys.dialect(command), command_keys.config_file(command), command)
    assert spoken.fix == {} and why in spoken.no_fix and "\n" not in spoken.no_fix


def test_every_move_the_advisor_makes_has_an_entry_for_each_tool() -> None:
    """A new advice move must be mapped (to its key, or to no key) for LLaMA-Factory and axolotl alike."""
    logic = REPO / "loratui" / "logic"
    source = "".join(p.read_text() for p in (*(logic / "advisor").glob("*.py"), logic / "priced_moves.py"))
    moves = set(re.findall(r'"((?:training|lora|quantization|data|model)\.[a-z_0-9]+)"', source)) - {"data.path"}
    assert moves, "no moves found"
    for tool, table in config_keys.KEYS.items():
        assert moves <= set(table), (tool, sorted(moves - set(table)))


def _watched_events(command: list[str]) -> list[events.AnyEvent]:
    found = scenarios.run(60, peak_gib=33.5)
    return [msgspec.structs.replace(found[0], command=command), *found[1:]]  # type: ignore[arg-type]


@pytest.mark.parametrize(("command", "offered"), [
    (["llamafactory-cli", "train", "examples/qwen_lora.yaml"], True),
    (["python", "train.py"], False),
])
async def test_key_A_is_offered_for_a_watched_config_and_not_for_a_bare_script(
        tmp_path: Path, command: list[str], offered: bool) -> None:
    if offered:
        run, config = _watched_run(tmp_path, command, LLAMAFACTORY_YAML)
    else:
        settings = rundir.RunSettings(run_id="r1", name="train", recipe_source="", recipe_dir=str(tmp_path),
                                      command=command, cwd=str(tmp_path))
        run = rundir.create(tmp_path / "runs", settings, PLACEHOLDER)
    sent: list[str] = []
    actions = RunActions(send=sent.append, write_fix=lambda advice_id, fix: write_fix(run, advice_id, fix),
                         restart=lambda recipe, env, send: restart_with(run, recipe, env, send))
    live = load_recipe(REPO / "recipes" / "qwen7b.toml")  # the live settings the hooked Trainer recorded
    app = LoratuiApp(ListSource(_watched_events(command)), live, actions=actions)
    async with app.run_test(size=(160, 48)) as pilot:
        await _settle(pilot, app, 60)
        await pilot.pause(1.2)
        assert any(item.change for item in app.advisor.items())  # advice with a change either way
        assert app.check_action("apply_advice", ()) is offered and ("A" in _footer_keys(app)) is offered
        await pilot.press("a", "A")
        await pilot.pause(0.3)
        assert (app.screen.__class__.__name__ == "Choice") is offered
        if offered:
            await pilot.press("n")
            await pilot.pause(0.2)
        else:  # `A` says why it writes nothing, and the panel said so beside the advice (issue 24 item 7)
            said = [n.message for n in app._notifications]
            assert any("does not rewrite your code; make this change in train.py" in m for m in said), said
            assert all(item.no_fix for item in app.advisor.items() if item.change)
    if offered:
        (written,) = config.parent.glob("qwen_lora.loratui-fix*.yaml")
        assert yaml.safe_load(written.read_text())["per_device_train_batch_size"] == 2 and sent == []


def test_advisor_items_carry_the_fix_for_a_yaml_config_only() -> None:
    factory = Advisor(load_recipe(REPO / "recipes" / "qwen7b.toml")).feed_all(
        _watched_events(["llamafactory-cli", "train", "x.yaml"]))
    item = next(a for a in factory.items() if a.id == "vram_near_limit")
    assert item.fix == {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 8}
    assert "per_device_train_batch_size (x.yaml)" in item.change and "fix" not in item.to_dict()
    recipe_run = Advisor(load_recipe(REPO / "recipes" / "qwen7b.toml")).feed_all(scenarios.run(60, peak_gib=33.5))
    item = next(a for a in recipe_run.items() if a.id == "vram_near_limit")
    assert item.fix == item.change and "training.per_device_train_batch_size" in item.fix


@pytest.mark.parametrize(("before", "change", "after"), [
    ("a: 'x # y'  # why\r\nb: 1\r\n", {"a": "z"}, "a: z  # why\r\nb: 1\r\n"),  # quoted '#', CRLF kept
    ('lr: "3e-4"\nopt: adamw\n', {"lr": 1e-05, "opt": "yes"}, 'lr: 1.0e-05\nopt: "yes"\n'),  # read back alike by PyYAML
    ("a: 1\nb:\n# end", {"b": 2, "c": False}, "a: 1\nb: 2\n# end\nc: false  # set by loratui advice\n"),
])
def test_yaml_edit_rewrites_only_the_value_text(before: str, change: dict[str, Any], after: str) -> None:
    from loratui.logic import yaml_edit

    out = yaml_edit.apply_changes(before, change)
    assert out == after
    assert yaml.safe_load(out.replace("\r", "")) == {**yaml.safe_load(before.replace("\r", "")), **change}


def test_a_fix_of_a_fix_is_numbered_not_nested_and_keeps_the_originals_permissions(tmp_path: Path) -> None:
    command = ["llamafactory-cli", "train", "x.loratui-fix1.yaml"]
    run, config = _watched_run(tmp_path, command, LLAMAFACTORY_YAML)
    config.chmod(0o600)  # a config may hold a hub token
    path, _ = write_fix(run, "vram_near_limit", _fix({"training.per_device_train_batch_size": 1}, command))
    assert path.name == "x.loratui-fix2.yaml" and path.stat().st_mode & 0o777 == 0o600


FAKE_TOOL = """#!{python}
import sys, yaml
config = yaml.safe_load(open(sys.argv[2]))
print("batch", config["per_device_train_batch_size"], "from", sys.argv[2], flush=True)
for step in range(1, 4):
    print(f"step {{step}} loss {{2.0 / step:.3f}}", flush=True)
"""


def _fake_llamafactory(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `llamafactory-cli` on PATH that runs `source` (a Python script template), and a work directory with its
    config at cfg/x.yaml."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "llamafactory-cli").write_text(source.format(python=sys.executable))
    (tools / "llamafactory-cli").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    work = tmp_path / "work"
    (work / "cfg").mkdir(parents=True)
    (work / "cfg" / "x.yaml").write_text(LLAMAFACTORY_YAML)
    return work


def test_restart_of_a_real_watched_command_runs_it_with_the_fixed_config(
        tmp_path: Path, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real supervisors (about a second): the restart reaches the tool with the copy's path."""
    work = _fake_llamafactory(FAKE_TOOL, tmp_path, monkeypatch)
    first = launch.start_command(["llamafactory-cli", "train", "cfg/x.yaml"], runs_dir, cwd=work)
    wait_for(lambda: config_fix.final_state(first) is not None, timeout=120)
    path, env = write_fix(first, "vram_near_limit", _fix({"training.per_device_train_batch_size": 1},
                                                         ["llamafactory-cli", "train", "cfg/x.yaml"]))
    second = restart_with(first, path, env, lambda command: None)
    wait_for(lambda: config_fix.final_state(second) == events.FINISHED, timeout=120)
    assert second.read_settings().command == ["llamafactory-cli", "train", "cfg/x.loratui-fix1.yaml"]
    assert "batch 1 from cfg/x.loratui-fix1.yaml" in second.stdout_log.read_text()


def test_a_length_move_names_every_trl_config_that_has_it() -> None:
    """A DPO run read `SFTConfig.max_length under TRL` (trial 8): DPOConfig has its own max_length."""
    spoken = command_keys.python_name("data.max_length")
    assert "SFTConfig" in spoken and "DPOConfig" in spoken


ENV_TOOL = """#!{python}
import os, sys
print("env", *(f"{{k}}={{os.environ.get(k, '-')}}" for k in ("FIRST_ONLY", "VIEWER_ONLY", "PYTORCH_CUDA_ALLOC_CONF")),
      flush=True)
print("step 1 loss 2.0", flush=True)
"""


def test_a_restart_with_advice_runs_in_the_runs_first_environment_plus_the_advice(
        tmp_path: Path, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`A`, then the restart: the new run's command got the viewer's environment (a variable set only where the run
    began, such as CUDA_VISIBLE_DEVICES or HF_HOME, gone; one set only in the viewer's shell, there). It gets the run's
    first environment, kept past its end as its alert URL is, plus the advised change only, as `loratui resume` does."""
    work = _fake_llamafactory(ENV_TOOL, tmp_path, monkeypatch)
    monkeypatch.setenv("FIRST_ONLY", "1")
    monkeypatch.delenv("VIEWER_ONLY", raising=False)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    first = launch.start_command(["llamafactory-cli", "train", "cfg/x.yaml"], runs_dir, cwd=work)
    wait_for(lambda: config_fix.final_state(first) is not None, timeout=120)
    assert "env FIRST_ONLY=1 VIEWER_ONLY=- PYTORCH_CUDA_ALLOC_CONF=-" in first.stdout_log.read_text()
    monkeypatch.delenv("FIRST_ONLY")  # the viewer that restarts it: another shell
    monkeypatch.setenv("VIEWER_ONLY", "1")
    path, env = write_fix(first, "oom_fragmentation", _fix({"training.per_device_train_batch_size": 1,
                                                            "env.PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                                                           ["llamafactory-cli", "train", "cfg/x.yaml"]))
    second = restart_with(first, path, env, lambda command: None)
    wait_for(lambda: config_fix.final_state(second) == events.FINISHED, timeout=120)
    assert "env FIRST_ONLY=1 VIEWER_ONLY=- PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in \
        second.stdout_log.read_text(), second.stdout_log.read_text()
