"""Issue 23: someone else holds the card, read from the shape of the person's account (logic/oom_holders.py):
a run that ended and kept its memory, a card given to another program, a process found holding the memory.

Each reader is shown with the dev line it was written from (source in a comment), then with wordings of my own
that another person would write (other verbs, tools, numbers, Chinese), then with negatives: the same words
about a release that happens, a condition of release, the run's own card or process.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream
from loratui.logic import oom, oom_holders, oom_words

BARE_OOM = "RuntimeError: CUDA error: out of memory"
"""An OOM message with no numbers: the kind is the person's words' to tell."""


def first_id(text: str) -> str:
    """The id of the doctor's first item for a pasted text ('' when it finds nothing)."""
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


# -- a run that ended kept its memory ------------------------------------------------------------------

ENDED_KEPT = [
    # https://github.com/kijai/ComfyUI-FluxTrainer/issues/122
    "When I finish training LoRA, even though the process has ended, the GPU memory remains occupied. This causes my "
    "workflow to run perfectly fine on the first attempt, but subsequent runs result in an out-of-memory (OOM) issue.",
    # https://github.com/OpenDriveLab/UniAD/issues/180
    "### The GPU memory is not released if I forcibly stop the training process (by using Ctrl-C in the terminal)",
    # https://github.com/PaddlePaddle/PaddleSpeech/issues/178
    "fuser -v /dev/nvidia* 查了一下应该是 运行 run_trian.sh 报上面的失败之后的内存泄漏",
    "After I hit Ctrl+C the VRAM was never freed, so the second launch dies immediately.",
    "My job crashed an hour ago but nvidia-smi says its 21GB are still in use.",
    "Killing the deepspeed launcher leaves the workers alive: they keep holding 30 GB on every card.",
    "训练中断后显存没有释放，再次运行就报错",
    "程序崩溃以后显存一直被占用，只能重启机器",
    # the modal forms of wave 22's PaddleDetection thread (it cannot / will not be released)
    "中途报错后用kill -9 命令杀死进程，显卡占据的显存仍不会释放",
    "训练停止以后显存没法释放，只能重启",
]


@pytest.mark.parametrize("line", ENDED_KEPT)
def test_a_run_that_ended_and_kept_its_memory(line: str) -> None:
    assert oom_holders.left_held(line)
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "PyTorch's caching allocator: the cached memory is not released until the process exits.",
    "The memory is released as soon as the process ends, nvidia-smi shows 0 MiB.",
    "Memory is not released after each evaluation, so training OOMs at step 500.",
    "显存不足，训练中断了",
    "训练结束后显存释放了",
    "训练结束后显存会释放，不用担心",
])
def test_a_release_that_happens_or_a_condition_of_it_is_no_holder(line: str) -> None:
    assert not oom_holders.left_held(line)


def test_the_rerun_after_a_stopped_run_is_another_process() -> None:
    text = ("I stopped the previous training with ctrl-c and started it again.\n"
            "The memory of the first run was not released (nvidia-smi: 17323MiB / 24259MiB).\n" + BARE_OOM + "\n")
    assert first_id(text) == "oom_other_process"


# -- a card given to another program ---------------------------------------------------------------------

GIVEN_CARD = [
    # https://github.com/huggingface/trl/issues/3088
    "**Question:**  During TRL training with a separate GPU for vLLM inference, I'm seeing unexpected GPU memory "
    "increases on the vLLM GPU, leading to OOM errors.",
    # https://github.com/yangjianxin1/GPT2-chitchat/issues/19
    "gpu 0 是tf 在跑的代码，",
    "GPU 2 is already running someone else's job, and my script picked it by default.",
    "Card 1 is reserved for the inference server; the OOM is on that card.",
    "the trainer ran out of memory on the SGLang GPU even though it should only use cuda:0",
    "卡1上是别人在跑的模型，我的程序也用了卡1",
]


