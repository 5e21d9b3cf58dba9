"""Acknowledgement latency: signed app_mention events at concurrency 20, time to HTTP 200.

    .venv/bin/python -m bench.ack [--events 500] [--concurrency 20]

A load generator (this process, asyncio + httpx) posts signed `app_mention` events to a real
`policybot serve --http` process. No worker runs, so every enqueued answer task stays in
Redis, where the benchmark counts them: each event must be enqueued exactly once. The ack
includes storing the event in PostgreSQL first (bot/inbox.py, one insert), so that a bot
killed right after it loses nothing; that insert is also timed on its own, and the inbox
must be empty once every listener is done. Also reports the bot process's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from bench.common import Report, cpu_seconds, fmt_ms, peak_rss_mb, summary, table, use_bench_home


async def _load(fake, url: str, bodies: list[dict], concurrency: int) -> list[tuple[int, float]]:
    import httpx

    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def one(body: dict) -> tuple[int, float]:
            async with gate:
                raw = json.dumps(body)
                headers = fake.signed_headers(raw)
                started = time.perf_counter()
                try:
                    response = await client.post(url, content=raw, headers=headers)
                    status = response.status_code
                except httpx.HTTPError:
                    status = 0
                return status, time.perf_counter() - started

        return await asyncio.gather(*(one(body) for body in bodies))


def _time_the_store(settings, bodies: list[dict]) -> list[float]:
    """Seconds each store-before-ack insert takes on its own (then removed again)."""
    from bot import inbox

    seconds = []
    for n, body in enumerate(bodies):
        event_id = f"EvBENCHSTORE{n:06d}"
        started = time.perf_counter()
        inbox.store(settings, event_id, body)
        seconds.append(time.perf_counter() - started)
        inbox.done(settings, event_id)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args(argv)

    use_bench_home()
    from sqlalchemy import func, select

    from bench.common import prepared_settings
    from bench.slack_stack import SlackBench
    from core import db
    from core.models import Question, SlackInbox, SlackMessage
    from devtools.demo import mention_event

    report = Report("ack", "Acknowledgement latency (Bolt HTTP endpoint)").begin()
    settings = prepared_settings()
    channel = f"CACK{int(time.time()) % 10**6:06d}"
    with SlackBench(settings, Path(settings.home) / "logs" / "bench-ack") as bench:
        bodies = [
            bench.fake.event_body(
                mention_event(
                    bench.fake,
                    f"benchmark question {i}: what is the travel policy?",
                    channel=channel,
                    user=f"UBENCH{i % 50:04d}",
                )
            )
            for i in range(args.events)
        ]
        warm = bench.fake.deliver(
            bench.events_url,
            bench.fake.event_body(mention_event(bench.fake, "warm-up question", channel=channel + "W")),
        )  # first request loads lazily
        assert warm.status_code == 200, warm.status_code
        time.sleep(1.0)
        bench.purge_answer_queue()
        assert bench.bot is not None and bench.bot.process is not None  # started by SlackBench.__enter__
        bot_pid = bench.bot.process.pid
        bot_cpu_before, own_cpu_before = cpu_seconds(bot_pid), time.process_time()
        started = time.perf_counter()
        results = asyncio.run(_load(bench.fake, bench.events_url, bodies, args.concurrency))
        wall = time.perf_counter() - started
        # The listener finishes (record, enqueue) after the ack: wait for every claim to be enqueued.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with db.session(settings) as session:
                enqueued = session.execute(
                    select(func.count())
                    .select_from(SlackMessage)
                    .where(SlackMessage.channel == channel, SlackMessage.enqueued_at.is_not(None))
                ).scalar_one()
            if enqueued >= args.events:
                break
            time.sleep(0.5)
        drained = time.perf_counter() - started
        bot_cpu = cpu_seconds(bot_pid) - bot_cpu_before
        own_cpu = time.process_time() - own_cpu_before
        queued = bench.queued_question_ids()
        with db.session(settings) as session:
            ours = set(session.execute(select(Question.id).where(Question.channel == channel)).scalars())
        bot_rss = peak_rss_mb(bench.bot.process.pid) if bench.bot and bench.bot.process else None
        bench.purge_answer_queue()
        with db.session(settings) as session:
            inbox_left = session.execute(
                select(func.count())
                .select_from(SlackInbox)
                .where(SlackInbox.body["event"]["channel"].astext == channel)
            ).scalar_one()
        store_s = _time_the_store(settings, bodies[:200])

    latencies = [seconds for status, seconds in results if status == 200]
    errors = sum(1 for status, _ in results if status != 200)
    queued_ours = [q for q in queued if q in ours]
    once = len(queued_ours) == len(set(queued_ours)) == args.events == len(ours)
    s = summary(latencies)
    met = s["p99"] < 0.100 and errors == 0 and once and inbox_left == 0
    stored = summary(store_s)
    report.add(
        table(
            [
                "events",
                "concurrency",
                "p50",
                "p95",
                "p99",
                "max",
                "errors",
                "questions recorded",
                "tasks enqueued (distinct)",
                "throughput",
                "all enqueued",
                "left in the inbox",
                "target (p99 < 100 ms, no errors, each once, none left)",
            ],
            [
                [
                    args.events,
                    args.concurrency,
                    fmt_ms(s["p50"]),
                    fmt_ms(s["p95"]),
                    fmt_ms(s["p99"]),
                    fmt_ms(s["max"]),
                    errors,
                    len(ours),
                    f"{len(queued_ours)} ({len(set(queued_ours))})",
                    f"{args.events / wall:.0f} events/s",
                    f"after {drained:.1f} s",
                    inbox_left,
                    "met" if met else "not met",
                ]
            ],
        )
    )
    report.add(
        f"The ack time above includes storing each event before its ack (one INSERT into the inbox); "
        f"that insert alone, {len(store_s)} times in a row from this process: p50 {fmt_ms(stored['p50'])}, "
        f"p99 {fmt_ms(stored['p99'])}."
    )
    report.add(
        f"Bot process (`policybot serve --http`): peak RSS {bot_rss or float('nan'):.0f} MiB after the load; "
        f"{bot_cpu / args.events * 1000:.1f} ms of CPU per event (ack, then record and enqueue), against "
        f"{own_cpu / args.events * 1000:.1f} ms per event in the load generator."
    )
    report.figures.update(
        {
            "ack": s,
            "store_before_ack": stored,
            "inbox_left": inbox_left,
            "errors": errors,
            "recorded": len(ours),
            "enqueued": len(queued_ours),
            "distinct": len(set(queued_ours)),
            "bot_rss_mb": bot_rss,
            "met": met,
            "bot_cpu_ms_per_event": bot_cpu / args.events * 1000,
            "events_per_s": args.events / wall,
        }
    )
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
