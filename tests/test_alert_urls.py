"""Issue 25 items 8-10: an alert URL is checked before it is used. A CR/LF or other control character, a
malformed URL and a link-local or cloud metadata address are refused in one message that never repeats the
URL; a bad target that got stored anyway never kills the supervisor's alert thread, nor lands in a log."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from loratui import cli
from loratui.errors import UsageError
from loratui.rundir import RunDir
from loratui.supervisor import alerts
from loratui.supervisor.alerts import Alert, Notifier
from tests.conftest import TINY, wait_for
from tests.test_alerts import Endpoint, endpoint  # noqa: F401 (the fixture)

SECRET = "s3cret-topic"
ALERT = Alert("over_line", "loratui r1: over the line", "VRAM over the line", "r1")

CONTROLS = [f"https://ntfy.sh/{SECRET}\r\nX-Injected: 1", f"https://ntfy.sh/{SECRET}\n", f"https://ntfy.sh/{SECRET}\x00",
            f"https://ntfy.sh/{SECRET} extra", f"https://ntfy.sh/{SECRET}\t", f"https://ntfy.sh/{SECRET}\x1b[2J"]
MALFORMED = [f"http://[::1/{SECRET}", f"http://[::1", f"https://ntfy.sh:port{SECRET}/x", "https:///nohost"]
METADATA = ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/x", "http://[fe80::1%25eth0]:80/x",
            "http://metadata.google.internal/computeMetadata/v1/", "http://METADATA.google.internal./x",
            "http://100.100.100.200/latest/meta-data", "http://[fd00:ec2::254]/latest", "http://169.254.0.1:8080/",
            "http://[::ffff:169.254.169.254]/", "http://2852039166/", "http://0xa9fea9fe/"]


@pytest.mark.parametrize("url", CONTROLS + MALFORMED + METADATA)
def test_a_bad_notify_url_is_refused_in_one_message_without_the_secret(url: str) -> None:
    with pytest.raises(UsageError) as refused:
        alerts.check_url(url)
    assert str(refused.value).startswith("--notify: ") and SECRET not in str(refused.value)


@pytest.mark.parametrize("url", ["https://ntfy.sh/topic", "http://127.0.0.1:8080/hook", "http://[::1]:80/x",
                                 "https://hooks.slack.com/services/T/B/X", "http://169.255.1.1/ok"])
def test_ordinary_urls_pass(url: str) -> None:
    assert alerts.check_url(url) == url


@pytest.mark.parametrize("url", ["tgram://2852039166:AAHxyz-token/12345", "windows://", "json://hooks.example/x",
                                 "mailto://user:pass@gmail.com"])
def test_apprise_urls_keep_their_own_shapes(url: str) -> None:
    """A Telegram bot's number is no IPv4 address, and its token no port; some services name no host."""
    assert alerts.url_problem(url) == ""


@pytest.mark.parametrize("url", ["json://169.254.169.254/x", "jsons://metadata.google.internal/x",
                                 "form://[fe80::1]/x"])
def test_apprise_urls_to_metadata_addresses_are_refused(url: str) -> None:
    assert "link-local or cloud metadata" in alerts.url_problem(url)


