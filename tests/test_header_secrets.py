"""Issue 25 item 7: the `user:pass@` of a URL-valued variable never reaches a watched run's log header."""

from __future__ import annotations

import pytest

from loratui.logic.command_keys import env_summary


@pytest.mark.parametrize("key, value, shown", [
    ("HF_ENDPOINT", "https://alice:hf_s3cret@mirror.example/hub", "https://<redacted>@mirror.example/hub"),
    ("WANDB_BASE_URL", "http://wandbtoken@wandb.local:8080", "http://<redacted>@wandb.local:8080"),
    ("HF_HUB_ETAG_TIMEOUT", "see socks5h://u:p@proxy:1080 then", "see socks5h://<redacted>@proxy:1080 then"),
])
def test_userinfo_in_a_url_valued_variable_is_redacted(key: str, value: str, shown: str) -> None:
    summary = env_summary({key: value})
    assert summary == {key: shown}
    assert "s3cret" not in str(summary) and "wandbtoken" not in str(summary) and "u:p@" not in str(summary)


def test_values_without_userinfo_are_kept_as_they_are() -> None:
    env = {"HF_HOME": "/data/hf@cache", "HF_ENDPOINT": "https://mirror.example/hub?x=a@b", "PYTHONPATH": "a:b"}
    assert env_summary(env) == env
