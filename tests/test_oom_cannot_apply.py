"""`doctor` on an out-of-memory paste does not propose what cannot apply: CUDA words and TrainingArguments fields for
MLX on a Mac's GPU (Metal), or a smaller training batch where the text says the batch is already 1."""

from __future__ import annotations

import io

import pytest

from loratui.commands import doctor
from loratui.logic.advisor.advice import Advice
from loratui.logic.advisor.text import BATCH_ONE


def _first(text: str) -> Advice:
    items = doctor.diagnose_stream(io.BytesIO(text.encode()), "pasted text")[0]
    assert items, text
    return items[0]


METAL = ("libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer "
         "execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)")


@pytest.mark.parametrize("text", [
    "mlx_lm.lora --model ./qwen-4bit --train --iters 300\nLoading datasets\nTraining\n" + METAL + "\n",
    ("python lora.py --model mlx_model --train\nTraining\nlibc++abi: terminating due to uncaught exception of type "
     "std::runtime_error: [malloc_or_wait] Unable to allocate 64 bytes.\n"),
])
def test_a_macs_gpu_is_no_cuda_and_has_no_trainer(text: str) -> None:
    item = _first(text)
    assert item.id == "oom_full"
    said = " ".join([item.title, *item.evidence, *map(str, item.change)])
    assert "CUDA" not in said and "per_device_train_batch_size" not in said, said
    assert item.title.startswith("Apple GPU (Metal) out of memory") and "--batch-size" in item.title


def test_a_macs_gpu_in_evaluation_gets_no_trainer_field() -> None:
    item = _first("Training is fine, but the evaluation afterwards fails with:\n" + METAL + "\n")
    assert item.id == "oom_at_eval"
    assert "CUDA" not in item.title and "per_device_eval_batch_size" not in item.title, item.title


