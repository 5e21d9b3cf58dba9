"""Scale-out: questions per minute with 1, 2 and 4 worker processes on this machine.

    .venv/bin/python -m bench.scale_out [--processes 1,2,4] [--questions 32]

For each count, one Celery worker with that many prefork processes (each loads its own
models, one torch thread each) answers a burst of questions delivered all at once through
the bot; throughput is questions answered / (last answer posted − first event sent).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.common import Report, fmt_ms, summary, table, use_bench_home


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--questions", type=int, default=24)
    args = parser.parse_args(argv)

    use_bench_home()
    from bench.common import prepared_settings
    from bench.slack_stack import SlackBench, bench_questions, interleaved

    report = Report("scale_out", "Scale-out: worker processes vs throughput").begin()
    settings = prepared_settings()
    items = interleaved(bench_questions(), args.questions)
    rows, figures, base = [], {}, None
    run_tag = f"{int(time.time()) % 10**5:05d}"
    with SlackBench(
        settings, Path(settings.home) / "logs" / "bench-scale", worker_env_extra={"POLICYBOT_TORCH_THREADS": "1"}
    ) as bench:
        for processes in [int(p) for p in args.processes.split(",")]:
            bench.start_worker(concurrency=processes)
            bench.ask_many(
                [{"question": "warm-up: what is the travel policy?", "category": "kb"}] * processes,
                processes,
                f"W{run_tag}P{processes}Q",
            )  # every child opens its connections
            results = bench.ask_many(items, len(items), f"S{run_tag}P{processes}Q")
            bench.stop_workers()
            ok = [r for r in results if "e2e_s" in r]
            span = max(r["posted"] for r in ok) - min(r["sent"] for r in ok)
            rate = len(ok) / span * 60
            base = base or rate
            s = summary([r["e2e_s"] for r in ok])
            figures[f"p{processes}"] = {"per_min": rate, "latency": s, "errors": len(results) - len(ok)}
            rows.append(
                [
                    processes,
                    len(ok),
                    f"{span:.1f} s",
                    f"{rate:.0f}",
                    f"{rate / base:.2f}×",
                    fmt_ms(s["p50"]),
                    len(results) - len(ok),
                ]
            )
    report.add(
        f"Burst of {len(items)} questions (kb, fallback-only, unanswerable mixed), all delivered at once:\n\n"
        + table(["worker processes", "answered", "wall", "questions/min", "speed-up", "p50 latency", "errors"], rows)
    )
    report.figures.update(figures)
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
