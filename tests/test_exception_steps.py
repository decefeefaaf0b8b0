"""An exception's next step says what its message means, not a version check that fits every message (a
newcomer's trial, polish 10): a LoRA backward with nothing that needs a gradient, a model folder with no
weights, a keyword the installed library does not take.

The first pasted text is huggingface/peft#137's (the corpus's dev record peft_seq2seq_flan_t5_no_grad_fn_...);
the torch warning is the one printed in LlamaChinese/Llama-Chinese#242 and baichuan-inc/Baichuan-13B#14 before
the same error.
"""

from __future__ import annotations

import io

from loratui.commands.doctor import diagnose_stream


def first(text: str):  # type: ignore[no-untyped-def]
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0]


NO_GRAD = "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"
PEFT_137 = "\n".join([
    "I tried to use peft model with Seq2SeqTrainer, got the next error:",
    "```",
    "Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
    NO_GRAD,
    "```",
    "Code:",
    "```",
    "model = AutoModelForSeq2SeqLM.from_pretrained(",
    '        "google/flan-t5-large",',
    "        use_cache=False if args.gradient_checkpointing else True, ",
    ")",
    "model = get_peft_model(model, lora_config)",
    "```",
])
TORCH_WARNING = ("/usr/local/lib/python3.10/site-packages/torch/utils/checkpoint.py:31: UserWarning: "
                 "None of the inputs have requires_grad=True. Gradients will be None")
TRACEBACK = "\n".join([
    "Traceback (most recent call last):",
    '  File "/home/u/sft/train.py", line 52, in <module>',
    "    trainer.train()",
    '  File "/home/u/.venv/lib/python3.10/site-packages/transformers/trainer.py", line 1539, in train',
    "    return inner_training_loop(",
    '  File "/home/u/.venv/lib/python3.10/site-packages/torch/autograd/__init__.py", line 200, in backward',
    "    Variable._execution_engine.run_backward(",
])


def test_no_grad_fn_in_a_lora_run_points_at_gradient_checkpointing_not_the_torch_version() -> None:
    item = first(PEFT_137)
    assert item.id == "exception"
    assert "enable_input_require_grads()" in item.title and "prepare_model_for_kbit_training" in item.title
    assert '"use_reentrant": False' in item.title and "gradient checkpointing" in item.title
    assert "torch version" not in item.title and "read the message" not in item.title
    assert NO_GRAD in item.evidence
    # the text's own line that shows checkpointing is on, quoted
    assert any("args.gradient_checkpointing" in line
               and line.startswith("the text shows gradient checkpointing") for line in item.evidence), \
        item.evidence


def test_torchs_checkpoint_warning_is_quoted_as_the_evidence() -> None:
    item = first(TORCH_WARNING + "\n" + TRACEBACK + "\n" + NO_GRAD)
    assert "enable_input_require_grads()" in item.title and "torch version" not in item.title
    assert any("None of the inputs have requires_grad=True" in line for line in item.evidence), item.evidence


NO_WEIGHTS = ("OSError: Error no file named pytorch_model.bin, model.safetensors, tf_model.h5, "
              "model.ckpt.index or flax_model.msgpack found in directory /data/models/llama-7b.")
LOADING = "\n".join([
    "Traceback (most recent call last):",
    '  File "/home/u/sft/train.py", line 30, in <module>',
    "    model = AutoModelForCausalLM.from_pretrained(args.model)",
    '  File "/home/u/.venv/lib/python3.10/site-packages/transformers/modeling_utils.py", line 3144, in '
    "from_pretrained",
    "    raise EnvironmentError(",
])


def test_a_model_folder_without_weights_is_named_with_what_to_point_at() -> None:
    item = first(LOADING + "\n" + NO_WEIGHTS)
    assert item.id == "exception"
    assert "'/data/models/llama-7b' holds no weights" in item.title, item.title
    assert "--model-path" in item.title and "model_name_or_path" in item.title and "hub id" in item.title
    assert "transformers version" not in item.title
    assert NO_WEIGHTS in item.evidence


def test_an_unexpected_keyword_is_named_as_a_version_difference_at_its_line() -> None:
    item = first("\n".join([
        "Traceback (most recent call last):",
        '  File "/home/u/sft/train.py", line 52, in <module>',
        '    args = TrainingArguments(output_dir="out", warmup_ratio=0.1)',
        "TypeError: __init__() got an unexpected keyword argument 'warmup_ratio'",
    ]))
    assert item.id == "exception"
    assert "TrainingArguments" in item.title and "takes no keyword 'warmup_ratio'" in item.title, item.title
    assert "version" in item.title and "written for" in item.title
    assert "says what it expected" not in item.title
    assert "train.py:52" in item.title
    assert "raised in your code (train.py:52)" in item.evidence, item.evidence


def test_an_unexpected_keyword_raised_in_a_library_names_the_library() -> None:
    # trl's SFTTrainer passing on an argument newer versions took away (the corpus's
    # trl_sfttrainer_tokenizer_kwarg_removed)
    item = first("\n".join([
        "Traceback (most recent call last):",
        '  File "/home/u/sft/Comm_Pretrain.py", line 596, in <module>',
        "    trainer = SFTTrainer(model=model, tokenizer=tokenizer, train_dataset=ds)",
        '  File "/home/u/.venv/lib/python3.11/site-packages/trl/trainer/sft_trainer.py", line 180, in '
        "__init__",
        "    super().__init__(",
        "TypeError: Trainer.__init__() got an unexpected keyword argument 'tokenizer'",
    ]))
    assert "Trainer (called inside trl) takes no keyword 'tokenizer'" in item.title, item.title
    assert "pip show trl" in item.title and "written for" in item.title
    assert "Comm_Pretrain.py:596" in item.title


def test_words_that_turn_checkpointing_off_are_not_quoted_as_it_being_on() -> None:
    for off in ("I disabled gradient checkpointing and it still fails", "gradient_checkpointing: false",
                "--gradient_checkpointing False", "gradient checkpointing is off"):
        item = first(off + "\n" + NO_GRAD)
        assert "enable_input_require_grads()" in item.title
        assert not any(line.startswith("the text shows gradient checkpointing") for line in item.evidence), \
            (off, item.evidence)
