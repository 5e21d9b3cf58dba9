"""Every performance benchmark in one run, then docs/performance.md from what they printed.

    .venv/bin/python -m bench.run_all [--only e2e,ack] [--no-write]

Runs each benchmark as its own process (python -m bench.NAME), in the order below, with
the output streamed as it comes. Each benchmark stores the report it printed in
bench/results/NAME.json; this script puts those same tables into the generated part of
docs/performance.md (between the markers), with the command, date, machine and duration,
and a summary of the targets. The hand-written reading below the markers is kept.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from bench.common import REPO, RESULTS_DIR, load_average, machine, table

BENCHMARKS = ("evaluator_speed", "ack", "e2e", "scale_out", "retrieval_scale")
DOC = REPO / "docs" / "performance.md"
BEGIN, END = "<!-- bench.run_all: begin -->", "<!-- bench.run_all: end -->"


def targets(results: dict[str, dict]) -> list[list[str]]:
    """One row per target of issue #5: the figure and whether it is met."""
    rows = []
    ack = results.get("ack", {}).get("figures")
    if ack:
        rows.append(
            [
                "Ack p99 < 100 ms at concurrency 20, no errors, each event enqueued once",
                f"p99 {ack['ack']['p99'] * 1000:.0f} ms, {ack['errors']} errors, "
                f"{ack['distinct']}/{ack['recorded']} enqueued once",
                "met" if ack["met"] else "not met",
            ]
        )
    e2e = results.get("e2e", {}).get("figures")
    if e2e and "c1" in e2e:
        c1 = e2e["c1"]
        rows.append(
            [
                "End to end at concurrency 1: p50 < 1.0 s, p95 < 2.5 s",
                f"p50 {c1['p50']:.2f} s, p95 {c1['p95']:.2f} s",
                "met" if e2e.get("met") else "not met",
            ]
        )
    ev = results.get("evaluator_speed", {}).get("figures")
    if ev:
        fresh = {k: v for k, v in ev.items() if k.startswith("per_question_") and "cache" not in k}
        best = min(fresh, key=lambda k: fresh[k]["p50"])
        default = ev.get("per_question_default") or ev.get("per_question_fp32_t1")
        warm = ev.get("per_question_cache_warm")
        rows.append(
            [
                "Default evaluator scores 10 candidates + their strips in < 300 ms",
                f"as deployed (bf16 where native, 1 thread), every passage read afresh: p50 {default['p50']:.0f} ms"
                + (f"; passages cached: p50 {warm['p50']:.0f} ms" if warm else "")
                + f"; fastest setting {best.removeprefix('per_question_')}: p50 {fresh[best]['p50']:.0f} ms",
                "met" if default["p50"] < 300 else "not met (passages read afresh)",
            ]
        )
    ret = results.get("retrieval_scale", {}).get("figures")
    if ret:
        rows.append(
            [
                "Retrieval p99 < 50 ms at 1M chunks, recall@10 ≥ 0.95",
                ret["verdict"],
                "met"
                if "target (p99 < 50 ms, recall ≥ 0.95) met" in ret["verdict"] and ret["results"][-1]["n"] >= 1_000_000
                else "not met",
            ]
        )
    return rows


def write_doc(results: dict[str, dict], command: str, duration_s: float) -> None:
    generated = [
        BEGIN,
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} in "
        f"{duration_s / 60:.1f} minutes.",
        "",
        f"Machine: {machine()}. The machine was shared with other jobs while this ran (load average at the end "
        f"{load_average()}): every figure is from one run on a busy 2-core VM, not a quiet benchmark host.",
        "",
        "### Targets",
        "",
        table(["target (issue #5)", "measured", "status"], targets(results)),
        "",
    ]
    for name in BENCHMARKS:
        if name in results:
            generated += [
                results[name]["markdown"].replace("## ", "### ", 1),
                f"_`python -m bench.{name}` took {results[name]['figures']['duration_s']:.0f} s._",
                "",
            ]
    generated.append(END)
    block = "\n".join(generated)
    text = DOC.read_text() if DOC.exists() else "# Performance\n\n" + BEGIN + "\n" + END + "\n"
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + block + text[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help="comma-separated subset of " + ",".join(BENCHMARKS))
    parser.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    args, passthrough = parser.parse_known_args(argv)
    chosen = args.only.split(",") if args.only else list(BENCHMARKS)
    command = "python -m bench.run_all" + (f" --only {args.only}" if args.only else "")
    print(f"# policybot performance benchmarks\n\nMachine: {machine()}\n", flush=True)
    started = time.perf_counter()
    failed = []
    for name in chosen:
        print(f"\n======== bench.{name} ========", flush=True)
        (RESULTS_DIR / f"{name}.json").unlink(missing_ok=True)
        code = subprocess.call([sys.executable, "-m", f"bench.{name}"], cwd=str(REPO))
        if code != 0:
            failed.append(name)
    duration = time.perf_counter() - started
    results = {}
    for name in BENCHMARKS:  # earlier results of benchmarks not run now stay in the document
        path = RESULTS_DIR / f"{name}.json"
        if path.exists():
            results[name] = json.loads(path.read_text())
    print("\n======== summary ========\n")
    print(table(["target (issue #5)", "measured", "status"], targets(results)))
    print(
        f"\nAll benchmarks took {duration / 60:.1f} minutes"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + "."
    )
    if not args.no_write and not args.only:
        write_doc(results, command, duration)
        print(f"Wrote {DOC.relative_to(REPO)}.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
