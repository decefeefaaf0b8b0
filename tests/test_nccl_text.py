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