@pytest.mark.parametrize("line", GIVEN_CARD)
def test_a_card_given_to_another_program(line: str) -> None:
    assert oom_holders.given_card(line)
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "GPU 0 is running my training job at 100% utilisation.",
    "GPU 0 runs the training and GPU 1 runs the evaluation.",
    "卡0上是我在跑的训练",
    "The GPU is running out of memory at step 30.",
])
def test_the_runs_own_card_is_no_other_program(line: str) -> None:
    assert not oom_holders.given_card(line)


def test_the_card_busy_with_another_frameworks_job() -> None:
    text = "GPU 0 is busy with a tensorflow job, the others are empty.\n" + BARE_OOM + "\n"
    assert first_id(text) == "oom_other_process"


# -- a process found holding the memory ------------------------------------------------------------------

FOUND = [
    # https://github.com/RangiLyu/nanodet/issues/147
    "我运行nvidia-smi，发现有个VeCarRecoServer进程，把所有内存基本全吃了，杀掉再运行训练的命令，又会出现这个进程",
    "nvidia-smi shows a process called Xwayland-helper using 6GB of the card.",
    "I noticed several python processes taking up the GPU memory, none of them mine.",
    "There is a zombie process holding 11 GB on GPU 3.",
    "用nvidia-smi看到有几个python进程占着显存",
]


@pytest.mark.parametrize("line", FOUND)
def test_a_process_found_holding_the_memory(line: str) -> None:
    assert oom_holders.found_holder(line)
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "I see the process is using 23GB right before the OOM.",
    "The python process uses all the GPU memory at step 10.",
    "这个进程是训练进程",
])
def test_the_runs_own_process_is_not_found(line: str) -> None:
    assert not oom_holders.found_holder(line)


def test_a_found_process_alone_makes_the_oom_story() -> None:
    """No OOM message: the person's account of who holds the memory is the story (nanodet, above)."""
    assert first_id(FOUND[0] + "\n") == "oom_other_process"


# -- a condition the person observed --------------------------------------------------------------------


@pytest.mark.parametrize("line", [
    # https://github.com/apache/mxnet/issues/2778
    "I found that if two mxnet programs run on the same GPU and one of them cause out of memory error, I will never "
    "run any mxnet programs anymore.",
    "We noticed that when two jobs share one card, the second one always OOMs.",
    "I realized that if two users train on the same GPU, one of them gets CUDA out of memory.",
])
def test_an_observed_condition_names_the_cause(line: str) -> None:
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "Please check whether there is any other process using GPU 0.",
    "If another process is using the GPU, stop it.",
])
def test_a_supposed_neighbour_is_no_cause(line: str) -> None:
    assert oom_words.said_cause(line) == ""


def test_the_messages_numbers_outweigh_the_words() -> None:
    """A full card by the message's numbers (this process holds it all) stays full beside words of a stopped run."""
    text = ("I stopped the old run with ctrl-c but its memory was not released, so I rebooted.\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "23.65 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 22.61 GiB memory in "
            "use. Of the allocated memory 22.10 GiB is allocated by PyTorch, and 120.00 MiB is reserved by PyTorch but "
            "unallocated.\n")
    assert first_id(text) == "oom_full"


# -- memory held before the run began; another person or program beside it; an old run still alive ---------
# No dev record reads these shapes; they are the other accounts a maintainer takes for "someone else holds the card"
# (the brief's list: memory in use before the run starts, two people or programs on one card, a previous run that
# did not exit, a fix that chose another card), each in wordings of my own.


@pytest.mark.parametrize("line", [
    "Before launching, nvidia-smi already reported 30GB used on GPU 0.",
    "The card had only 2 GB free when I launched the script.",
    "When I start the notebook, already 60% of the memory is in use.",
    "还没开始训练显存就占了10G",
    "训练之前显存就已经被占了一半",
])
def test_memory_held_before_the_run_began(line: str) -> None:
    assert oom_holders.started_on_held(line)
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "Only 2 GB free at step 300, then it crashes.",
    "When I start training, memory grows to 23GB and it OOMs.",
    "The model already uses 20GB after loading.",
])
def test_the_runs_own_growth_is_not_held_before(line: str) -> None:
    assert not oom_holders.started_on_held(line)


