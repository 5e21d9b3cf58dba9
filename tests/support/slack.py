"""Shared pieces of the Slack tests: the local Slack, the Bolt HTTP app, a real Celery worker process.

The fixtures are registered for every test module (pytest_plugins in tests/conftest.py); they are
module-scoped, so one worker process serves every test of a module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.environment import TEST_SLACK_BOT_TOKEN, TEST_SLACK_SIGNING_SECRET, cli_env

ADMIN = "UADMIN0001"
FAIL_MARKER = "zzfailonpurpose"
SLOW_MARKER = "zzslowonpurpose"  # the worker sleeps 4 s before answering it (devtools/test_worker_app.py)
TEST_VISIBILITY_TIMEOUT_S = 6  # abandoned messages come back within seconds (the kill test)


@dataclass
class Stack:
    fake: Any  # devtools.fake_slack.FakeSlack
    settings: Any  # Settings with the local Slack's credentials
    server: Any  # bot.http.BackgroundServer
    worker: Any  # devtools.worker_process.WorkerProcess (replaced by the kill test)
    log_dir: Path
    worker_extra_env: dict[str, str] = field(default_factory=dict)  # for every worker this stack starts

    @property
    def events_url(self) -> str:
        return self.server.url + "/slack/events"

    def worker_env(self, **extra: str) -> dict[str, str]:
        from devtools.demo import worker_env

        return worker_env(
            self.settings,
            self.fake,
            base=cli_env(self.settings.home),
            **{
                "POLICYBOT_ADMINS": ADMIN,
                "POLICYBOT_TEST_FAIL_MARKER": FAIL_MARKER,
                "POLICYBOT_TEST_SLOW_MARKER": SLOW_MARKER,
                "POLICYBOT_CELERY_VISIBILITY_TIMEOUT": str(TEST_VISIBILITY_TIMEOUT_S),
            }
            | self.worker_extra_env
            | extra,
        )

    def start_worker(self, name: str, **extra_env: str):  # -> WorkerProcess
        from devtools.worker_process import WorkerProcess

        return WorkerProcess(self.worker_env(**extra_env), self.log_dir / f"{name}.log").start()

    def deliver(self, event: dict[str, Any], event_id: str | None = None, **kwargs: Any):  # -> httpx.Response
        response = self.fake.deliver(self.events_url, self.fake.event_body(event, event_id), **kwargs)
        return response

    # events as Slack sends them

    def mention(
        self, text: str, channel: str, user: str = "UEMPLOYEE1", thread_ts: str | None = None
    ) -> dict[str, Any]:
        ts = self.fake.new_ts()
        event = {
            "type": "app_mention",
            "user": user,
            "text": f"<@{self.fake.bot_user_id}> {text}".rstrip(),
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
            "team": self.fake.team_id,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    def dm(
        self, text: str, channel: str, user: str = "UEMPLOYEE1", thread_ts: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        ts = self.fake.new_ts()
        event = {
            "type": "message",
            "channel_type": "im",
            "user": user,
            "text": text,
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
            "team": self.fake.team_id,
            **extra,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    @staticmethod
    def mention_twin(message: dict[str, Any]) -> dict[str, Any]:
        """The `app_mention` Slack also sends for a DM that mentions the bot."""
        return {
            "type": "app_mention",
            "user": message["user"],
            "text": message["text"],
            "ts": message["ts"],
            "channel": message["channel"],
            "event_ts": message["ts"],
        }


@pytest.fixture(scope="module")
def stack(settings, ingested_samples, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from running_stack(settings, tmp_path_factory)


def running_stack(settings, tmp_path_factory: pytest.TempPathFactory, **worker_extra_env: str) -> Iterator[Stack]:
    """The local Slack, the Bolt app serving HTTP in this process, and a worker process."""
    from bot.app import build_app
    from bot.http import BackgroundServer, create_asgi_app
    from devtools.demo import slack_settings
    from devtools.fake_slack import FakeSlack
    from workers.enqueuer import CeleryEnqueuer

    fake = FakeSlack(bot_token=TEST_SLACK_BOT_TOKEN, signing_secret=TEST_SLACK_SIGNING_SECRET).start()
    local = slack_settings(settings, fake, admin_user_ids=ADMIN)
    server = BackgroundServer(create_asgi_app(build_app(local, CeleryEnqueuer()))).start()
    log_dir = tmp_path_factory.mktemp("slack-workers")
    built = Stack(fake, local, server, None, log_dir, worker_extra_env)
    built.worker = built.start_worker("worker-main")
    try:
        built.worker.wait_ready(timeout=240)
        yield built
    finally:
        built.worker.stop()
        server.stop()
        fake.stop()


def question_for(settings, channel: str, message_ts: str):
    from sqlalchemy import select

    from core import db
    from core.models import Question

    with db.session(settings) as session:
        return (
            session.execute(select(Question).where(Question.channel == channel, Question.message_ts == message_ts))
            .scalars()
            .all()
        )


def wait_until(condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition", step: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(step)


def section_texts(post) -> list[str]:
    return [b["text"]["text"] for b in post["blocks"] if b["type"] == "section"]


def context_texts(post) -> list[str]:
    return [e["text"] for b in post["blocks"] if b["type"] == "context" for e in b["elements"]]


def buttons(post) -> list[dict[str, Any]]:
    return [e for b in post["blocks"] if b["type"] == "actions" for e in b["elements"]]


def choose_upload(
    stack: Stack,
    offer,
    add: bool = True,
    user: str = ADMIN,
    url: str | None = None,
):  # -> httpx.Response
    """Click "Add to knowledge base" (or "Don't add") on the bot's offer to add an admin's files."""
    from slack_shared import blocks

    [button] = [b for b in buttons(offer) if b["action_id"] == (blocks.UPLOAD_ADD if add else blocks.UPLOAD_SKIP)]
    response = stack.fake.click(
        url or stack.events_url,
        action_id=button["action_id"],
        value=button["value"],
        user=user,
        channel=offer["channel"],
        message=offer.response["message"],
        block_id=blocks.UPLOAD_BLOCK,
    )
    assert response.status_code == 200
    return response


def answered_once_about_parental_leave(stack: Stack, channel: str, ts: str):
    """The question's log row, once its one answer (16 weeks of parental leave) is in its thread."""
    post = stack.fake.wait_for_posts(channel, ts, timeout=90)[0]
    assert "16 weeks" in "\n".join(section_texts(post))
    time.sleep(1.5)  # a would-be duplicate shows up
    [row] = question_for(stack.settings, channel, ts)
    assert row.status == "answered" and row.answer_ts == post.response["ts"]
    assert len(stack.fake.posts(channel, ts)) == 1
    return row


@contextmanager
def bot_process(stack: Stack, log_path: Path, **env: str) -> Iterator[str]:
    """A second real `policybot serve --http` on the local Slack, with `env` on top; its URL."""
    from devtools.bot_process import BotProcess

    bot = BotProcess(stack.worker_env(**env), log_path).start(timeout=60)
    try:
        yield bot.url
    finally:
        bot.stop()
