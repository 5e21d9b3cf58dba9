"""End to end: signed event → the answer's chat.postMessage at the local Slack, one worker.

    .venv/bin/python -m bench.e2e [--questions 64] [--concurrency 1,8]

Real processes: `policybot serve --http` (the bot), one Celery worker process (prefork,
one child: the production default) and the local Slack Web API fake. Questions come from
bench/questions.yaml, kb, fallback-only and unanswerable mixed. Each concurrency level gets
a freshly started worker, so no answer comes from a warm score cache of an earlier level.
Reports p50/p95 per level, the breakdown by stage (from the action log's timings) and the
worker's peak RSS with its models loaded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from bench.common import Report, fmt_ms, summary, table, use_bench_home

STAGES = ("ack", "queue+task", "retrieve", "evaluate", "fallback", "refine", "compose", "post")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=48)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--threads", type=int, default=None, help="POLICYBOT_TORCH_THREADS for the worker")
    args = parser.parse_args(argv)

    use_bench_home()
    from bench.common import prepared_settings
    from bench.slack_stack import SlackBench, bench_questions, interleaved

    report = Report("e2e", "End-to-end latency (signed event → answer posted), one worker").begin()
    settings = prepared_settings()
    items = interleaved(bench_questions(), args.questions)
    counts = {c: sum(1 for i in items if i["category"] == c) for c in ("kb", "fallback", "none")}
    extra = {"POLICYBOT_TORCH_THREADS": str(args.threads)} if args.threads else {}
    levels = [int(c) for c in args.concurrency.split(",")]
    rows, stage_table, figures, rss = [], [], {}, {}
    run_tag = f"{int(time.time()) % 10**5:05d}"
    with SlackBench(settings, Path(settings.home) / "logs" / "bench-e2e", worker_env_extra=extra) as bench:
        for level in levels:
            bench.start_worker(concurrency=1)
            first = bench.ask(items[0]["question"] + " (first)", f"CWARM{run_tag}{level}")  # not counted below
            figures[f"c{level}_first_question_s"] = first.get("e2e_s")
            started = time.perf_counter()
            results = bench.ask_many(items, level, f"E{run_tag}L{level}Q")
            wall = time.perf_counter() - started
            rss = bench.worker_peak_rss_mb()
            bench.stop_workers()
            ok = [r for r in results if "e2e_s" in r]
            s = summary([r["e2e_s"] for r in ok])
            figures[f"c{level}"] = {**s, "errors": len(results) - len(ok), "wall_s": wall}
            met = ""
            if level == 1:
                met = "met" if s["p50"] < 1.0 and s["p95"] < 2.5 else "not met"
                figures["met"] = met == "met"
            per_cat = {
                c: statistics.median([r["e2e_s"] for r in ok if r["category"] == c] or [float("nan")])
                for c in ("kb", "fallback", "none")
            }
            rows.append(
                [
                    level,
                    len(ok),
                    fmt_ms(s["p50"]),
                    fmt_ms(s["p95"]),
                    fmt_ms(s["max"]),
                    " / ".join(fmt_ms(per_cat[c]) for c in ("kb", "fallback", "none")),
                    f"{len(ok) / wall * 60:.0f}",
                    len(results) - len(ok),
                    met,
                ]
            )
            stages = bench.stage_rows(results)
            actions = {a: sum(1 for r in stages if r["action"] == a) for a in ("correct", "ambiguous", "incorrect")}
            figures[f"c{level}_actions"] = actions
            stage_table.append(
                [level]
                + [fmt_ms(statistics.median([r.get(k, 0.0) for r in stages]), ms=True) for k in STAGES + ("total",)]
                + [fmt_ms(statistics.median([r["e2e"] for r in stages]), ms=True)]
            )
            figures[f"c{level}_stages"] = {k: statistics.median([r.get(k, 0.0) for r in stages]) for k in STAGES}
    report.add(
        f"{len(items)} questions per level ({counts['kb']} kb, {counts['fallback']} fallback-only, "
        f"{counts['none']} unanswerable); worker torch threads {args.threads or settings.evaluator_threads}; "
        f"actions at the last level: {actions}."
    )
    report.add(
        table(
            [
                "concurrency",
                "answered",
                "p50",
                "p95",
                "max",
                "p50 kb / fallback / none",
                "answers/min",
                "errors",
                "target (c=1: p50 < 1.0 s, p95 < 2.5 s)",
            ],
            rows,
        )
    )
    report.add(
        "Median per stage (ms; `queue+task` is the wait in Redis plus the task's own reads and writes "
        "around the pipeline, `total` is the pipeline):\n\n"
        + table(["concurrency", *STAGES, "total", "end to end"], stage_table)
    )
    report.add(
        "First question after the worker reported ready (not counted above): "
        + ", ".join(f"{fmt_ms(figures[f'c{level}_first_question_s'])} (level {level})" for level in levels)
        + "."
    )
    report.add(
        f"Worker peak RSS with models loaded: pool child {rss.get('child', 0):.0f} MiB, "
        f"main process {rss.get('main', 0):.0f} MiB."
    )
    figures["worker_rss_mb"] = rss
    report.figures.update(figures)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