@pytest.mark.parametrize("line", [
    "Someone on my team was training on the same GPU.",
    "Turns out a colleague had started a job on that card an hour earlier.",
    "I forgot that a profiler process was also using the GPU.",
    "同事也在用这张卡跑模型",
    "It turns out I had an old python process hanging around that held 20GB.",
    "ps aux showed an old training still running in the background.",
    "之前的训练进程还在，没有退出",
])
def test_another_person_or_an_old_run_on_the_card(line: str) -> None:
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "With the previous run, batch size 8 worked fine, now it OOMs.",
    "In my previous runs the memory stayed at 20GB; this run goes up to 40GB and OOMs.",
    "The second run with batch size 16 runs out of memory.",
    "The old version of the script ran fine on the same data.",
])
def test_a_run_compared_is_no_holder(line: str) -> None:
    """`previous run`, `second run` name a run the person compares, not one beside this one on the card."""
    assert oom_words.said_cause(line) == ""


@pytest.mark.parametrize("line", [
    "Switching to GPU 1 fixed it.",
    "It works fine with CUDA_VISIBLE_DEVICES=2 instead of 0.",
    "I moved the job to an idle card and the OOM went away.",
    "换了一张卡就好了",
    "换成空闲的显卡后就不报错了",
])
def test_another_card_that_worked(line: str) -> None:
    assert oom_words.remedy_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "Switching to an A100 80GB fixed it.",
    "Moving to a bigger card solved it.",
    "I tried another GPU but it still OOMs.",
])
def test_a_bigger_card_or_a_swap_that_failed_is_no_neighbour(line: str) -> None:
    assert oom_words.remedy_cause(line) != oom.OTHER_PROCESS


def test_a_card_swap_that_worked_reads_a_bare_oom_as_another_process() -> None:
    text = BARE_OOM + "\nI had the same error on GPU 0; switching to GPU 3 fixed it.\n"
    assert first_id(text) == "oom_other_process"


# -- part of the run's memory on the first card ----------------------------------------------------------


@pytest.mark.parametrize("line", [
    # https://github.com/Lightning-AI/pytorch-lightning/issues/1702
    "however, there always a small part of the memory in gpu 0, when gpu 0 has not enough memory, error is produced.",
    "Although I set CUDA_VISIBLE_DEVICES=3, about 500MB is also allocated on GPU 0.",
    "Each worker also puts a small context on cuda:0 even though it trains on cuda:2.",
    "我只用了卡2，但卡0上也有一部分显存被占用",
])
def test_part_of_the_memory_on_the_first_card(line: str) -> None:
    assert oom_holders.stray_on_first(line)
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "The model is on GPU 0 and uses 20GB.",
    "I also tried batch size 4 on GPU 0.",
    "Some layers are placed on cuda:0 and the rest on cuda:1 with device_map auto.",
    "Even a small batch on GPU 0 runs out of memory.",
])
def test_the_runs_own_place_on_the_first_card_is_no_stray(line: str) -> None:
    assert not oom_holders.stray_on_first(line)


@pytest.mark.parametrize("text", [
    # https://github.com/ray-project/ray/issues/376
    "After start a new driver , i execute my code again. You can see more and more process is taking up GPU.\n"
    "|   0  Tesla K80           On   | 0000:06:00.0     Off |                    0 |\n"
    "| N/A   59C    P0    55W / 149W |  11283MiB / 11439MiB |     14%      Default |\n",
    "Every time I rerun the cell I find another python process occupying the GPU.\n",
    "nvidia-smi lists several zombie processes hogging the GPU.\n",
])
def test_processes_taking_the_gpu_are_the_oom_story(text: str) -> None:
    """What processes found on the card take is its memory: no OOM word is needed for the story."""
    assert first_id(text) == "oom_other_process"


@pytest.mark.parametrize("text", [
    "My training is taking up the GPU at 100% utilisation.\n",
    "We share a cluster with other users.\n",
])
def test_the_runs_own_use_or_a_shared_cluster_is_no_oom(text: str) -> None:
    assert first_id(text) != "oom_other_process"


