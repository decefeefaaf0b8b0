"""Issue 23: a distributed timeout in the person's words, not only in NCCL's watchdog line.

A report often has no watchdog line, only what happened: `NCCL times out after 30 minutes`, `报NCCL超时错误` (D-FINE#316,
a dev record: `训练到第26个epoch卡死，10分钟后报NCCL超时错误`). A timeout setting (`NCCL超时时间设置为3600秒`,
`timeout=1800`) is no timeout that happened.
"""

from __future__ import annotations

import io

import pytest

from loratui.commands.doctor import diagnose_stream


def first(text: str) -> str:
    items, _ = diagnose_stream(io.BytesIO(text.encode("utf-8")), "pasted")
    alarms = [item.id for item in items if item.severity in ("error", "warning")]
    return alarms[0] if alarms else "healthy"


@pytest.mark.parametrize("text", [
    "训练到第26个epoch卡死，10分钟后报NCCL超时错误，这是什么原因啊",  # D-FINE#316 (dev)
    "跑到第3个epoch的时候NCCL通信超时，程序直接退出了",
    "Training hangs at epoch 12 and then NCCL times out after 30 minutes.",
    "with 4 nodes the allreduce in the process group times out at the first eval",
])
def test_a_timeout_said_in_words_is_a_distributed_timeout(text: str) -> None:
    assert first(text) == "nccl_timeout"


@pytest.mark.parametrize("text", [
    "我把NCCL超时时间设置为3600秒，训练正常",  # a setting: the timeout's length
    "export NCCL_TIMEOUT=1800",
    "The download of the dataset times out, so I use a local copy.",  # no distributed word
    "init_process_group(backend='nccl', timeout=timedelta(seconds=1800))",
    "请求超时，换了镜像源就好了",  # a request that timed out: nothing distributed
    "Setting ddp_timeout to 18000 to avoid NCCL timeout while tokenizing",  # a precaution
    "You may need to increase the NCCL timeout for large datasets.",
    "为了防止NCCL超时，我把ddp_timeout调大了",
])
def test_a_timeout_setting_or_another_timeout_is_not_one(text: str) -> None:
    assert first(text) == "healthy"
