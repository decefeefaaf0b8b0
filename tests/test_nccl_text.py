"""Issue 23: a distributed timeout in the words of every layer and torch era (the watchdog, its heartbeat
monitor, the elastic rendezvous, the store), and a store failure cut before its cause, read as nccl_timeout;
a setting that names a timeout is no timeout."""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first_id(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0].id if items else ""


@pytest.mark.parametrize("line", [
    "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
    "[rank0]:[E1105 10:11:12.000000 ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck "
    "for 480 seconds without making progress in monitoring enqueued collectives. This typically indicates a "
    "NCCL/CUDA API hang blocking the watchdog",
    "[rank3]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 3] Heartbeat monitor timed out! Process will be terminated "
    "after dumping debug info. workMetaList_.size()=1",
    "torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via "
    "c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 1, for key: "
    "store_based_barrier_key:1 (world_size=2, worker_count=1, timeout=0:30:00)",
])
def test_distributed_timeouts_of_every_layer(line: str) -> None:
    assert first_id(line + "\n") == "nccl_timeout"


@pytest.mark.parametrize("line", [
    "NCCL_IB_TIMEOUT set by environment to 22.",
    "[INFO] ddp_timeout=180000000, the watchdog will wait that long",
])
def test_timeout_settings_are_no_timeout(line: str) -> None:
    assert first_id(line + "\n") != "nccl_timeout"


def first(text: str):
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    return items[0]


def test_a_timeout_at_the_first_collectives_names_the_preparation() -> None:
    """The pattern of https://github.com/stanford-futuredata/ColBERT (k-means on one rank) and Myria3D's HDF5 build
    (dev): SeqNum=3-5 with one element, the ranks never started training together."""
    item = first("[rank1]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective operation timeout: "
                 "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800008 "
                 "milliseconds before timing out.\n")
    assert item.id == "nccl_timeout" and "first collectives" in item.title and "ddp_timeout" in item.title


def test_a_timeout_deep_into_training_keeps_its_own_advice() -> None:
    item = first("[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
                 "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before "
                 "timing out.\n")
    assert item.id == "nccl_timeout" and "first collectives" not in item.title


NCCL_INFO = ("node1:2231:2231 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.4<0>\n"
             "node1:2231:2290 [0] NCCL INFO Channel 00/02 :    0   1\n"
             "node1:2231:2290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
             "node1:2231:2290 [0] NCCL INFO Connected all rings\n")


def test_a_hang_after_nccl_set_up_its_channels() -> None:
    item = first(NCCL_INFO + "and then the training hangs here forever, no error\n")
    assert item.id == "nccl_timeout" and "NCCL_P2P_DISABLE=1" in item.title


def test_nccl_lines_of_a_run_that_trains_are_no_hang() -> None:
    text = NCCL_INFO + "".join(f"{{'loss': {2.0 - i / 50:.3f}, 'epoch': {i / 10:.1f}}}\n" for i in range(1, 12))
    assert first_id(text) != "nccl_timeout"


def test_a_hang_without_nccl_lines_is_not_a_collective() -> None:
    assert first_id("the training hangs at the first batch with num_workers=8\n") != "nccl_timeout"


@pytest.mark.parametrize("line", [
    # https://github.com/Peterande/D-FINE/issues/316 (dev-learn)
    "训练到第26个epoch卡死，10分钟后报NCCL超时错误，这是什么原因啊，我就是把输入尺寸改成了[416, 768]",
    # the pattern, other words: another collective layer, another run
    "多卡训练跑了两个小时以后 barrier 超时，进程直接退出了",
    "用 deepspeed 训练 Qwen 的时候 all_reduce 一直卡着，最后 NCCL 通信超时",
])
def test_a_distributed_timeout_said_in_chinese(line: str) -> None:
    assert first_id(line + "\n") == "nccl_timeout"


@pytest.mark.parametrize("line", [
    "我把 NCCL 超时时间设置为 3600 秒，训练正常",
    "ddp_timeout 超时参数改成了 180000000",
    "请求 API 超时了，换了个镜像就好了",
])
def test_a_chinese_timeout_setting_or_another_timeout_is_no_collective(line: str) -> None:
    assert first_id(line + "\n") != "nccl_timeout"


# -- the timeout told in words while a rank prepares the data ----------------------------------------------------

