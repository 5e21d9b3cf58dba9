"""Faults around the queue, with real Redis and real Celery worker processes (issue #26):

- a task that keeps getting its worker killed (a hostile upload, the OOM killer) is not
  delivered forever: after three deliveries the asker or admin gets the usual failure reply;
- Redis's visibility timeout is sized for answers, yet a retry waiting out its countdown and a
  long ingestion are not handed to a second worker meanwhile;
- two POLICYBOT_HOMEs on one machine each get a Redis of their own, and `services down`
  stops only its own.

Nothing of ours is mocked: the Slack side is the local Slack fake, the kills are SIGKILLs.
"""

from __future__ import annotations

import re
import signal
import socket
import time
from pathlib import Path

import psutil
import pytest
import redis

from support.environment import cli_env
from support.slack import ADMIN, choose_upload, question_for, wait_until

pytestmark = pytest.mark.timeout(900)

# Long enough that a delivery is never restored while its pool process reloads its models after
# a kill (which would count a delivery that no kill caused).
KILL_TEST_VISIBILITY_S = 60
SHORT_VISIBILITY_S = 3  # far shorter than the waits and the ingestion below
DELIVERIES = 3  # a task is run at most this often (workers.celery_app.MAX_DELIVERIES)


def _worker(env: dict[str, str], log_path: Path):  # -> WorkerProcess
    from devtools.worker_process import WorkerProcess

    return WorkerProcess(env, log_path).start().wait_ready(timeout=300)


def _dying_worker_env(stack) -> dict[str, str]:
    env = stack.worker_env(POLICYBOT_TEST_TASK_DELAY_S="600")  # every answer delivery stays in the task
    env["POLICYBOT_CELERY_VISIBILITY_TIMEOUT"] = str(KILL_TEST_VISIBILITY_S)
    return env


def _replace_worker(stack, name: str):  # -> WorkerProcess
    """A fresh worker for the module's stack (whose fixture stops whichever is current)."""
    stack.worker.stop()
    stack.worker = _worker(_dying_worker_env(stack), stack.log_dir / f"{name}.log")
    return stack.worker


def _kill_pool_process(worker) -> None:
    """SIGKILL the worker's one pool process, as the kernel's OOM killer would; its parent lives."""
    [child] = psutil.Process(worker.process.pid).children()
    child.send_signal(signal.SIGKILL)


def _bulky_markdown(paragraphs: int) -> bytes:
    """A document that takes many seconds to ingest on a small machine."""
    words = (
        "travel",
        "expense",
        "receipt",
        "manager",
        "approval",
        "laptop",
        "parking",
        "leave",
        "holiday",
        "training",
        "budget",
        "allowance",
        "policy",
        "claim",
        "office",
        "security",
        "badge",
        "remote",
    )
    lines = ["# Bulky handbook", ""]
    for n in range(paragraphs):
        picked = " ".join(words[(n * 7 + k * 5) % len(words)] for k in range(40))
        lines += [f"## Rule {n}", "", f"Rule {n} covers {picked} for site {n % 97} and team {n % 31}.", ""]
    return "\n".join(lines).encode()


# ------------------------------------------------------------- two homes


def _settings_for(home: Path, **values: object):  # -> Settings
    from core.config import Settings

    return Settings(POLICYBOT_HOME=home, **values)