@pytest.mark.parametrize("line", [
    "Switching to GPU 1 fixed it.",
    "It works fine with CUDA_VISIBLE_DEVICES=2 instead of 0.",
    "换了一张卡就好了",
    "The card had only 2 GB free when I launched the script.",
    "Turns out a colleague had started a job on that card an hour earlier.",
    "同事也在用这张卡跑模型",
    "卡1上是别人在跑的模型，我的程序也用了卡1",
    "ps aux showed an old training still running in the background.",
    "Each worker also puts a small context on cuda:0 even though it trains on cuda:2.",
])
def test_the_holders_words_reach_the_reader_before_or_after_the_message(line: str) -> None:
    """The text's cheap gates (a hint word, a word about the card) let each account through, wherever it stands."""
    assert first_id(BARE_OOM + "\n" + line + "\n") == "oom_other_process"
    assert first_id(line + "\n" + BARE_OOM + "\n") == "oom_other_process"


# -- the run doubled; another program closed ------------------------------------------------------------


@pytest.mark.parametrize("line", [
    "I had accidentally launched the script twice.",
    "There were two instances of the webui running at the same time.",
    "同时跑了两个训练，第二个就爆显存了",
    "Turns out I had two copies of the notebook open side by side.",
])
def test_the_run_doubled(line: str) -> None:
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "I run the script twice a day.",
    "Two processes run in parallel, one per GPU.",
    "Two processes, one GPU each.",
    "I evaluate twice per epoch.",
])
def test_a_distributed_run_or_a_schedule_is_no_double(line: str) -> None:
    assert oom_words.said_cause(line) == ""


@pytest.mark.parametrize("line", [
    "Closing Chrome and the other notebook fixed it.",
    "After I quit the game the training ran fine.",
    "关掉其他程序就好了",
    "Shutting down the jupyter server solved the OOM.",
])
def test_closing_another_program_that_worked(line: str) -> None:
    assert oom_words.remedy_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", [
    "Closing the dataloader fixed nothing.",
    "I closed the terminal but it still OOMs.",
    "I closed the browser, it did not help.",
])
def test_closing_that_did_not_help_is_no_neighbour(line: str) -> None:
    assert oom_words.remedy_cause(line) == ""


@pytest.mark.parametrize("line", [
    "I had accidentally launched the script twice.",
    "There were two instances of the webui running at the same time.",
    "Closing Chrome and the other notebook fixed it.",
    "After I quit the game the training ran fine.",
    "关掉其他程序就好了",
])
def test_a_double_or_a_closed_program_reaches_the_reader(line: str) -> None:
    assert first_id(BARE_OOM + "\n" + line + "\n") == "oom_other_process"
    assert first_id(line + "\n" + BARE_OOM + "\n") == "oom_other_process"


def test_a_double_without_an_oom_is_no_oom() -> None:
    """The words stand for the kind of an OOM the text shows; alone they tell of none."""
    assert first_id("I had accidentally launched the script twice.\n") != "oom_other_process"


# -- the words settle what the numbers leave open --------------------------------------------------------

KILLED = "nvidia-smi showed a zombie process from my previous run; killing it fixed the OOM.\n"


@pytest.mark.parametrize("message", [
    # 1.70 GiB outside PyTorch's 9.00 GiB reserved on a 10.76 GiB card (old format: the context is in it too)
    "RuntimeError: CUDA out of memory. Tried to allocate 430.00 MiB (GPU 0; 10.76 GiB total capacity; 8.70 GiB "
    "already allocated; 56.00 MiB free; 9.00 GiB reserved in total by PyTorch)",
    # 1.30 GiB outside this process's exact 21.30 GiB on a 23.65 GiB card (new format)
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.65 GiB of "
    "which 1.05 GiB is free. Including non-PyTorch memory, this process has 21.30 GiB memory in use. Of the allocated "
    "memory 20.90 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.",
])
def test_words_of_a_neighbour_settle_a_full_card_with_memory_outside_the_process(message: str) -> None:
    report = oom.parse_oom(message)
    assert report is not None and report.kind == oom.FULL  # the numbers alone: under the neighbour's floor
    assert oom.words_settle(report, oom.OTHER_PROCESS)
    assert first_id(message + "\n" + KILLED) == "oom_other_process"
    assert first_id(message + "\n") == "oom_full"