@pytest.mark.parametrize("text", [
    # https://github.com/JIA-Lab-research/LongLoRA/issues/45 (dev-learn)
    "While rank 0 process is working  on prepping the dataset, and it takes longer than 30 minutes, an exception is "
    "thrown.\n",
    # https://github.com/shibing624/MedicalGPT/issues/129 (dev-learn)
    "我想问个问题就是每次多卡运行的时候因为分词得花很多时间，所以到30分钟的时候总会报错，后来查看 pytorch的ddp运行参数里有：\n",
    # the pattern, other words
    "Tokenizing the dataset on rank 0 takes over half an hour and then the other ranks die with a timeout error.\n",
    "多卡训练时数据预处理太慢，半小时后就超时退出了\n",
    "On 4 GPUs, preprocessing the dataset takes about 40 min, and every time at the 30 minute mark torchrun crashes.\n",
    "Training on 8 GPUs with DeepSpeed: the map over the corpus (tokenization) never finishes, the job times out and "
    "fails.\n",
    # several GPUs in the hang rule's words (one notion, gpu_count_words.SEVERAL_GPUS)
    "With ZeRO-3 on 4 x A100, tokenizing the dataset takes ages and every time at the 30 minute mark the job crashes.\n",
    "两卡训练，分词太慢，到30分钟的时候就报错退出\n",
])
def test_a_rank_preparing_data_past_the_timeout_in_words(text: str) -> None:
    item = first(text)
    assert item.id == "nccl_timeout" and "still preprocessing the dataset" in item.title and "ddp_timeout" in item.title


@pytest.mark.parametrize("text", [
    "Tokenizing the dataset takes 30 minutes on 8 GPUs, then training runs fine.\n",
    "I set ddp_timeout to 1800 and the tokenizer raised an error: KeyError 'input_ids'\n",
    "--ddp_timeout 1800 \\\nRunning tokenizer on dataset: 100%|██| 1000/1000 [00:05<00:00]\n"
    "ValueError: Asking to pad but the tokenizer does not have a padding token.\n",
    "How can I make preprocessing faster on multi-GPU so it does not hit the 30 minutes timeout?\n",
    "torchrun --nproc_per_node 4 train.py\nthe tokenizer is slow, it took 35 minutes, but no error\n",
    "Tokenizing takes a while on one GPU, after 30 minutes the notebook crashed with an out of memory error.\n",
])
def test_a_long_preparation_without_a_distributed_timeout_is_no_collective(text: str) -> None:
    assert first_id(text) != "nccl_timeout"


@pytest.mark.parametrize("text", [
    "单机多卡全量微调，使用deepspeed的stage3，每次到30分钟报错timeout：\n",  # LlamaFactory#662
    "With deepspeed on 4 GPUs the run fails with a timeout after 30 minutes, every time.\n",
])
def test_a_multi_gpu_timeout_at_the_defaults_half_hour_is_the_collectives(text: str) -> None:
    """Mechanism: 30 minutes is torch.distributed's default collective timeout (the Trainer's ddp_timeout); a
    multi-GPU run that fails with a timeout at that mark timed out in a collective, whatever kept a rank away, even
    where the text says no preparation."""
    assert first_id(text) == "nccl_timeout"


@pytest.mark.parametrize("text", [
    "With deepspeed on 4 GPUs the run fails after 30 minutes with a KeyError.\n",  # a failure, but no timeout
    "With deepspeed on 4 GPUs I raised the timeout to 30 minutes.\n",  # a setting
    "The HTTP download timed out after 30 minutes on my laptop.\n",  # no ranks
])
def test_a_half_hour_without_a_timeout_or_ranks_is_no_collective(text: str) -> None:
    assert first_id(text) != "nccl_timeout"


@pytest.mark.parametrize("text", [
    "Training on two nodes hangs forever at \"Initializing distributed\" and never starts.\n",
    "It hangs in the barrier after saving the checkpoint on rank 0.\n",
    "多机训练的时候卡住了，不报错也不动\n",
    "With 8 GPUs and apex mixed precision, NCCL hangs.\n",  # the collective as what hangs
    "After a few steps the all_reduce gets stuck on rank 3.\n",
])
def test_a_hang_in_a_collective_or_across_nodes_in_words(text: str) -> None:
    item = first(text)
    assert item.id == "nccl_timeout" and "as the text says" in item.title


def test_a_watchdog_that_kills_the_job_is_a_distributed_timeout() -> None:
    assert first_id("Our 8-GPU job freezes after ~1000 steps and then the watchdog kills it.\n") == "nccl_timeout"


@pytest.mark.parametrize("text", [
    # transformers#28280 and Matcha-TTS#57 (wave 16's dev half): settled as NCCL's peer-to-peer path
    "During the training with the offical LLaVA code, it stucks with multi-GPUs (2 or 4 A6000), but works with a "
    "single GPU.\n",
    "When i start training with multi-gpu, the script hangs forever with GPU at 100% and GPU Memory at 2%.\n",
    "训练用多卡就卡住了，单卡正常\n",
    # mmdetection#12392 (wave 17's dev half): a freeze that NCCL's error ends
    "When training rtmdet-ins using a custom dataset, GPU utilization reaches 100% during training, then freezes and "
    "displays an NCCL error.\n",
    # DSGN2#20 (wave 22's dev half): the cards named between the count and `GPUs`, and the `4x3090` shorthand
    "When using the provided training script on 4 RTX 3090 GPUs, the training freezes or hangs with 100% GPU "
    "Utilization.\n",
    "Training on 4x3090 hangs after a few hundred steps.\n",
    "On 8 x A100 the job freezes at random.\n",
    # Paddle's two-card hang (wave 23's dev half): cards counted in Chinese
    "单卡正常，两卡就有问题，卡住不动\n",
    "用4卡训练时卡住了\n",
    "With FSDP the training hangs after the first step.\n",
])
def test_a_run_said_to_hang_only_with_several_gpus_hangs_in_a_collective(text: str) -> None:
    """Mechanism: what several GPUs add to a run is their collectives; a run that hangs with them (and not with one)
    waits on a collective that never completes."""
    assert first_id(text) == "nccl_timeout"


