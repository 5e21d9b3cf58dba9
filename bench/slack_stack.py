"""The Slack path as separate processes, for the load benchmarks.

The local Slack (devtools/fake_slack.py) runs in the benchmark process; the bot is a real
`policybot serve --http` process (devtools/bot_process.py) and the workers are real Celery worker processes
(devtools/worker_process.py), all on the bench stack. The load generator is the benchmark process,
so the bot's and workers' CPU is theirs alone (apart from the machine's other jobs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from bench.common import REPO, peak_rss_mb
from devtools.bot_process import BotProcess

QUESTIONS = REPO / "bench" / "questions.yaml"


def bench_questions() -> list[dict[str, Any]]:
    return yaml.safe_load(QUESTIONS.read_text())


def interleaved(items: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """n questions with the categories (kb, fallback, none) mixed in their natural proportion."""
    by_category: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_category.setdefault(item["category"], []).append(item)
    mixed: list[dict[str, Any]] = []
    while len(mixed) < len(items):
        for group in by_category.values():
            share = max(1, round(len(group) / len(items) * 4))
            for _ in range(share):
                if group:
                    mixed.append(group.pop(0))
    return (mixed * (n // max(1, len(mixed)) + 1))[:n]


@dataclass
class SlackBench:
    """Local Slack + bot process (+ worker processes on demand) on the bench stack."""

    settings: Any
    log_dir: Path
    worker_env_extra: dict[str, str] = field(default_factory=dict)
    fake: Any = None
    bot: BotProcess | None = None
    workers: list[Any] = field(default_factory=list)

    def __enter__(self) -> SlackBench:
        from devtools.demo import worker_env
        from devtools.fake_slack import FakeSlack

        self.fake = FakeSlack().start()
        self.env = worker_env(self.settings, self.fake, None, PYTHONPATH=str(REPO), **self.worker_env_extra)
        self.purge_answer_queue()
        self.bot = BotProcess(self.env, self.log_dir / "bot.log").start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_workers()
        if self.bot is not None:
            self.bot.stop()
        self.fake.stop()

    @property
    def events_url(self) -> str:
        assert self.bot is not None
        return self.bot.url + "/slack/events"

    def start_worker(self, concurrency: int = 1, **extra_env: str):  # -> WorkerProcess
        from devtools.worker_process import WorkerProcess

        worker = WorkerProcess(
            {**self.env, **extra_env},
            self.log_dir / f"worker-{len(self.workers)}.log",
            queues=("answer",),
            concurrency=concurrency,
        ).start()
        self.workers.append(worker)
        return worker.wait_ready(timeout=600)

    def stop_workers(self) -> None:
        while self.workers:
            self.workers.pop().stop()

    def worker_peak_rss_mb(self) -> dict[str, float]:
        """Peak RSS of each worker's main process and of its pool children (which hold the models)."""
        from bench.common import child_pids

        out: dict[str, float] = {}
        for worker in self.workers:
            main = worker.process.pid
            out["main"] = max(out.get("main", 0.0), peak_rss_mb(main) or 0.0)
            for child in child_pids(main):
                out["child"] = max(out.get("child", 0.0), peak_rss_mb(child) or 0.0)
        return out

    def purge_answer_queue(self) -> None:
        import redis

        from core import services

        redis.Redis.from_url(services.redis_url(self.settings)).delete("answer")

    def queued_question_ids(self) -> list[int]:
        """Question ids of the answer tasks waiting in Redis (Celery's JSON messages)."""
        import base64

        import redis

        from core import services

        client = redis.Redis.from_url(services.redis_url(self.settings))
        ids = []
        for raw in cast(list[bytes], client.lrange("answer", 0, -1)):  # redis-py types replies "Awaitable or Any"
            message = json.loads(raw)
            args = json.loads(base64.b64decode(message["body"]))[0]
            ids.append(int(args[0]))
        return ids

    # -- asking

    def ask(self, text: str, channel: str, timeout: float = 600.0) -> dict[str, Any]:
        """Deliver one signed app_mention; wait for the answer's chat.postMessage; times in seconds."""
        from devtools.demo import mention_event

        event = mention_event(self.fake, text, channel=channel)
        sent = time.time()
        response = self.fake.deliver(self.events_url, self.fake.event_body(event))
        acked = time.time()
        if response.status_code != 200:
            return {"error": f"HTTP {response.status_code}", "ts": event["ts"], "channel": channel}
        post = self.fake.wait_for_posts(channel, event["ts"], timeout=timeout)[0]
        return {
            "ts": event["ts"],
            "channel": channel,
            "sent": sent,
            "ack_s": acked - sent,
            "e2e_s": post.at - sent,
            "posted": post.at,
        }

    def ask_many(self, items: Sequence[dict[str, Any]], concurrency: int, tag: str) -> list[dict[str, Any]]:
        """Ask every item with `concurrency` questions in flight; one channel per question."""

        def one(index_item: tuple[int, dict[str, Any]]) -> dict[str, Any]:
            index, item = index_item
            result = self.ask(item["question"], f"C{tag}{index:05d}".upper()[:24])
            result["category"] = item["category"]
            return result

        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(one, enumerate(items)))

    def stage_rows(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Per question: the worker's stage timings (ms) and the post stage, from the action log."""
        from sqlalchemy import select

        from core import db
        from core.models import Question

        by_key = {(r["channel"], r["ts"]): r for r in results if "e2e_s" in r}
        with db.session(self.settings) as session:
            rows = session.execute(select(Question).where(Question.channel.in_([c for c, _ in by_key]))).scalars().all()
        out = []
        for row in rows:
            result = by_key.get((row.channel, row.message_ts))
            if result is None or not row.timings_ms or row.answered_at is None:
                continue
            timings = {k: float(v) for k, v in row.timings_ms.items() if isinstance(v, (int, float))}
            post_ms = (result["posted"] - row.answered_at.timestamp()) * 1000
            e2e_ms = result["e2e_s"] * 1000
            out.append(
                {
                    "category": result["category"],
                    "action": row.action,
                    "e2e": e2e_ms,
                    "ack": result["ack_s"] * 1000,
                    **timings,
                    "post": post_ms,
                    "queue+task": e2e_ms - timings.get("total", 0.0) - post_ms,
                }
            )
        return out