def test_a_process_holding_all_but_its_context_keeps_the_full_card() -> None:
    """0.30 GiB outside this process: the words are of another time than this message."""
    message = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
               "23.65 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 22.33 GiB memory in "
               "use. Of the allocated memory 22.10 GiB is allocated by PyTorch, and 120.00 MiB is reserved by PyTorch "
               "but unallocated.")
    report = oom.parse_oom(message)
    assert report is not None and not oom.words_settle(report, oom.OTHER_PROCESS)
    assert first_id(message + "\n" + KILLED) == "oom_full"


@pytest.mark.parametrize("line", [
    "I see 8 processes using GPU memory, one per rank.",
    "nvidia-smi shows 4 python processes using the GPU.",
])
def test_a_count_of_processes_using_the_gpu_is_a_distributed_run(line: str) -> None:
    assert not oom_holders.found_holder(line)


@pytest.mark.parametrize("line, expected", [
    ("I see 8 processes using GPU memory, one per rank.", ""),
    ("4 processes on GPU 0", oom.OTHER_PROCESS),
    ("all processes use the same GPU", oom.OTHER_PROCESS),
    ("eight ranks using cuda:0", oom.OTHER_PROCESS),
])
def test_ranks_on_one_named_card_not_ranks_using_gpus(line: str, expected: str) -> None:
    assert oom_words.said_cause(line) == expected


# -- memory held at idle; a card shared with someone -------------------------------------------------------


@pytest.mark.parametrize("line", [
    "The GPU shows 10GB used with nothing running.",
    "Memory usage is 10GB at idle.",
    "Even with nothing running, 6 GB of VRAM is in use.",
    "没有运行任何程序，显存却被占了10G",
    "I'm sharing the GPU with my labmate.",
    "The A100 is shared between several students.",
    "多个用户共用一张卡",
    "两个程序共用一张显卡，一个跑起来另一个就OOM",
    "另一个程序占用了显存",
])
def test_memory_held_at_idle_or_a_shared_card(line: str) -> None:
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS
    assert first_id(BARE_OOM + "\n" + line + "\n") == "oom_other_process"


@pytest.mark.parametrize("line", [
    "Nothing else is running on the GPU, and it uses 23GB at step 5.",
    "With nothing else running, the run uses 20GB.",
    "we share the server with other groups",
    "用另一个模型就不会OOM",
    "另外，batch size 是 8",
])
def test_no_neighbour_ruled_in(line: str) -> None:
    """`nothing else` rules a neighbour out; a shared server is not a shared card; another model is a comparison."""
    assert oom_words.said_cause(line) == ""


@pytest.mark.parametrize("line", [
    "Please check whether there is any other process using GPU 0.",
    "1. If yes, please stop them, or start PaddlePaddle on another GPU.",
    "2. If no, please decrease the batch size of your model.",
])
def test_paddles_boilerplate_is_no_evidence(line: str) -> None:
    """Printed under every Paddle OOM (https://github.com/PaddlePaddle/PaddleOCR/issues/1505 shows it whole)."""
    assert oom_words.said_cause(line) == "" and oom_words.remedy_cause(line) == ""


def test_a_kill_that_worked_in_chinese() -> None:
    assert oom_words.remedy_cause("kill掉之前的进程后就可以了") == oom.OTHER_PROCESS


# -- an inference engine started on a card another part of the job held ----------------------------------


@pytest.mark.parametrize("line", [
    # https://github.com/verl-project/verl/issues/4229
    "Before vLLM starts, Rollout Worker loads the FSDP model, occupying redundant GPU memory; vLLM then loads the "
    "complete model, causing GPU memory usage to accumulate.",
    "When the SGLang engine starts, the actor model already holds 30GB on the same card.",
    "vllm fails to init because the training model is already taking most of the memory.",
    "vllm启动之前，训练模型已经占了40G显存",
])
def test_an_engine_started_on_a_held_card(line: str) -> None:
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS
    assert first_id(BARE_OOM + "\n" + line + "\n") == "oom_other_process"