@pytest.mark.services
def test_each_home_has_a_redis_of_its_own_and_stops_only_its_own(tmp_path, monkeypatch) -> None:
    from core import embedded_redis, services
    from core.errors import ServiceError

    monkeypatch.delenv("POLICYBOT_REDIS_PORT", raising=False)  # the default: a port of the home's own
    dev, staging = _settings_for(tmp_path / "dev"), _settings_for(tmp_path / "staging")
    try:
        dev_url, staging_url = services.redis_url(dev), services.redis_url(staging)
        assert dev_url != staging_url
        redis.Redis.from_url(dev_url).set("home", "dev")
        assert redis.Redis.from_url(staging_url).get("home") is None  # queues and dedup keys never mix
        assert services.configured_redis_url(dev) == dev_url  # what the bot uses without starting one

        assert services.services_down(staging) == ["redis"]
        assert redis.Redis.from_url(dev_url).get("home") == b"dev"  # the other home's Redis runs on
        assert services.redis_url(staging) == staging_url  # the port is kept in the home

        # POLICYBOT_REDIS_PORT still chooses the port; one that another home's Redis holds is refused,
        # and that Redis is neither used nor stopped.
        port = int(dev_url.rsplit(":", 1)[1].split("/")[0])
        squatter = _settings_for(tmp_path / "squatter", POLICYBOT_REDIS_PORT=port)
        with pytest.raises(ServiceError, match="another home"):
            services.redis_url(squatter)
        assert services.services_down(squatter) == []
        assert not any(status.running for status in services.services_status(squatter))
        assert redis.Redis.from_url(dev_url).get("home") == b"dev"

        # Its recorded port taken meanwhile by something else: the home's Redis moves to a free one.
        embedded_redis.stop_redis(staging)
        staging_port = int(staging_url.rsplit(":", 1)[1].split("/")[0])
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the stopped Redis's TIME_WAITs
            taken.bind(("127.0.0.1", staging_port))
            taken.listen()
            moved = services.redis_url(staging)
            assert moved != staging_url and moved != dev_url
            assert [s.running for s in services.services_status(staging) if s.name == "redis"] == [True]
    finally:
        for settings in (dev, staging):
            embedded_redis.stop_redis(settings)
    assert not embedded_redis.stop_redis(dev)


# ----------------------------------------------------- visibility timeout


def test_an_answer_whose_worker_died_is_redelivered_within_minutes_by_default(monkeypatch) -> None:
    from core.config import Settings
    from workers.celery_app import ANSWER_HARD_LIMIT_S

    monkeypatch.delenv("POLICYBOT_CELERY_VISIBILITY_TIMEOUT", raising=False)
    timeout = Settings().celery_visibility_timeout
    assert ANSWER_HARD_LIMIT_S < timeout <= 300  # longer than an answer may run, not an hour


def test_waiting_retries_and_long_ingestion_are_not_delivered_twice(settings, tmp_path) -> None:
    """Redis's visibility timeout (3 s here) is far shorter than a retry's countdown and than
    the ingestion; the worker holds both until they are due, so each runs once."""
    from application import jobs
    from workers.answer_tasks import apologise_task
    from workers.ingest_tasks import ingest_job_task

    env = cli_env(settings.home) | {"POLICYBOT_CELERY_VISIBILITY_TIMEOUT": str(SHORT_VISIBILITY_S)}
    worker = _worker(env, tmp_path / "worker-short-visibility.log")
    try:
        # A retry waiting out its countdown (an apology Slack would not take; no such question here).
        waiting = apologise_task.apply_async((999_999_999,), countdown=4 * SHORT_VISIBILITY_S)
        worker.wait_for_log(rf"policybot\.apologise\[{waiting.id}\] succeeded", timeout=120)

        document = tmp_path / "bulky-handbook.md"
        document.write_bytes(_bulky_markdown(1500))  # 500 took under 6 s with two test processes
        job_id = jobs.create_job(
            settings, "ingest", {"paths": [str(document)], "collection": "bulky", "channels": None}
        )
        started = time.monotonic()
        ingesting = ingest_job_task.delay(job_id)
        wait_until(lambda: jobs.get_job(settings, job_id)["status"] in ("done", "failed"), 400, "the ingest job")
        assert jobs.get_job(settings, job_id)["status"] == "done"
        assert time.monotonic() - started > 2 * SHORT_VISIBILITY_S  # it did outlast the timeout (and a sweep)
        time.sleep(4 * SHORT_VISIBILITY_S)  # a second delivery would come now
        log = worker.log_text()
    finally:
        worker.stop()
    for task_id in (waiting.id, ingesting.id):
        assert len(re.findall(rf"\[{task_id}\] received", log)) == 1, log[-3000:]
        assert len(re.findall(rf"\[{task_id}\] succeeded", log)) == 1
    assert "already finished" not in log


