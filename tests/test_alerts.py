"""Alerts against a local HTTP server: each channel's payload, rate limit, retries, and a dead endpoint that
never holds anything up."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from loratui import events
from loratui.recipe import Recipe
from loratui.supervisor import alerts
from loratui.supervisor.alerts import Alert, Notifier
from loratui.supervisor.watch import RunWatch


class Endpoint:
    """A webhook on 127.0.0.1 that records each request; the first `fail` requests get HTTP 500."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail = 0
        self.answer = b""  # the body of each 200 (an ntfy server answers with the message it published)
        self.got = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if outer.fail > 0:
                    outer.fail -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(200)
                self.end_headers()
                self.wfile.write(outer.answer)
                outer.got.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def wait(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < n and time.monotonic() < deadline:
            self.got.wait(0.05)
            self.got.clear()
        return self.requests


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    yield server
    server.server.shutdown()


ALERT = Alert("failed", "loratui r1: failed", "CUDA out of memory: enable gradient_checkpointing", "r1", urgent=True)


@pytest.mark.parametrize("fmt", ["ntfy", "json", "slack", "discord"])
def test_each_channel_gets_its_own_payload(endpoint: Endpoint, fmt: str) -> None:
    notifier = Notifier(f"{endpoint.url}/topic", fmt)
    assert notifier.send(ALERT)
    notifier.close(5)
    (request,) = endpoint.wait(1)
    body, headers = request["body"], request["headers"]
    if fmt == "ntfy":
        assert body.decode() == ALERT.message and headers["Title"] == ALERT.title
        assert headers["Priority"] == "high" and "failed" in headers["Tags"]
    elif fmt == "json":
        assert json.loads(body) == {"event": "failed", "title": ALERT.title, "message": ALERT.message, "run": "r1",
                                    "urgent": True, "source": "loratui"}
    elif fmt == "slack":
        assert json.loads(body) == {"text": f"{ALERT.title}\n{ALERT.message}"}
    else:
        assert json.loads(body) == {"content": f"{ALERT.title}\n{ALERT.message}"}


def test_the_format_is_guessed_from_the_url() -> None:
    assert alerts.detect_format("https://hooks.slack.com/services/T/B/x") == "slack"
    assert alerts.detect_format("https://discord.com/api/webhooks/1/abc") == "discord"
    assert alerts.detect_format("https://ntfy.sh/my-topic") == "ntfy"
    assert alerts.detect_format("https://example.com/hook") == "json"


def test_rate_limited_per_event_but_the_end_always_goes(endpoint: Endpoint) -> None:
    now = [100.0]
    notifier = Notifier(endpoint.url, "json", min_interval_s=60, clock=lambda: now[0])
    over = Alert("over_line", "over", "the line", "r1")
    assert notifier.send(over)
    assert not notifier.send(over)  # within the minute
    now[0] += 61
    assert notifier.send(over)
    assert notifier.send(Alert("finished", "done", "", "r1")) and notifier.send(Alert("finished", "done", "", "r1"))
    notifier.close(5)
    assert [json.loads(r["body"])["event"] for r in endpoint.wait(4)] == ["over_line", "over_line", "finished",
                                                                         "finished"]


def test_a_failing_endpoint_is_retried_with_back_off(endpoint: Endpoint) -> None:
    endpoint.fail = 2
    errors: list[str] = []
    notifier = Notifier(endpoint.url + "/secret-topic", "json", backoff_s=0.01, on_error=errors.append)
    notifier.send(ALERT)
    notifier.close(5)
    assert len(endpoint.wait(1)) == 1 and notifier.sent == 1 and not errors


def test_an_endpoint_that_never_answers_holds_nothing_up() -> None:
    """The supervisor's watch keeps folding events at full speed while the endpoint swallows every request."""
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead.listen(16)  # accepts connections in the kernel, never answers
    url = f"http://127.0.0.1:{dead.getsockname()[1]}/secret-topic"
    errors: list[str] = []
    notifier = Notifier(url, "json", min_interval_s=0, timeout_s=120, retries=0, on_error=errors.append)
    written: list[Any] = []
    watch = RunWatch("r1", Recipe(), written.append, notifier)
    started = time.perf_counter()
    for i in range(1, 201):  # 200 steps, each with an alert-worthy moment
        watch.feed([events.Step(t=float(i), step=i, epoch=0.0, step_time=0.1)])
        watch.alert("over_line", "over the line", f"step {i}")
    elapsed = time.perf_counter() - started
    # one stuck request would take 120 s; 200 folds take well under a second, however loaded the box
    assert elapsed < 60, elapsed
    notifier.close(timeout_s=0.1)
    dead.close()
    assert all("secret-topic" not in e for e in errors)
    assert all("secret-topic" not in getattr(e, "message", "") for e in written)


def test_the_url_comes_from_the_environment_and_stays_out_of_the_trainers() -> None:
    from loratui.recipe import AlertsSection

    section = AlertsSection(url_env="MY_HOOK")
    assert alerts.url_from_env(section, {"MY_HOOK": "https://ntfy.sh/t"}) == "https://ntfy.sh/t"
    assert alerts.url_from_env(section, {alerts.NOTIFY_ENV: "https://a/b", "MY_HOOK": "x"}) == "https://a/b"
    assert set(alerts.secret_names(section)) == {alerts.NOTIFY_ENV, "MY_HOOK"}


def test_a_url_in_the_recipe_is_refused(tmp_path: Any) -> None:
    from loratui.recipe import RecipeError, load_recipe

    path = tmp_path / "r.toml"
    path.write_text('[model]\npath = "m"\n[data]\npath = "d.jsonl"\n[alerts]\nurl = "https://ntfy.sh/secret"\n')
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    assert "r.toml:6" in str(caught.value) and "url_env" in str(caught.value) and "--notify" in str(caught.value)
    assert "ntfy.sh/secret" not in str(caught.value)


def test_notify_test_sends_one_message(endpoint: Endpoint, capsys: pytest.CaptureFixture[str]) -> None:
    from loratui import cli

    assert cli.main(["notify-test", endpoint.url + "/secret-topic", "--format", "ntfy"]) == 0
    (request,) = endpoint.wait(1)
    assert request["headers"]["Title"] == "loratui: test alert" and request["path"] == "/secret-topic"
    out = capsys.readouterr().out
    assert "test alert sent to 127.0.0.1" in out and "secret-topic" not in out


# -- the alert target is a fact of the run (issue 19) ------------------------------------------------------

TARGET = "https://ntfy.sh/tk_5ecret-topic-93f1"


def _tiny_run(tmp_path: Any) -> Any:
    from loratui import rundir
    from tests.conftest import REPO, TINY

    text = TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
    settings = rundir.RunSettings(run_id="20270115-093000-tiny", name="tiny", recipe_source=str(TINY),
                                  recipe_dir=str(TINY.parent))
    return rundir.create(tmp_path / "runs", settings, text)


def test_the_target_is_kept_for_the_run_readable_by_its_owner_only(tmp_path: Any) -> None:
    import stat

    run = _tiny_run(tmp_path)
    assert alerts.saved_target(run) == ""
    alerts.save_target(run, TARGET)
    assert alerts.saved_target(run) == TARGET and stat.S_IMODE(run.alerts.stat().st_mode) == 0o600
    assert stat.S_IMODE(run.alerts.parent.stat().st_mode) == 0o700
    # Outside the run directory (users attach those to bug reports), and one per run.
    assert not [p for p in run.path.rglob("*") if p.is_file() and TARGET.encode() in p.read_bytes()]
    assert _tiny_run(tmp_path / "other").alerts != run.alerts
    assert alerts.url_for_run(run, Recipe().alerts, {alerts.NOTIFY_ENV: "https://other/x"}) == TARGET
    alerts.save_target(run, "https://ntfy.sh/new")  # replaced whole, never written through a link
    assert alerts.saved_target(run) == "https://ntfy.sh/new" and not list(run.alerts.parent.glob(".*"))
    run.alerts.unlink()
    decoy = tmp_path / "decoy"
    run.alerts.symlink_to(decoy)
    alerts.save_target(run, TARGET)
    assert not decoy.exists() and not run.alerts.is_symlink()
    with pytest.raises(Exception) as caught:
        alerts.check_url("ntfy.sh/tk_5ecret-topic-93f1")
    assert "tk_5ecret" not in str(caught.value) and "http(s) URL" in str(caught.value)


def _supervisor(run: Any, monkeypatch: pytest.MonkeyPatch, adopt: bool = False) -> Any:
    from loratui.supervisor.owner import Supervisor

    monkeypatch.delenv(alerts.NOTIFY_ENV, raising=False)
    return Supervisor(run, adopt=adopt)  # built, not started: no trainer, no socket


def test_a_new_supervisor_of_the_run_alerts_where_the_first_did(tmp_path: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """What `loratui resume` starts for a suspended run whose supervisor died: no --notify, no variable."""
    run = _tiny_run(tmp_path)
    alerts.save_target(run, TARGET)
    sup = _supervisor(run, monkeypatch, adopt=True)
    try:
        assert sup.unattended.notifier is not None and sup.unattended.notifier.url == TARGET
        assert sup.unattended.watch.notifier is sup.unattended.notifier
    finally:
        sup.unattended.close()
        sup.log.close()


def test_resume_with_a_new_target_switches_the_live_supervisor(tmp_path: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from loratui.eventlog import read_log
    from loratui.supervisor import control

    run = _tiny_run(tmp_path)
    alerts.save_target(run, TARGET)
    sup = _supervisor(run, monkeypatch)
    try:
        sup._write_header()
        sup.unattended.announce()
        alerts.save_target(run, "https://hooks.slack.com/services/T0/B0/s3cretTOKEN")
        assert sup._handle(control.Request("resume")) is None
        notifier = sup.unattended.notifier
        assert notifier is not None and notifier.fmt == "slack" and sup.unattended.watch.notifier is notifier
    finally:
        sup.unattended.close()
        sup.log.close()
    said = [e.message for e in read_log(run.events).events if isinstance(e, events.Notice) and e.key == "alerts"]
    assert said == ["alerts go to ntfy at ntfy.sh", "alerts go to slack at hooks.slack.com"]
    assert b"tk_5ecret" not in run.events.read_bytes() and b"s3cret" not in run.events.read_bytes()


def test_resume_notify_stores_the_new_target_and_a_refusal_keeps_the_old(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from loratui import cli
    from loratui.eventlog import EventWriter
    from loratui.supervisor import launch

    run = _tiny_run(tmp_path)
    alerts.save_target(run, TARGET)
    writer = EventWriter(run.events)
    writer.write(events.Header(t=1.0, schema=1, run_id=run.run_id, recipe_hash="x"))
    writer.write(events.State(t=2.0, state=events.SUSPENDED))  # suspended, its supervisor gone
    writer.close()
    adopted: list[str] = []
    monkeypatch.setattr(launch, "spawn_supervisor", lambda r, adopt=False: adopted.append(alerts.saved_target(r)))
    new = "https://ntfy.sh/tk_newer-topic"
    args = ["resume", run.run_id, "--runs-dir", str(run.path.parent)]
    assert cli.main(args + ["--notify", "not-a-url"]) == 2 and alerts.saved_target(run) == TARGET
    assert cli.main(args + ["--notify", new]) == 0
    assert adopted == [new] and alerts.saved_target(run) == new  # stored before the supervisor starts
    out = capsys.readouterr()
    assert "alerts now go to ntfy at ntfy.sh" in out.out and "tk_" not in out.out + out.err
    writer = EventWriter(run.events)
    writer.write(events.End(t=3.0, state=events.FINISHED))
    writer.close()
    assert cli.main(args + ["--notify", "https://ntfy.sh/tk_third"]) == 2  # nothing to resume
    assert alerts.saved_target(run) == new


def test_a_watched_command_keeps_its_notify_target(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`loratui run --notify URL -- COMMAND` was silently without alerts; now its run stores the target."""
    from loratui.supervisor import launch

    monkeypatch.setattr(launch, "spawn_supervisor", lambda r, **_: 0)
    monkeypatch.delenv(alerts.NOTIFY_ENV, raising=False)
    run = launch.start_command(["python", "-c", "pass"], tmp_path / "runs", alert_url=TARGET)
    assert alerts.saved_target(run) == TARGET


def test_notify_test_names_the_unset_variable_a_recipe_points_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "r.toml"
    recipe.write_text((Path(__file__).resolve().parents[1] / "recipes" / "tiny.toml").read_text() + '\n[alerts]\nurl_env = "MY_ALERTS_URL"\n')
    monkeypatch.delenv("MY_ALERTS_URL", raising=False)
    monkeypatch.delenv("LORATUI_NOTIFY_URL", raising=False)
    from loratui import cli
    assert cli.main(["notify-test", "--recipe", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "MY_ALERTS_URL" in err and "not set" in err and "Traceback" not in err


def test_an_apprise_url_carries_a_failed_alert_and_its_secret_is_never_named(endpoint: Endpoint) -> None:
    pytest.importorskip("apprise")
    port = endpoint.url.rsplit(":", 1)[1]
    url = f"json://127.0.0.1:{port}/secret-topic"
    assert alerts.check_url(url) == url and alerts.detect_format(url) == "apprise"
    notifier = Notifier(url)
    assert notifier.send(ALERT)
    notifier.close(10)
    (request,) = endpoint.wait(1)
    body = json.loads(request["body"])
    assert request["path"] == "/secret-topic" and body["title"] == ALERT.title and "gradient_checkpointing" in body["message"]
    assert "secret" not in alerts.where("tgram://123456:secret-bot-token/987") and "tgram" in alerts.where(url.replace("json", "tgram"))
    with pytest.raises(alerts.UsageError) as refused:
        alerts.check_url("nosuchservice://secret-topic")
    assert "secret-topic" not in str(refused.value)


def test_a_suspend_alerts_once() -> None:
    """A tmux trial: one `P` sent two "suspended" alerts (and printed the notice twice), as the trainer says
    `suspended` and its supervisor says it again with the reason. A second suspend, after a resume, is new."""
    endpoint = Endpoint()
    notifier = Notifier(endpoint.url + "/hook", "json", min_interval_s=0)
    written: list[Any] = []
    watch = RunWatch("r1", Recipe(), written.append, notifier)
    said_twice = [events.State(t=1.0, state=events.TRAINING, step=1),
                  events.State(t=2.0, state=events.SUSPENDED, step=37),  # the trainer, after its checkpoint
                  events.State(t=3.0, state=events.SUSPENDED, reason="checkpoint written, GPU freed; resume with `r`")]
    watch.feed(said_twice)
    watch.feed([events.State(t=4.0, state=events.TRAINING, step=37), events.State(t=5.0, state=events.SUSPENDED, step=40)])
    notifier.close(timeout_s=10)
    notices = [e for e in written if isinstance(e, events.Notice) and e.message.startswith("suspended")]
    bodies = [json.loads(r["body"])["event"] for r in endpoint.requests]
    assert len(notices) == 2 and bodies == ["suspended", "suspended"], (notices, bodies)


def test_a_recipe_naming_an_unset_variable_is_told_its_alerts_are_off(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[alerts] url_env = "NTFY_URL"` in a recipe, and a shell (a new SSH session, a Slurm job) without NTFY_URL:
    the run started, trained and ended with no alert and not one word that none would come."""
    from loratui import rundir
    from loratui.eventlog import read_log
    from tests.conftest import REPO, TINY

    text = TINY.read_text().replace('path = "data/', f'path = "{REPO}/recipes/data/')
    text += '\n[alerts]\nurl_env = "MY_ALERTS_URL"\n'
    settings = rundir.RunSettings(run_id="20270115-093000-tiny", name="tiny", recipe_source=str(TINY),
                                  recipe_dir=str(TINY.parent))
    run = rundir.create(tmp_path / "runs", settings, text)
    monkeypatch.delenv("MY_ALERTS_URL", raising=False)
    sup = _supervisor(run, monkeypatch)
    try:
        sup._write_header()
        sup.unattended.announce()
        assert sup.unattended.notifier is None
    finally:
        sup.unattended.close()
        sup.log.close()
    said = [e for e in read_log(run.events).events if isinstance(e, events.Notice) and e.key == "alerts"]
    assert len(said) == 1 and said[0].level == "warning", said
    assert "MY_ALERTS_URL" in said[0].message and "not set" in said[0].message, said[0].message
    assert "--notify" in said[0].message, said[0].message


# -- a self-hosted ntfy (newcomer trial 15) -----------------------------------------------------------------

NTFY_ANSWER = b'{"id":"hwQ2YpKdmg","time":1635528741,"expires":1635571941,"event":"message","topic":"alerts"}\n'


def test_a_login_in_the_url_goes_as_basic_auth_as_ntfy_takes_it(endpoint: Endpoint) -> None:
    """ntfy's protected topics take `curl -u phil:mypass` (and `-u :tk_TOKEN`); the same login in the URL was
    given to the resolver as the host: "Name or service not known"."""
    host = endpoint.url.removeprefix("http://")
    alerts.post(f"http://phil:my%20pass@{host}/alerts", "ntfy", ALERT)
    alerts.post(f"http://:tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2@{host}/alerts", "ntfy", ALERT)
    first, second = endpoint.wait(2)
    assert first["path"] == "/alerts" and first["headers"]["Host"] == host
    assert first["headers"]["Authorization"] == "Basic " + base64.b64encode(b"phil:my pass").decode()
    assert second["headers"]["Authorization"] == "Basic " + base64.b64encode(b":tk_AgQdq7mVBoFD37zQVN29RhuMzNIz2").decode()
    assert first["body"] == ALERT.message.encode() and first["headers"]["Title"] == ALERT.title


def test_a_refused_login_says_how_to_give_one() -> None:
    import urllib.error

    said = alerts.failure_reason(urllib.error.HTTPError("u", 403, "Forbidden", None, None))  # type: ignore[arg-type]
    assert said.startswith("HTTP 403 (the endpoint wants a login") and "USER:PASSWORD@" in said


def test_a_topicless_url_with_a_login_is_refused_without_the_password() -> None:
    with pytest.raises(alerts.UsageError) as caught:
        alerts.check_url("https://phil:s3cret@ntfy.example.com/")
    assert "s3cret" not in str(caught.value) and "https://ntfy.example.com/TOPIC" in str(caught.value)


def test_a_title_that_is_not_ascii_reaches_ntfy_whole() -> None:
    """ntfy's docs: a UTF-8 title goes RFC 2047-encoded; loratui sent `?` for each letter it could not send."""
    from email.header import decode_header, make_header

    _, headers = alerts.payload("ntfy", Alert("failed", "loratui qwen-é: failed", "m", "r1"))
    assert str(make_header(decode_header(headers["Title"]))) == "loratui qwen-é: failed"
    assert headers["Title"].isascii() and alerts.payload("ntfy", ALERT)[1]["Title"] == ALERT.title


def test_a_self_hosted_ntfy_on_a_host_that_does_not_say_so_gets_ntfys_format(endpoint: Endpoint) -> None:
    """`http://push.lab:8080/alerts` is guessed a JSON webhook; ntfy showed the JSON as the message text. Its
    answer says it is ntfy: that alert goes again, and the alerts after it go, in ntfy's format; the log says why."""
    endpoint.answer = NTFY_ANSWER
    said: list[str] = []
    notifier = Notifier(endpoint.url + "/alerts", min_interval_s=0.0, on_error=said.append)
    notifier.send(ALERT)
    endpoint.wait(2)
    notifier.send(Alert("nan", "loratui r1: NaN", "loss is nan at step 4", "r1"))
    notifier.close()
    first, again, second = endpoint.wait(3)
    assert first["headers"]["Content-Type"] == "application/json"
    assert again["headers"]["Title"] == ALERT.title and again["body"] == ALERT.message.encode()  # sent again, readable
    assert second["headers"]["Content-Type"].startswith("text/plain") and second["headers"]["Title"] == "loratui r1: NaN"
    assert second["body"] == b"loss is nan at step 4" and notifier.fmt == "ntfy" and len(endpoint.requests) == 3
    assert len(said) == 1 and "answered as an ntfy server" in said[0] and "/alerts" not in said[0]


def test_a_json_webhook_that_answers_otherwise_stays_json(endpoint: Endpoint) -> None:
    endpoint.answer = b'{"ok": true}'
    notifier = Notifier(endpoint.url + "/hook", min_interval_s=0.0)
    notifier.send(ALERT)
    notifier.send(Alert("nan", "t", "m", "r1"))
    notifier.close()
    assert [r["headers"]["Content-Type"] for r in endpoint.wait(2)] == ["application/json"] * 2


def test_notify_test_sends_again_in_ntfys_format_to_a_self_hosted_ntfy(
        endpoint: Endpoint, capsys: pytest.CaptureFixture[str]) -> None:
    from loratui import cli

    endpoint.answer = NTFY_ANSWER
    assert cli.main(["notify-test", endpoint.url + "/alerts"]) == 0
    first, second = endpoint.wait(2)
    assert first["headers"]["Content-Type"] == "application/json" and second["headers"]["Title"] == "loratui: test alert"
    out = capsys.readouterr().out
    assert "answered as an ntfy server" in out and "test alert sent to 127.0.0.1 (ntfy format)" in out


def test_a_history_longer_than_one_read_is_folded_quietly(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A supervisor adopting a run (`loratui resume`, a requeued job) folds its history quietly: its alerts went out
    when they happened. It read the log's first 64 MiB (one `LogTail.poll`) as history and the rest as news, so a run
    whose log had grown past that recorded and sent its old NaN alert again at every resume."""
    from loratui.eventlog import EventWriter, LogTail, read_log

    run = _tiny_run(tmp_path)
    writer = EventWriter(run.events)
    writer.write(events.Header(t=1.0, schema=1, run_id=run.run_id, recipe_hash="x"))
    writer.write(events.State(t=2.0, state=events.TRAINING, step=0))
    for step in range(1, 41):
        writer.write(events.Step(t=2.0 + step, step=step, epoch=0.0, step_time=1.0))
        writer.write(events.Log(t=2.0 + step, step=step, values={"loss": 2.0 - step / 100, "learning_rate": 1e-4}))
    writer.write(events.Log(t=50.0, step=41, values={"loss": "NaN", "learning_rate": 1e-4}))
    writer.write(events.State(t=51.0, state=events.SUSPENDED, step=41, reason="checkpoint written"))
    writer.close()
    poll = LogTail.poll
    monkeypatch.setattr(LogTail, "poll", lambda self, max_bytes=None: poll(self, 2048))  # a long log: many reads
    sup = _supervisor(run, monkeypatch, adopt=True)
    try:
        for _ in range(20):  # the status thread's rounds, until the log is read
            sup._update_status()
        assert sup.status.step == 41
    finally:
        sup.unattended.close()
        sup.log.close()
    said = [e.message for e in read_log(run.events).events if isinstance(e, events.Notice) and e.key == "alert"]
    assert said == [], said