@pytest.mark.parametrize("text", [
    "I train on 4 GPUs; the loss is stuck at 2.3.\n",  # the loss is what is stuck
    "With 2 GPUs the evaluation hangs after epoch 1.\n",  # other work named
    "Tokenizing hangs for an hour on multi-GPU.\n",
    "With batch 8 x 1024 tokens the loss is stuck at 2.3.\n",  # a batch's shape, no cards
    "我有两张卡，训练时loss卡住不降\n",  # the loss is what is stuck, its letters touching the characters
    "一张卡训练卡住了\n",  # one card
    "NCCL error: unhandled system error, NCCL version 2.18.1; nothing hangs, it fails at once.\n",  # no freeze said
])
def test_several_gpus_beside_other_stuck_work_is_no_collective(text: str) -> None:
    assert first_id(text) != "nccl_timeout"


@pytest.mark.parametrize("text", [
    "With DDP on 4 GPUs the dataloader hangs at the start of epoch 2.\n",
    "The watchdog is a nice feature of our cluster; training finished fine.\n",
    "Two nodes train fine at 3 it/s; a single node is faster.\n",
])
def test_a_loader_hang_or_a_healthy_multi_node_run_is_no_collective(text: str) -> None:
    assert first_id(text) != "nccl_timeout"


def test_a_watchdog_ended_by_a_cuda_error_is_that_error() -> None:
    assert first_id("terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  [Rank 0] "
                    "Process group watchdog thread terminated with exception: CUDA error: an illegal memory access "
                    "was encountered\n") == "cuda_error"


@pytest.mark.parametrize("text", [
    # the pattern of NVIDIA/tacotron2#64 (dev): the program's last line sets up the ranks, then it hangs
    "Distributed Run: True\nInitializing distributed\n\nand it hangs and never goes to the training step.\n",
    "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\nThe run is stuck there forever, nothing else printed.\n",
    # the pattern of DIFFNet#10 (dev): a launch for several ranks on the hang's line
    "With --nproc_per_node=2 it prints the config and then just stucks; with 1 it trains.\n",
    "accelerate launch --num_processes 4 train.py hangs right after loading the model\n",
    "CUDA_VISIBLE_DEVICES=0,1 torchrun train.py freezes before the first step\n",
    # STCN#73 (wave 30's dev half): the flag in markdown, spaced around its `=`
    "when I set the `--nproc_per_node` = 2, the code will get stuck, while I set the `--nproc_per_node` = 1 the "
    "code won't get stuck.\n",
])
def test_a_hang_after_the_ranks_set_up_or_with_several_launched(text: str) -> None:
    assert first_id(text) == "nccl_timeout"


@pytest.mark.parametrize("text", [
    "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\nThen the dataloader hangs at the first batch.\n",
    "With --nproc_per_node=1 it hangs while tokenizing the dataset.\n",
    "CUDA_VISIBLE_DEVICES=0 python train.py freezes before the first step\n",
])
def test_a_hang_in_other_work_or_on_one_rank_is_no_collective(text: str) -> None:
    assert first_id(text) != "nccl_timeout"


def test_a_rank_that_could_not_reach_the_store_is_told_where_to_look() -> None:
    """c10d's connect timeout (a transformers multi-node thread, wave 65 dev): no collective ran; the rendezvous
    address was out of reach (a firewall, a wrong MASTER_ADDR), not a rank that fell behind."""
    text = ('  File "/py37/lib/python3.7/site-packages/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py",'
            ' line 61, in next_rendezvous\n    multi_tenant=True,\n'
            "RuntimeError: connect() timed out. Original timeout was 900000 ms.\n")
    item = first(text)
    assert item.id == "nccl_timeout"
    assert item.title.startswith("A rank could not reach the ranks' rendezvous (c10d store) after 900 s")
    assert "MASTER_ADDR:MASTER_PORT" in item.title


def test_a_tpu_pod_whose_hosts_did_not_all_start_is_a_hang_of_the_ranks() -> None:
    """JAX's warning when one host of a multi-host TPU slice waits for the others (a T5X thread, wave 65 dev)."""
    text = ("It's stuck at this\n> UserWarning: TPU backend initialization is taking more than 60.0 seconds. Did you "
            "run your code on all TPU hosts? See https://jax.readthedocs.io/en/latest/multi_process.html for more "
            "information.\n")
    item = first(text)
    assert item.id == "nccl_timeout" and item.title.startswith("JAX's TPU backend is waiting for the pod's other hosts")


def test_a_connect_timeout_of_no_distributed_kind_is_not_read() -> None:
    assert first_id("requests.exceptions.ConnectTimeout: connect timed out while downloading the model\n") != \
        "nccl_timeout"