# ------------------------------------------- a task that keeps killing its worker


def test_a_question_whose_worker_keeps_dying_gets_the_apology_after_three_deliveries(stack) -> None:
    """Twice its pool process is killed (as the OOM killer does), once the whole worker (a host
    lost): the fourth delivery is not run, the asker gets the apology, the log one error line."""
    workers = [_replace_worker(stack, "worker-dying-1")]

    channel = "CDYING0001"
    event = stack.mention("How many weeks of parental leave do primary caregivers get?", channel)
    assert stack.deliver(event).status_code == 200
    row = wait_until(
        lambda: (rows := question_for(stack.settings, channel, event["ts"])) and rows[0], 30, "question row"
    )

    def deliveries() -> int:
        return sum(worker.log_text().count(f"answering question {row.id} ") for worker in workers)

    for death in range(1, DELIVERIES + 1):
        wait_until(lambda death=death: deliveries() == death, 300, f"delivery {death}")
        if death < DELIVERIES:
            _kill_pool_process(workers[-1])
        else:
            workers[-1].kill()
            workers.append(_worker(_dying_worker_env(stack), stack.log_dir / "worker-dying-2.log"))
            stack.worker = workers[-1]

    posts = stack.fake.wait_for(
        lambda: [p for p in stack.fake.posts(channel, event["ts"]) if p.response.get("ok")],
        timeout=KILL_TEST_VISIBILITY_S + 120,
        what="the apology",
    )
    time.sleep(2)
    assert len(stack.fake.posts(channel, event["ts"])) == 1 and "went wrong" in posts[0]["text"]
    [row] = question_for(stack.settings, channel, event["ts"])
    assert row.status == "failed" and row.reference in posts[0]["text"] and row.answer_ts == posts[0].response["ts"]
    assert "DeliveredTooOften" in row.error
    assert deliveries() == DELIVERIES
    assert workers[-1].log_text().count("not running it again") == 1


def test_an_upload_whose_worker_keeps_dying_gets_the_failure_reply_after_three_deliveries(stack) -> None:
    """The hostile upload: each delivery's pool process is killed while it ingests; the fourth
    delivery does not fetch the file again, and the admin is told it failed."""
    _replace_worker(stack, "worker-upload")
    channel = "DDYING0002"
    file = stack.fake.add_file("bulky-handbook.md", _bulky_markdown(2000), "text/markdown", user=ADMIN)
    upload = stack.dm("", channel, user=ADMIN, subtype="file_share", files=[file])
    assert stack.deliver(upload).status_code == 200
    choose_upload(stack, stack.fake.wait_for_posts(channel, upload["ts"], timeout=30)[0])
    for death in range(1, DELIVERIES + 1):
        stack.fake.wait_for(
            lambda death=death: len(stack.fake.calls_to("files.info", file=file["id"])) == death,
            timeout=300,
            what=f"delivery {death}",
        )
        _kill_pool_process(stack.worker)

    posts = stack.fake.wait_for_posts(channel, upload["ts"], count=2, timeout=300)
    time.sleep(2)
    assert "bulky-handbook.md" in posts[0]["text"]  # "add it?"
    assert "could not be ingested" in posts[1]["text"] and "not tried again" in posts[1]["text"]
    assert len(stack.fake.calls_to("files.info", file=file["id"])) == DELIVERIES
    assert len(stack.fake.posts(channel, upload["ts"])) == 2
    assert stack.worker.log_text().count(f"upload {_claim_of(stack, channel, upload['ts'])}: the worker") == 1


def _claim_of(stack, channel: str, ts: str) -> int:
    from sqlalchemy import select

    from core import db
    from core.models import SlackMessage

    with db.session(stack.settings) as session:
        return session.execute(
            select(SlackMessage.id).where(SlackMessage.channel == channel, SlackMessage.message_ts == ts)
        ).scalar_one()