def test_pytorchs_cuda_oom_keeps_its_words() -> None:
    item = _first("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert item.title.startswith("CUDA out of memory") and "per_device_train_batch_size" in item.title


@pytest.mark.parametrize("said", [
    "I already run with a micro batch size of 1 and it still goes OOM on my 24 GB card.",
    "单卡A10，batch_size设置为1还是显存不够：",
    "--per_device_train_batch_size 1 --gradient_accumulation_steps 16 --bf16",
    # `fine` of fine-tuning is no batch that worked (batch-col13b:18's words read as one)
    "I'm fine-tuning a 7B model with LoRA, even with the batch size set to 1.",
    "Fine tuning with per_device_train_batch_size 1 still runs out of memory.",
])
def test_a_batch_already_one_is_not_told_to_shrink(said: str) -> None:
    item = _first(said + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.\n")
    assert item.id == "oom_full"
    assert "lower the batch size" not in item.title, item.title
    assert "batch already 1" in item.title
    assert sum(said.strip()[:40] in line for line in item.evidence) == 1, item.evidence


@pytest.mark.parametrize("said", [
    "With batch size 1 it works, with 2 it runs out of memory.",
    "--per_device_eval_batch_size 1 --per_device_train_batch_size 8",
    "labels = torch.zeros((batch_size, 1))",
    "bs=1 ok, bs=2 goes out of memory",
    "I tried batch size 1 and batch size 4 and one of them crashed",
    "Fine-tuning with batch size 1 works fine; batch size 2 runs out of memory.",
])
def test_a_batch_of_one_that_is_not_the_failing_training_batch(said: str) -> None:
    item = _first(said + "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.\n")
    assert "lower the batch size" in item.title, item.title


@pytest.mark.parametrize(("line", "one"), [
    ("bs=1, lr=2e-4", True), ("train_batch_size: 1", True), ('"per_device_train_batch_size": 1,', True),
    ("batch size 16", False), ("batch_size=1e-3", False), ("batch size 1.5", False), ("eval_batch_size=1", False),
])
def test_which_lines_say_a_batch_of_one(line: str, one: bool) -> None:
    assert bool(BATCH_ONE.search(line)) is one


@pytest.mark.parametrize("said", [
    "Training is fine but when the validation runs it dies with an OOM, the 128G of the node are not enough.",
    "After the last epoch the evaluation fails due to OOM every time.",
])
def test_words_that_name_no_gpu_get_no_cuda_title(said: str) -> None:
    """Only the person's words say it ran out, and they name no GPU (it may be the host's RAM): "CUDA" is made up."""
    item = _first(said + "\n")
    assert item.id == "oom_at_eval"
    assert item.title.startswith("Out of memory during evaluation"), item.title


def test_words_that_name_the_gpu_keep_cuda() -> None:
    item = _first("When the validation runs, the GPU goes out of memory every time.\n")
    assert item.id == "oom_at_eval" and item.title.startswith("CUDA out of memory"), item.title


def test_a_save_oom_in_words_naming_no_gpu_gets_no_cuda_setting_as_its_change() -> None:
    """A Ray worker killed for memory at each checkpoint save is as likely the host's RAM: the CUDA allocator's
    setting is one branch of the advice, not the change to make."""
    item = _first("Every 500 iterations, while the checkpoint is being saved, the job runs out of memory and dies.\n")
    assert item.id == "oom_at_save" and item.title.startswith("Out of memory during checkpoint save")
    assert item.change == {} and "host's RAM" in item.title, item


@pytest.mark.parametrize("text", [
    "Trying QLoRA on my MacBook Pro (M3 Max) and from_pretrained stops with\n"
    "ImportError: Using `bitsandbytes` 4-bit quantization requires the latest version of bitsandbytes\n",
    "model = AutoModelForCausalLM.from_pretrained(name, quantization_config=cfg, device_map='mps')\n"
    "RuntimeError: No GPU found. A GPU is needed for quantization.\n",
    "/opt/homebrew/lib/python3.12/site-packages/bitsandbytes/cextension.py:34: UserWarning: The installed version of "
    "bitsandbytes was compiled without GPU support. 8-bit optimizers and GPU quantization are unavailable.\n",
])
def test_bitsandbytes_on_a_mac_is_not_told_to_install_a_cuda_build(text: str) -> None:
    item = _first(text)
    assert item.id == "bnb_setup"
    assert "pip install" not in item.title and "Mac" in item.title, item.title


def test_the_nvidia_multi_process_service_is_no_mac() -> None:
    item = _first("CUDA MPS daemon is running on the node.\nRuntimeError: No GPU found. A GPU is needed for "
                  "quantization.\n")
    assert item.id == "bnb_setup" and "Mac" not in item.title, item.title


def test_a_plain_loops_oom_is_said_in_any_loops_words() -> None:
    """A Keras or plain PyTorch script has no per_device_train_batch_size: the move names the batch size in words,
    the Trainer's field only in brackets."""
    item = _first("model.fit(x, y, batch_size=64)\ntensorflow.python.framework.errors_impl.ResourceExhaustedError: "
                  "OOM when allocating tensor with shape[64,512,512] on /job:localhost/replica:0/task:0/device:GPU:0\n")
    assert item.id == "oom_full" and "lower the batch size (per_device_train_batch_size)" in item.title, item.title
    item = _first("Training is fine, but the evaluation afterwards fails with:\n"
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n")
    assert item.id == "oom_at_eval" and "lower the evaluation's batch size" in item.title, item.title


@pytest.mark.parametrize("kind", ["oom_full", "oom_at_eval"])
def test_the_word_models_memory_guess_names_the_batch_in_any_loops_words(kind: str) -> None:
    from loratui.logic.word_guess import Guess, advice

    said = advice(Guess(kind=kind, p_problem=0.95, p_kind=0.8), 1000)
    check = said.evidence[-1]
    assert "batch size (per_device_" in check, check


def test_video_memory_named_in_words_is_a_gpus() -> None:
    item = _first("Training the VAE on my 2080 keeps failing for lack of video memory after a few iterations.\n")
    assert item.id == "oom_full" and item.title.startswith("CUDA out of memory"), item.title
