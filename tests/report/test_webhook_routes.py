"""`--webhook` routed by owner (`[webhooks]` in `gpuaudit.toml`): real HTTP servers on loopback
get the fleet summary and each owner's findings in Slack's and Teams' shapes, a 503 is tried
again, one deadline bounds every post, and no URL is ever printed or sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit.cli import app
from gpuaudit.core.errors import ConfigError
from gpuaudit.report import webhook_routes
from gpuaudit.report.webhook_routes import Route

runner = CliRunner()
SECRET = "/services/T0SECRET/B0SECRET/xoxSECRET"


@dataclass
class Receiver:
    """A loopback server: records each POST by path; answers each path's queued statuses
    first (then 200); a path in `hold` is answered only when `release` is set."""

    server: ThreadingHTTPServer
    got: dict[str, list[Any]] = field(default_factory=dict)
    statuses: dict[str, list[int]] = field(default_factory=dict)
    hold: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{SECRET}/{path}"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def rx() -> Iterator[Receiver]:
    state: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            r = state[0]
            path = self.path.rsplit("/", 1)[-1]
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            r.got.setdefault(path, []).append(json.loads(body))
            if path in r.hold:
                r.release.wait(10)
            queued = r.statuses.get(path)
            self.send_response(queued.pop(0) if queued else 200)
            self.send_header("Content-Length", "0")  # an empty answer, as Slack's is short
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.append(Receiver(server))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state[0]
    state[0].release.set()
    server.shutdown()
    server.server_close()


def _config(tmp_path: Path, rx: Receiver, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file names the variables; the URLs (credentials) are in the environment."""
    for owner in ("training", "research", "nobody"):
        monkeypatch.setenv(f"HOOK_{owner.upper()}", rx.url(owner))
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text(
        "[webhooks]\n"
        'training = "HOOK_TRAINING"\n'
        'research = { url_env = "HOOK_RESEARCH", format = "teams" }\n'
        'nobody = "HOOK_NOBODY"\n'
    )
    return cfg


def test_each_owner_gets_their_findings_and_the_fleet_the_summary(
    rx: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config(tmp_path, rx, monkeypatch)
    args = ["scan", "--demo", "-q", "-f", "json", "--config", str(cfg)]
    res = runner.invoke(app, [*args, "--webhook", rx.url("fleet")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    # The fleet summary, as before: Slack-compatible {"text": ...}.
    assert list(rx.got["fleet"][0]) == ["text"]
    assert rx.got["fleet"][0]["text"].startswith("**GPU audit:")
    # training's Slack message: header and section, their figures and their first findings.
    mine = [f for f in doc["findings"] if (f["owner"] or {}).get("name") == "training"]
    counted = [f for f in mine if f["counted_in_total"]]
    slack = rx.got["training"][0]
    assert [b["type"] for b in slack["blocks"]] == ["header", "section"]
    assert slack["blocks"][0]["text"] == {
        "type": "plain_text",
        "text": f"GPU audit of {doc['cluster']} for training",
    }
    text = slack["blocks"][1]["text"]["text"]
    assert slack["blocks"][1]["text"]["type"] == "mrkdwn" and len(text) <= 2_900
    hours = sum(f["impact"]["gpu_hours"] for f in counted)
    assert f"{len(mine)} findings; {hours:,.0f} wasted GPU-hours" in text
    assert f"{mine[0]['code']}: {mine[0]['message'][:100]}" in text
    shown = sum(1 for f in mine[:10] if f"{f['code']}: " in text)
    assert shown >= 1 and (len(mine) <= shown or f"and {len(mine) - shown} more" in text)
    # research's Teams Workflows message: an Adaptive Card.
    teams = rx.got["research"][0]
    assert teams["type"] == "message" and len(teams["attachments"]) == 1
    card = teams["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["content"]["type"] == "AdaptiveCard" and card["content"]["version"] == "1.4"
    assert card["content"]["body"][0]["text"].endswith("for research")
    theirs = [f for f in doc["findings"] if (f["owner"] or {}).get("name") == "research"]
    assert card["content"]["body"][2]["text"].startswith(f"{len(theirs)} finding")
    # An owner without findings is told so; no payload holds a URL's secret.
    assert "No findings." in rx.got["nobody"][0]["text"]
    sent = json.dumps(rx.got)
    assert "SECRET" not in sent and "SECRET" not in res.output


def test_routes_are_read_and_posted_only_with_webhook(
    rx: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _config(tmp_path, rx, monkeypatch)
    monkeypatch.delenv("HOOK_NOBODY")
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    assert rx.got == {}
    # With --webhook, a variable the table names that is unset ends the run before the scan.
    res = runner.invoke(
        app, ["scan", "--demo", "-q", "--config", str(cfg), "--webhook", rx.url("f")]
    )
    assert res.exit_code == 2
    assert "[webhooks] nobody: the environment variable HOOK_NOBODY is not set" in res.output
    assert rx.got == {} and "SECRET" not in res.output


def test_a_503_is_tried_again_and_one_deadline_bounds_every_post(rx: Receiver) -> None:
    from gpuaudit import snapshot
    from gpuaudit.audit.assemble import run_checks
    from gpuaudit.audit.settings import settings_from
    from gpuaudit.inventory import build
    from tests.support.paths import DEMO

    result = run_checks(build(snapshot.read(DEMO)), settings_from({}))
    rx.statuses["training"] = [503]
    routes = [Route("training", rx.url("training")), Route("research", rx.url("research"))]
    assert webhook_routes.post_all(result, rx.url("fleet"), routes) == []
    assert len(rx.got["training"]) == 2 and len(rx.got["research"]) == 1
    # A hook that does not answer: it and the posts after it fail within the one deadline.
    rx.got.clear()
    rx.hold.add("fleet")
    failures = webhook_routes.post_all(result, rx.url("fleet"), routes, deadline_s=1.0)
    rx.release.set()
    assert failures[0].startswith("webhook http://127.0.0.1:") and "did not answer" in failures[0]
    assert failures[-1] == (
        "webhooks: the 1 s all posts share passed; not posted: owner training, owner research"
    )
    assert "training" not in rx.got and not any("SECRET" in f for f in failures)


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ({"a": "V"}, "[webhooks] a: the URL must be http:// or https:// with a host, got ftp://x"),
        ({"ml-team": "https://x/SECRET"}, 'e.g. { url_env = "GPUAUDIT_WEBHOOK_ML_TEAM" }'),
        ({"a": {"url_env": "V", "format": "irc"}}, "url_env and format (slack or teams) only"),
        ({"a": {"url": "https://x/SECRET"}}, "[webhooks] a must name an environment variable"),
        ({"a": "NOT_SET"}, "[webhooks] a: the environment variable NOT_SET is not set"),
        ([1], "[webhooks] must be a table"),
    ],
)
def test_a_bad_table_is_one_line_without_the_secret(table: object, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        webhook_routes.parse(table, {"V": "ftp://x/SECRET"})
    assert said in str(err.value) and "SECRET" not in str(err.value)


def test_names_are_data_in_slack() -> None:
    body = webhook_routes.payload("slack", "t", ["a", "<!channel> & <http://x|y>"])
    assert body["blocks"][1]["text"]["text"] == "a\n&lt;!channel&gt; &amp; &lt;http://x|y&gt;"
