"""The local Slack loop of `policybot demo`: no Slack account, every piece real.

A local Slack (devtools/fake_slack.py) delivers each question as a signed `app_mention` event
over HTTP to the real Bolt app (uvicorn, in this process); the listener records it and
enqueues it on Redis; a real Celery worker process answers it and posts the answer back to
the local Slack's Web API, which records the thread. Then the threads are printed as Slack
shows them, with the matching action-log rows.
"""

from __future__ import annotations

import html
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import SecretStr
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from sqlalchemy import select

from application.review import query_logs
from bot.app import build_app
from bot.http import EVENTS_PATH, BackgroundServer, create_asgi_app
from core import db
from core.config import Settings, secret_value
from core.models import Question
from core.wording import shorten
from devtools.fake_slack import Call, FakeSlack
from devtools.worker_process import WorkerProcess
from workers.enqueuer import CeleryEnqueuer

DEMO_CHANNEL = "CDEMOPOLICY"
DEMO_USER = "UDEMOUSER"


def slack_settings(settings: Settings, fake: FakeSlack, **updates: Any) -> Settings:
    """The same settings, with the Slack credentials and API URL of a local Slack."""
    return settings.model_copy(
        update={
            "slack_bot_token": SecretStr(fake.bot_token),
            "slack_signing_secret": SecretStr(fake.signing_secret),
            "slack_api_url": fake.api_url,
            **updates,
        }
    )


def worker_env(
    settings: Settings, fake: FakeSlack, base: Mapping[str, str] | None = None, **extra: str
) -> dict[str, str]:
    """Environment for a worker process that shares this process's stack and talks to the local Slack."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "POLICYBOT_HOME": str(settings.home),
            "POLICYBOT_REDIS_PORT": str(settings.redis_port),
            "SLACK_BOT_TOKEN": fake.bot_token,
            "SLACK_SIGNING_SECRET": fake.signing_secret,
            "SLACK_API_URL": fake.api_url,
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for variable, secret in (("DATABASE_URL", settings.database_url), ("REDIS_URL", settings.redis_url)):
        if secret:
            env[variable] = secret_value(secret) or ""
    if settings.admin_user_ids:
        env["POLICYBOT_ADMINS"] = settings.admin_user_ids
    env.update(extra)
    return env


def mention_event(
    fake: FakeSlack, text: str, *, channel: str = DEMO_CHANNEL, user: str = DEMO_USER, thread_ts: str | None = None
) -> dict[str, Any]:
    ts = fake.new_ts()
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{fake.bot_user_id}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": fake.team_id,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


# ------------------------------------------------------------------ rendering


def mrkdwn_to_plain(text: str) -> str:
    """How Slack shows mrkdwn, for a terminal: links become `label (url)`, entities are undone."""
    text = re.sub(r"<(https?://[^|>]+)\|([^>]+)>", r"\2 (\1)", text)
    text = re.sub(r"<(https?://[^>]+)>", r"\1", text)
    text = re.sub(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])", r"\1", text)  # *bold*
    text = re.sub(r"(?<![\w_])_([^_\n]+)_(?![\w_])", r"\1", text)  # _italic_
    text = re.sub(r"`([^`\n]+)`", r"\1", text)  # `code`
    return html.unescape(text)


def render_post(call: Call) -> list[tuple[str, str]]:
    """(kind, text) lines of one posted message: section text, context lines, buttons."""
    lines: list[tuple[str, str]] = []
    for block in call.get("blocks") or []:
        kind = block.get("type")
        if kind == "section":
            lines.append(("text", mrkdwn_to_plain(block["text"]["text"])))
        elif kind == "context":
            lines.append(("context", "  ".join(mrkdwn_to_plain(e.get("text", "")) for e in block.get("elements", []))))
        elif kind == "actions":
            lines.append(("buttons", "  ".join(f"[ {e['text']['text']} ]" for e in block.get("elements", []))))
    if not lines and call.get("text"):
        lines.append(("text", mrkdwn_to_plain(str(call["text"]))))
    return lines


def print_thread(console, question: str, user: str, posts: Sequence[Call]) -> None:
    body = Text()
    body.append(f"{user}: ", style="bold cyan")
    body.append(question + "\n")
    for post in posts:
        body.append("\npolicybot", style="bold magenta")
        body.append(" APP\n", style="dim")
        for kind, line in render_post(post):
            if kind == "text":
                body.append(line + "\n")
            elif kind == "buttons":
                body.append(line + "\n", style="bold")
            else:
                body.append(
                    line + "\n", style="dim" if line.startswith("ref ") else "green" if line[:1] in "✅🔎↪🤷" else ""
                )
    console.print(Panel(body, title=f"#{DEMO_CHANNEL} · thread", expand=False))


def delivered_line(ts: str, question: str, status_code: int, seconds: float) -> Table:
    """`→ delivered app_mention TS: QUESTION  (HTTP 200 in 22 ms)`: the question may wrap, the
    delivery's parenthesis never splits."""
    line = Table.grid(padding=(0, 2))
    line.add_column(overflow="fold")
    line.add_column(no_wrap=True)
    line.add_row(
        Text(f"→ delivered app_mention {ts}: {question}"),
        Text(f"(HTTP {status_code} in {seconds * 1000:.0f} ms)", style="dim"),
    )
    return line