@pytest.mark.parametrize("url", [CONTROLS[0], MALFORMED[0], METADATA[0]])
def test_notify_test_says_what_is_wrong_not_internal_error(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["notify-test", url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loratui: notify-test: ") and "internal error" not in err and SECRET not in err


def test_run_with_a_malformed_notify_url_is_refused_before_the_run_exists(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    assert cli.main(["run", str(TINY), "--headless", "--runs-dir", str(runs), "--notify", "http://[::1"]) == 2
    assert "the URL is malformed" in capsys.readouterr().err
    assert not runs.exists() or not any(runs.iterdir())


def test_a_bad_url_in_the_environment_is_refused_naming_the_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(alerts.NOTIFY_ENV, f"https://ntfy.sh/{SECRET}\r\nX: 1")
    runs = tmp_path / "runs"
    assert cli.main(["run", "--headless", "--runs-dir", str(runs), "--", "true"]) == 2
    err = capsys.readouterr().err
    assert f"${alerts.NOTIFY_ENV}" in err and SECRET not in err
    assert not runs.exists() or not any(runs.iterdir())


def test_a_stored_bad_target_is_not_used_and_its_problem_is_named(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    alerts.save_target(run, "http://[::1")  # stored unchecked, as an older loratui did
    assert alerts.saved_target(run) == ""
    url, problem = alerts.target_for_run(run, alerts_section())
    assert url == "" and "malformed" in problem


def alerts_section():  # type: ignore[no-untyped-def]
    from loratui.recipe import AlertsSection

    return AlertsSection()


@pytest.mark.parametrize("url", [CONTROLS[0], MALFORMED[0], METADATA[0], "http://2852039166/" + SECRET])
def test_the_alert_thread_survives_a_bad_url_and_never_logs_it(url: str, capfd: pytest.CaptureFixture[str]) -> None:
    errors: list[str] = []
    notifier = Notifier(url, "auto", min_interval_s=0, retries=2, backoff_s=5, on_error=errors.append)
    for n in range(3):
        assert notifier.send(Alert(f"kind{n}", "t", "m", "r1"))
    notifier.close(timeout_s=10)
    assert notifier.failed == 3 and notifier.sent == 0  # each alert was tried: the thread lived on
    assert len(errors) == 3 and all(SECRET not in e and "Traceback" not in e for e in errors)
    out, err = capfd.readouterr()
    assert SECRET not in out + err and "Traceback" not in err


def test_a_name_that_resolves_to_a_metadata_address_is_never_connected(monkeypatch: pytest.MonkeyPatch) -> None:
    """The address checked is the one connected to: a hostname, not only a literal, is refused."""
    import socket

    real = socket.getaddrinfo
    connected: list[object] = []

    def resolve(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == "hooks.example.test":  # as a DNS answer (or a rebinding one) would say
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: connected.append(address))
    with pytest.raises(OSError) as refused:
        alerts.post(f"http://hooks.example.test/{SECRET}", "json", ALERT, timeout=2)
    assert "link-local or cloud metadata" in alerts.failure_reason(refused.value) and connected == []


def test_an_alert_after_a_failing_one_is_still_sent(endpoint: Endpoint) -> None:  # noqa: F811
    """An endpoint that errors in an unexpected way (here, a reply that is not HTTP) costs one alert only."""
    import socket

    junk = socket.socket()
    junk.bind(("127.0.0.1", 0))
    junk.listen(4)

    def answer_junk() -> None:
        conn, _ = junk.accept()
        conn.recv(65536)
        conn.sendall(b"\x00\x01 not http\r\n\r\n")
        conn.close()

    threading.Thread(target=answer_junk, daemon=True).start()
    errors: list[str] = []
    bad = Notifier(f"http://127.0.0.1:{junk.getsockname()[1]}/{SECRET}", "json", min_interval_s=0, retries=0,
                   on_error=errors.append)
    bad.send(ALERT)
    wait_for(lambda: errors, timeout=30)
    bad.url = endpoint.url  # the same thread, the next alert: it must still be there to send it
    bad.send(Alert("finished", "done", "done", "r1"))
    bad.close(timeout_s=10)
    junk.close()
    assert bad.failed == 1 and bad.sent == 1 and len(endpoint.wait(1)) == 1
    assert all(SECRET not in e for e in errors)


@pytest.mark.parametrize("url", ["https://ntfy.sh/", "https://ntfy.sh", "http://ntfy.example.org:8080//"])
def test_an_ntfy_url_without_its_topic_is_refused(url: str) -> None:
    """Trial 14: `loratui notify-test https://ntfy.sh/` (the topic left off) was posted, and the error was the
    server's; the README's line is `https://ntfy.sh/my-secret-topic`."""
    with pytest.raises(UsageError, match=r"^--notify: an ntfy URL ends with its topic: https?://[^/]+/TOPIC"):
        alerts.check_url(url)


def test_a_mistyped_scheme_without_apprise_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 14, the README's CPU install (no Apprise): `loratui notify-test htps://ntfy.sh/topic` was told only
    "an Apprise URL needs Apprise: pip install ..."; the scheme it read is named, so the typo shows."""
    import sys

    monkeypatch.setitem(sys.modules, "apprise", None)  # not installed
    with pytest.raises(UsageError, match=r"^htps:// is not http\(s\): an Apprise URL needs Apprise: pip install") as no:
        alerts.check_url(f"htps://ntfy.sh/{SECRET}")
    assert SECRET not in str(no.value)


@pytest.mark.parametrize(("url_env", "said"), [
    (f"https://ntfy.sh/{SECRET}", "url_env takes the name of the environment variable that holds the URL, not the URL"),
    ("lower case", "url_env = 'lower case': not an environment variable's name")])
def test_a_url_env_that_names_no_variable_is_refused_at_its_key(tmp_path: Path, url_env: str, said: str) -> None:
    """Trial 14: `url_env = "lower case"` (and a URL put there instead of its variable's name) ran with alerts off,
    said only in a notice once the run had started."""
    from loratui.recipe import RecipeError, load_recipe

    path = tmp_path / "r.toml"
    path.write_text(f'[model]\npath = "m"\n[data]\npath = "d.jsonl"\n[alerts]\nurl_env = "{url_env}"\n')
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    assert "r.toml:6" in str(caught.value) and said in str(caught.value) and SECRET not in str(caught.value)
    path.write_text('[model]\npath = "m"\n[data]\npath = "d.jsonl"\n[alerts]\nurl_env = "MY_HOOK_2"\n')
    assert load_recipe(path).alerts.url_env == "MY_HOOK_2"
