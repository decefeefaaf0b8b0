"""The VRAM estimator against the H200 measurements, on recipes whose model dir holds only config.json."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from loratui.cli import main as cli_main
from loratui.logic.estimate import CONTEXT_GIB, ConfigError, estimate, fit_table
from loratui.recipe import load_recipe

REPO = Path(__file__).resolve().parent.parent
GRID = [json.loads(line) for line in (REPO / "bench" / "estimate_grid.jsonl").read_text().splitlines()]
MEASURED = [row for row in GRID if row["status"] == "ok"]

QWEN7B = next(row["model_config"] for row in GRID if row["model"] == "q7")
LLAMA7B = next(row["model_config"] for row in GRID if row["model"] == "l7")


def recipe_text(model: str, quant: str = "nf4dq", batch: int = 4, seq: int = 2048, gc: bool = True,
                optim: str = "paged_adamw_8bit", attn: str = "sdpa", r: int = 64,
                targets: list[str] | None = None, dropout: float = 0.05) -> str:
    """A recipe in the shape of a grid row (quant: 'bf16', 'nf4', 'nf4dq' or 'fp32', float32 weights without bf16
    autocast as recipes/tiny.toml; targets: the seven projections unless given)."""
    targets = targets or ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return f"""
[model]
path = "{model}"
dtype = "{'float32' if quant == 'fp32' else 'bfloat16'}"
attn_implementation = "{attn}"
[quantization]
load_in_4bit = {str(quant not in ("bf16", "fp32")).lower()}
bnb_4bit_quant_type = "nf4"
bnb_4bit_use_double_quant = {str(quant == "nf4dq").lower()}
[lora]
r = {r}
lora_alpha = {2 * r}
lora_dropout = {dropout}
target_modules = {json.dumps(targets)}
[training]
per_device_train_batch_size = {batch}
gradient_checkpointing = {str(gc).lower()}
optim = "{optim}"
bf16 = {str(quant != "fp32").lower()}
[data]
path = "train.jsonl"
max_length = {seq}
"""


def write_model(tmp_path: Path, config: dict[str, object], name: str = "model") -> Path:
    """A model directory holding only config.json (no weights)."""
    model_dir = tmp_path / name
    model_dir.mkdir()
    (model_dir / "config.json").write_text(json.dumps(config))
    return model_dir


def write_recipe(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipe.toml"
    path.write_text(text)
    return path


def row_error(row: dict, tmp_path: Path) -> float:
    """Relative error of the predicted device-used peak against one measured row."""
    model_dir = write_model(tmp_path, row["model_config"], row["name"])
    text = recipe_text(str(model_dir), row["quant"], row["batch"], row["seq"], row["gc"], row["optim"],
                       row["attn"], row["r"])
    predicted = estimate(load_recipe(tmp_path / "r.toml", text), row["model_config"], 141.0)
    return predicted.peak_device_gib / row["nvml_peak_gib"] - 1


def test_grid_covers_what_the_issue_asks() -> None:
    assert len(MEASURED) >= 12
    assert {row["model_config"]["model_type"] for row in MEASURED} == {"qwen2", "llama"}
    assert {row["quant"] for row in MEASURED} >= {"bf16", "nf4", "nf4dq"}
    assert {row["gc"] for row in MEASURED} == {True, False}
    assert any(row["optim"].startswith("paged_") for row in MEASURED)


@pytest.mark.parametrize("row", MEASURED, ids=[row["name"] for row in MEASURED])
def test_each_measured_config_within_ten_percent(row: dict, tmp_path: Path) -> None:
    assert abs(row_error(row, tmp_path)) <= 0.10


def test_median_error_within_five_percent(tmp_path: Path) -> None:
    errors = [abs(row_error(row, tmp_path)) for row in MEASURED]
    assert statistics.median(errors) <= 0.05


@pytest.mark.parametrize("row", MEASURED, ids=[row["name"] for row in MEASURED])
def test_reserved_and_allocated_track_torch(row: dict) -> None:
    text = recipe_text("m", row["quant"], row["batch"], row["seq"], row["gc"], row["optim"], row["attn"], row["r"])
    predicted = estimate(load_recipe(Path("r.toml"), text), row["model_config"], None)
    assert predicted.peak_reserved_gib == pytest.approx(row["torch_peak_reserved_gib"], rel=0.10)
    assert predicted.peak_allocated_gib == pytest.approx(row["torch_peak_alloc_gib"], rel=0.10)
    assert predicted.fits is None and predicted.headroom_gib is None


def test_breakdown_sums_to_the_device_peak() -> None:
    predicted = estimate(load_recipe(Path("r.toml"), recipe_text("m")), QWEN7B, 32.0)
    assert sum(predicted.components.values()) == pytest.approx(predicted.peak_device_gib)
    paged = predicted.components["optimizer_paged"]
    assert paged > 0 and predicted.components["optimizer_states"] == 0  # managed memory, outside torch
    assert predicted.peak_device_gib - predicted.peak_reserved_gib == pytest.approx(paged + CONTEXT_GIB)
    assert predicted.headroom_gib == pytest.approx(32.0 - predicted.peak_device_gib)


@pytest.mark.parametrize(("change", "smaller"), [
    ({"quant": "nf4dq"}, {"quant": "nf4dq", "gc": True}),
    ({"quant": "nf4"}, {"quant": "nf4dq"}),
    ({"quant": "bf16", "gc": True}, {"quant": "nf4dq", "gc": True}),
    ({"batch": 8}, {"batch": 4}),
    ({"seq": 4096}, {"seq": 2048}),
    ({"optim": "adamw_torch"}, {"optim": "adamw_8bit"}),
    ({"gc": False, "attn": "eager", "seq": 1024}, {"gc": False, "attn": "sdpa", "seq": 1024}),
])
def test_memory_moves_the_right_way(change: dict, smaller: dict) -> None:
    def peak(**kwargs: object) -> float:
        settings = {"gc": False} | kwargs
        return estimate(load_recipe(Path("r.toml"), recipe_text("m", **settings)), LLAMA7B).peak_device_gib

    assert peak(**smaller) < peak(**change)


def test_qlora_activations_exceed_bf16_ones() -> None:
    """Measured: 4-bit linears return fp32 under the fp32 upcast, so QLoRA keeps bigger MLP tensors."""
    def activations(quant: str) -> float:
        text = recipe_text("m", quant=quant, gc=False)
        return estimate(load_recipe(Path("r.toml"), text), QWEN7B).components["activations"]

    assert activations("nf4dq") > 1.3 * activations("bf16")


def test_unknown_architecture_falls_back_with_stated_uncertainty() -> None:
    config = {"model_type": "falcon_like", "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "vocab_size": 65024}
    predicted = estimate(load_recipe(Path("r.toml"), recipe_text("m")), config, 32.0)
    assert predicted.uncertainty == 0.25
    assert any("not measured" in note and "±25%" in note for note in predicted.notes)
    assert predicted.peak_device_gib > 5


def test_known_architecture_has_no_fallback_note() -> None:
    predicted = estimate(load_recipe(Path("r.toml"), recipe_text("m")), LLAMA7B, 32.0)
    assert predicted.uncertainty == 0.10 and predicted.notes == ()


def test_config_missing_dimensions_names_the_keys() -> None:
    with pytest.raises(ConfigError, match="hidden_size, num_hidden_layers"):
        estimate(load_recipe(Path("r.toml"), recipe_text("m")), {"model_type": "llama", "vocab_size": 32000})


def test_fit_table_rows_are_consistent() -> None:
    table = fit_table(load_recipe(Path("r.toml"), recipe_text("m")), QWEN7B, 32.0)
    by_label = {row.label: row.max_batch for row in table}
    assert len(table) == 4
    on, off = by_label["4-bit nf4, checkpointing on"], by_label["4-bit nf4, checkpointing off"]
    assert all(on[seq] >= off[seq] for seq in on)
    assert all(on[a] >= on[b] for a, b in zip(list(on), list(on)[1:]))  # longer sequences fit fewer
    assert on[512] >= 1 and by_label["bf16, checkpointing off"][8192] == 0


# --------------------------------------------------------------------------- the CLI


def test_cli_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = write_recipe(tmp_path, recipe_text(str(write_model(tmp_path, QWEN7B))))
    assert cli_main(["estimate", str(recipe), "--json", "--gpu-gb", "80"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"peak_device_gib", "peak_reserved_gib", "components", "fits", "headroom_gib", "verdict"}
    assert out["fits"] is True and out["headroom_gib"] == pytest.approx(80 - out["peak_device_gib"], abs=0.02)
    assert {"weights_quantized", "weights_fp32_upcast", "lora_params", "gradients", "optimizer_paged",
            "activations", "logits", "allocator_slack", "cuda_context_non_torch"} <= set(out["components"])


def test_cli_text_has_breakdown_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model_dir = write_model(tmp_path, LLAMA7B)
    recipe = write_recipe(tmp_path, recipe_text("elsewhere"))
    assert cli_main(["estimate", str(recipe), "--model-path", str(model_dir)]) == 0
    out = capsys.readouterr().out
    assert "peak used on a CUDA GPU" in out and "on a 32 GiB card" in out
    assert "what would fit on 32 GiB" in out and "bf16, checkpointing off" in out


def test_cli_relative_model_dir_next_to_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_model(tmp_path, LLAMA7B, "llama")
    recipe = write_recipe(tmp_path, recipe_text("llama"))
    assert cli_main(["estimate", str(recipe), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["peak_device_gib"] > 5


@pytest.mark.parametrize(("setup", "message"), [
    ("hub", "not a local directory"),
    ("empty_dir", "no config.json there"),
    ("bad_json", "cannot read it as JSON"),
    ("no_dims", "lacks hidden_size"),
])
def test_cli_bad_model_exits_2(setup: str, message: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    model = {"hub": "someone/not-a-shipped-model", "empty_dir": str(tmp_path / "empty")}.get(setup, str(tmp_path / "m"))
    (tmp_path / "empty").mkdir()
    if setup in ("bad_json", "no_dims"):
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "config.json").write_text("{not json" if setup == "bad_json" else '{"vocab_size": 5}')
    recipe = write_recipe(tmp_path, recipe_text(model))
    assert cli_main(["estimate", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    if setup != "hub":
        assert "config.json" in err


def test_cli_bad_gpu_size_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = write_recipe(tmp_path, recipe_text(str(write_model(tmp_path, LLAMA7B))))
    assert cli_main(["estimate", str(recipe), "--gpu-gb", "0"]) == 2
    assert "--gpu-gb" in capsys.readouterr().err


def test_cli_tiny_model(capsys: pytest.CaptureFixture[str]) -> None:
    """The tiny recipe measured 1.31 GiB device used under `loratui run` and 1.34 GiB in the small grid (an H100);
    the estimate said 1.94 before the small models were measured (BENCHMARKS.md, "The estimator on small models")."""
    assert cli_main(["estimate", str(REPO / "recipes" / "tiny.toml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 1.31 * 0.9 < out["peak_device_gib"] < 1.34 * 1.1 and out["fits"] is True


def test_command_module_imports_light() -> None:
    import subprocess
    import sys

    code = ("import sys, loratui.commands.estimate, loratui.logic.estimate; "
            "print(','.join(m for m in ('torch', 'transformers', 'textual', 'peft') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


THROUGHPUT = [json.loads(line) for line in (REPO / "bench" / "throughput_h200.jsonl").read_text().splitlines()]
MEASURED_RUNS = [row for row in THROUGHPUT if row["nvml_peak_gib"] is not None]


def throughput_error(row: dict, tmp_path: Path) -> float:
    """Relative error of the estimate for one recipe variant measured by `loratui run` on the H200."""
    from bench.recipe_variant import variant_text  # the very edit the GPU suite made

    text = variant_text((REPO / row["base"]).read_text(), row["overrides"])
    predicted = estimate(load_recipe(tmp_path / "variant.toml", text), QWEN7B, 141.0)
    return predicted.peak_device_gib / row["nvml_peak_gib"] - 1


@pytest.mark.parametrize("row", MEASURED_RUNS, ids=[row["name"] for row in MEASURED_RUNS])
def test_recipe_variants_measured_by_loratui_within_ten_percent(row: dict, tmp_path: Path) -> None:
    assert abs(throughput_error(row, tmp_path)) <= 0.10


def test_liger_kernels_are_modelled(tmp_path: Path) -> None:
    """Liger's fused cross-entropy drops the 152k-vocab logits: fitted on the two QLoRA+checkpointing
    runs, it must also hold for the two runs the fit did not see (bf16, and no checkpointing)."""
    liger = {row["name"]: throughput_error(row, tmp_path) for row in MEASURED_RUNS
             if any("use_liger_kernel=true" in o for o in row["overrides"])}
    assert set(liger) == {"qlora-liger", "qlora-liger-2048", "qlora-liger-nogc", "bf16-liger"}
    assert all(abs(err) <= 0.03 for err in liger.values()), liger


def test_the_estimate_says_its_figure_is_a_cuda_gpus_and_gives_what_a_cpu_run_shows(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`loratui estimate tiny` said 1.95 GiB where the app, on a CPU run, showed 36 MiB: the figure is a CUDA GPU's
    (its context and the caching allocator's slack); a CPU run's, in the app's words ('on CPU'), is said beside it."""
    from loratui.commands.estimate import compute
    from loratui.units import size

    assert cli_main(["estimate", str(REPO / "recipes" / "tiny.toml")]) == 0
    out = capsys.readouterr().out
    _, recipe, config, _ = compute(REPO / "recipes" / "tiny.toml", 32.0)
    gpu, cpu = estimate(recipe, config), estimate(recipe, config, cuda=False)
    (peak,) = [line for line in out.splitlines() if "decides OOM" in line]
    assert "on a CUDA GPU" in peak and f"{gpu.peak_device_gib:.2f} GiB" in peak, out
    (on_cpu,) = [line for line in out.splitlines() if line.lstrip().startswith("on CPU")]
    assert on_cpu.rstrip().endswith(size(cpu.peak_device_gib)) and "no CUDA context" in on_cpu, out