@pytest.mark.parametrize("line", [
    "When vLLM starts it allocates 90% of the GPU memory for the KV cache.",
    "Before the inference server starts, I load the tokenizer.",
    "vLLM uses 0.9 gpu_memory_utilization by default.",
])
def test_the_engines_own_share_is_no_neighbour(line: str) -> None:
    assert oom_words.said_cause(line) == ""


@pytest.mark.parametrize("line", [
    "I forgot to set CUDA_VISIBLE_DEVICES, so all workers went to GPU 0.",
    "Without set_device, every rank creates its context on GPU 0.",
    "所有进程都跑到了0号卡上",
])
def test_every_rank_piled_onto_one_card(line: str) -> None:
    assert oom_words.said_cause(line) == oom.OTHER_PROCESS


@pytest.mark.parametrize("line", ["Each worker trains on its own GPU.", "Every rank uses a GPU."])
def test_a_rank_per_card_is_no_pile(line: str) -> None:
    assert oom_words.said_cause(line) == ""


@pytest.mark.parametrize("line, expected", [
    ("I switched to another task (summarization) and it OOMs.", ""),
    ("On a different task with longer inputs it runs out of memory.", ""),
    ("Another task was running on the GPU.", oom.OTHER_PROCESS),
])
def test_another_ml_task_is_a_comparison_unless_it_runs_beside(line: str, expected: str) -> None:
    """`task` is also a dataset's task: another one is a holder only when it is running, on the card."""
    assert oom_words.said_cause(line) == expected


# -- more holders, whole texts ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "I get CUDA out of memory right at model.to('cuda') with a tiny model.\n" + BARE_OOM + "\n"
    "Turned out my other terminal had a python shell with the model loaded.\n",
    "CUDA OOM on the first batch. The weird thing: nvidia-smi showed 22GB used before I launched anything.\n",
    BARE_OOM + "\nIt was the display manager: gdm was using 3 GB of the card.\n",
    "训练时报 CUDA out of memory，后来发现是另一个人的程序占着显卡，换到2号卡就好了\n",
    "OOM again. Found out my jupyter kernel from yesterday was still running and had 14GB.\n",
])
def test_more_holders_in_whole_texts(text: str) -> None:
    assert first_id(text) == "oom_other_process"


@pytest.mark.parametrize("line", [
    "My training from yesterday finished fine, loss 0.8.",
    "The display shows the loss going down.",
    "I copied the config from the previous repo.",
])
def test_the_runs_own_life_is_no_holder(line: str) -> None:
    assert first_id(BARE_OOM + "\n" + line + "\n") == "oom_full"


def _items(text: str) -> list:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items


def test_memory_on_gpu_0_gets_the_set_device_move() -> None:
    """Part of the job on the default card (https://github.com/Lightning-AI/pytorch-lightning/issues/1702 was solved
    with torch.cuda.set_device): the advice names that move beside stopping the other process."""
    items = _items(BARE_OOM + "\nI set CUDA_VISIBLE_DEVICES=3 but about 500MB is also allocated on GPU 0.\n")
    assert items[0].id == "oom_other_process"
    assert any("torch.cuda.set_device(local_rank)" in line for line in items[0].evidence)


def test_a_holder_on_another_card_gets_no_set_device_move() -> None:
    items = _items(BARE_OOM + "\nI found a zombie process holding 11 GB on GPU 3.\n")
    assert items[0].id == "oom_other_process"
    assert not any("set_device" in line for line in items[0].evidence)


@pytest.mark.parametrize("line", [
    # R29 (twenty-eighth session): a percentage after `occupied` or `busy` is the card's utilisation, no holder
    "Why is training so slow? The GPU is occupied on 0% and the memory usage is only 200M.",
    "The card is busy at 100% the whole time, is that expected?",
])
def test_a_card_busy_at_a_percentage_is_its_utilisation(line: str) -> None:
    assert oom_words.said_cause(line) != oom.OTHER_PROCESS
    assert first_id(line) != "oom_other_process"