def print_log_rows(console, settings: Settings, question_ids: Sequence[int]) -> None:
    wanted = set(question_ids)
    records = [r for r in query_logs(settings, limit=max(50, len(wanted) * 2)) if r["id"] in wanted]
    table = Table(
        "id",
        "ref",
        "question",
        "action",
        "found",
        "top score",
        "sources",
        "latency",
        "status",
        title="action log (policybot logs)",
    )
    table.columns[2].overflow = "fold"
    for record in sorted(records, key=lambda r: r["id"]):
        top = record["top_score"]
        table.add_row(
            str(record["id"]),
            record["reference"],
            shorten(record["question"], 70),
            record["action"] or "-",
            "-" if record["found"] is None else str(record["found"]).lower(),
            f"{top:.2f}" if top is not None else "-",
            ", ".join(record["sources_used"]) or "-",
            f"{record['latency_ms']:.0f} ms" if record["latency_ms"] is not None else "-",
            record["status"],
        )
    console.print(table)


# ------------------------------------------------------------------ the loop


def run_local_slack_loop(settings: Settings, console, questions: list[str]) -> None:
    """Start a local Slack, the Bolt HTTP app and a Celery worker; ask `questions`; show threads and log rows."""
    fake = FakeSlack().start()
    fake.add_user(DEMO_USER, "Demo Employee")  # users.info: the asker's names are redacted from fallback queries
    server = worker = None
    try:
        local = slack_settings(settings, fake)
        server = BackgroundServer(create_asgi_app(build_app(local, CeleryEnqueuer()))).start()
        log_path = settings.home / "logs" / "demo-worker.log"
        console.print(f"local Slack Web API at {fake.api_url}; Bolt app at {server.url}{EVENTS_PATH}")
        console.print(f"starting a Celery worker process (log: {log_path}) ...")
        started = time.monotonic()
        worker = WorkerProcess(worker_env(settings, fake), log_path).start().wait_ready(timeout=300)
        console.print(f"worker ready in {time.monotonic() - started:.1f}s")

        asked: list[tuple[str, dict[str, Any]]] = []
        for question in questions:
            event = mention_event(fake, question)
            response = fake.deliver(server.url + EVENTS_PATH, fake.event_body(event))
            if response.status_code != 200:
                raise RuntimeError(f"the Bolt app answered HTTP {response.status_code} to a signed event")
            console.print(delivered_line(event["ts"], question, response.status_code, response.elapsed.total_seconds()))
            asked.append((question, event))

        for question, event in asked:
            posts = fake.wait_for_posts(DEMO_CHANNEL, event["ts"], timeout=180)
            print_thread(console, question, "employee", posts)

        with db.session(settings) as session:
            ids = (
                session.execute(
                    select(Question.id).where(
                        Question.channel == DEMO_CHANNEL, Question.message_ts.in_([e["ts"] for _, e in asked])
                    )
                )
                .scalars()
                .all()
            )
        print_log_rows(console, settings, ids)
        reactions = len(fake.calls_to("reactions.add")), len(fake.calls_to("reactions.remove"))
        console.print(f"Slack API calls recorded: {len(fake.calls)} ({reactions[0]} 👀 added, {reactions[1]} removed)")
    finally:
        if worker is not None:
            worker.stop()
        if server is not None:
            server.stop()
        fake.stop()