HOLDOUT = [json.loads(line) for line in (REPO / "bench" / "estimate_holdout.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("row", HOLDOUT, ids=[row["name"] for row in HOLDOUT])
def test_held_out_architectures_within_ten_percent(row: dict, tmp_path: Path) -> None:
    """Architectures and sizes no constant was fitted on (Llama-3-8B, Qwen3 8B/1.7B, Gemma-2 2B, Phi-3-mini with its
    fused projections), measured on an H100 after the estimate was fixed: the estimate stays within the ±10 % it
    states for a known architecture (bench/estimate_holdout.py prints the table)."""
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    from estimate_small import predicted

    config = {k: v for k, v in row.items() if k in ("model", "quant", "batch", "seq", "gc", "optim", "attn", "r",
                                                   "targets")}
    got = predicted(config, tmp_path, card_gib=141.0)
    assert row["status"] == "ok" and got.uncertainty == 0.10
    assert abs(got.peak_device_gib / row["nvml_peak_gib"] - 1) <= 0.10


SMALL = [json.loads(line) for line in (REPO / "bench" / "estimate_small.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("row", SMALL, ids=[row["name"] for row in SMALL])
def test_small_models_within_the_stated_band(row: dict, tmp_path: Path) -> None:
    """The small grid (the tiny recipe's model, ~32M, SmolLM-135M/360M, Qwen2.5-0.5B at small batches; an H100): each
    row, of the FIT and the HOLDOUT half alike, within the uncertainty the estimate states. Before the refit the tiny
    model's rows were 41-45 % over (bench/results/estimate_small_predicted.txt)."""
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    from estimate_small import predicted

    config = {k: v for k, v in row.items() if k in ("model", "quant", "batch", "seq", "gc", "optim", "attn", "r",
                                                   "targets", "dropout")}
    got = predicted(config, tmp_path)
    assert row["status"] == "ok"
    assert abs(got.peak_device_gib / row["nvml_peak_gib"] - 1) <= got.uncertainty


def test_small_grid_has_both_halves_of_every_model() -> None:
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    from estimate_grid import SMALL as CONFIGS
    from estimate_grid import config_name, small_half

    assert [row["name"] for row in SMALL] == [config_name(c) for c in CONFIGS]
    halves = {(c["model"], small_half(c)) for c in CONFIGS}
    assert halves == {(c["model"], half) for c in CONFIGS for half in ("fit", "holdout")}
