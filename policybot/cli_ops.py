"""Operating commands: run the Slack bot and the workers, review the action log.

`policybot serve --http|--socket`, `policybot worker`, `policybot logs [show ID]`,
`policybot stats`. Registered on the main CLI by `register(app)` (see policybot/cli.py).
The log queries live in application/review.py, shared with the bot's admin `stats` reply and
the admin console, so all three show the same numbers (re-exported here).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table

from application.review import (
    ACTIONS,
    FEEDBACK_CHOICES,
    STATUSES,
    daily_stats,
    find_record,
    log_record,
    parse_since,
    query_logs,
    records_csv,
    stats_summary,
)

QUEUES = ("answer", "ingest")


def _cli():  # the main CLI module (imported lazily: it imports this module at its end)
    from policybot import cli  # circular at import time: policybot/cli.py registers these commands at its end

    return cli


# ----------------------------------------------------------------- commands


def register(app: typer.Typer) -> None:
    """Add serve, worker, logs and stats to the main CLI."""
    app.command()(serve)
    app.command()(worker)
    logs_app = typer.Typer(
        help="Review the action log: questions, scores, actions, sources, answers, feedback.",
        invoke_without_command=True,
    )
    logs_app.callback(invoke_without_command=True)(logs)
    logs_app.command("show")(logs_show)
    app.add_typer(logs_app, name="logs")
    app.command()(stats)


def _require(settings, *names: str) -> None:
    from bot.app import SlackConfigError, require_slack_settings  # Slack Bolt and SQLAlchemy: only for serve and worker

    try:
        require_slack_settings(settings, *names)
    except SlackConfigError as error:
        _cli()._fail(str(error))


def serve(
    http: Annotated[
        bool,
        typer.Option("--http", help="HTTP mode: Slack posts events to /slack/events (needs SLACK_SIGNING_SECRET)."),
    ] = False,
    socket: Annotated[
        bool, typer.Option("--socket", help="Socket Mode: connect out to Slack (needs SLACK_APP_TOKEN).")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="Address to bind in HTTP mode.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port in HTTP mode.")] = 3000,
) -> None:
    """Run the Slack bot (listeners only: answers come from `policybot worker`)."""
    cli = _cli()
    if http == socket:
        cli._fail("choose one of --http or --socket", 1)
    settings = cli._settings()
    if http:
        _require(settings, "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET")
    else:
        _require(settings, "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger("slack_bolt").setLevel(logging.WARNING)
    from slack_bolt.error import BoltError  # Slack Bolt: only once the options are known good

    try:
        if http:
            from bot.http import EVENTS_PATH  # uvicorn and Starlette: HTTP mode only
            from bot.http import serve as serve_http  # uvicorn and Starlette: HTTP mode only

            cli.errors.print(
                f"policybot: HTTP mode on http://{host}:{port}{EVENTS_PATH} (Slack API {settings.slack_api_url})",
                highlight=False,
            )
            serve_http(settings, host=host, port=port)
        else:
            from bot.socket import serve as serve_socket  # the Socket Mode client: Socket Mode only

            cli.errors.print(f"policybot: Socket Mode (Slack API {settings.slack_api_url})", highlight=False)
            serve_socket(settings)
    except BoltError as error:
        # e.g. auth.test rejected the token; Bolt's message names the error, never the token.
        cli._fail(f"Slack refused to start the app: {error}")


def worker(
    queues: Annotated[str, typer.Option("--queues", "-Q", help="Comma-separated: answer, ingest.")] = "answer,ingest",
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-c",
            min=1,
            max=64,
            help="Worker processes.",
            show_default="cores / POLICYBOT_TORCH_THREADS, at most 4",
        ),
    ] = None,
    pool: Annotated[
        str, typer.Option("--pool", help="prefork (time limits, crash isolation) or solo (one process).")
    ] = "prefork",
    loglevel: Annotated[
        str, typer.Option("--loglevel", "-l", help="Celery's log level: debug, info, warning or error.")
    ] = "info",
) -> None:
    """Run a Celery worker for the answer and/or ingest queue (models load once per process)."""
    cli = _cli()
    chosen = [q.strip() for q in queues.split(",") if q.strip()]
    unknown = sorted(set(chosen) - set(QUEUES))
    if not chosen or unknown:
        cli._fail(
            f"--queues must name some of {', '.join(QUEUES)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
            1,
        )
    if pool not in ("prefork", "solo"):
        cli._fail(
            "--pool must be prefork or solo (models load in worker_process_init, which the threads pool skips)", 1
        )
    settings = cli._settings()
    _require(settings, "SLACK_BOT_TOKEN")
    if concurrency is None:
        concurrency = max(1, min(4, (os.cpu_count() or 1) // settings.evaluator_threads))
    if pool == "solo":
        concurrency = 1
    from workers.celery_app import celery_app  # Celery and its broker client: only once the options are known good

    name = f"policybot-{'-'.join(chosen)}-{os.getpid()}@%h"
    celery_app.worker_main(
        [
            "worker",
            "-Q",
            ",".join(chosen),
            "-c",
            str(concurrency),
            "--pool",
            pool,
            "--loglevel",
            loglevel,
            "-n",
            name,
            "--without-gossip",
            "--without-mingle",
        ]
    )


def logs(
    ctx: typer.Context,
    since: Annotated[str, typer.Option("--since", help="How far back: 7d, 12h, 30m, 2w or a date.")] = "7d",
    action: Annotated[str | None, typer.Option("--action", help="correct, ambiguous or incorrect.")] = None,
    found: Annotated[
        str | None, typer.Option("--found", help="true (answered from a source) or false (abstained).")
    ] = None,
    feedback: Annotated[str | None, typer.Option("--feedback", help="up, down, any or none.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="answered, failed or pending.")] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Newest N rows.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array with every field.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="CSV on stdout.")] = False,
) -> None:
    """Review logged actions: question, scores, action, sources, fallback queries, answer, feedback, latency."""
    if ctx.invoked_subcommand is not None:
        return
    cli = _cli()
    if as_json and as_csv:
        cli._fail("choose one of --json or --csv", 1)
    try:
        since_at = parse_since(since)
    except ValueError as error:
        cli._fail(str(error), 1)
    if action is not None and action not in ACTIONS:
        cli._fail(f"--action must be one of {', '.join(ACTIONS)}", 1)
    found_value = None
    if found is not None:
        if found.lower() not in ("true", "false", "yes", "no"):
            cli._fail("--found must be true or false", 1)
        found_value = found.lower() in ("true", "yes")
    if feedback is not None and feedback not in FEEDBACK_CHOICES:
        cli._fail("--feedback must be up, down, any or none", 1)
    if status is not None and status not in STATUSES:
        cli._fail("--status must be answered, failed or pending", 1)
    records = query_logs(
        cli._settings(), since=since_at, action=action, found=found_value, feedback=feedback, status=status, limit=limit
    )
    if as_json:
        print(json.dumps(records, default=str))
        return
    if as_csv:
        sys.stdout.write(records_csv(records))
        return
    _print_log_table(records)


def _short(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_log_table(records: list[dict[str, Any]]) -> None:
    cli = _cli()
    table = Table(
        "id", "ref", "when (UTC)", "via", "question", "action", "found", "top", "sources", "fb", "ms", "status"
    )
    table.columns[4].overflow = "fold"
    for record in records:
        colour = {"answered": "green", "failed": "red", "pending": "yellow"}.get(record["status"], "white")
        fb = record["feedback"]
        top = record["top_score"]
        table.add_row(
            str(record["id"]),
            record["reference"],
            (record["created_at"] or "")[:16].replace("T", " "),
            record["surface"],
            _short(record["question"], 60),
            record["action"] or "-",
            "-" if record["found"] is None else ("yes" if record["found"] else "[yellow]no[/]"),
            f"{top:.2f}" if top is not None else "-",
            _short(", ".join(record["sources_used"]), 24),
            (f"👍{fb['up']}" if fb["up"] else "") + (f"👎{fb['down']}" if fb["down"] else ""),
            f"{record['latency_ms']:.0f}" if record["latency_ms"] is not None else "-",
            f"[{colour}]{record['status']}[/]",
        )
    cli.console.print(table)
    cli.console.print(f"{len(records)} rows (`policybot logs show ID` for one in full)")


def logs_show(
    ref: Annotated[str, typer.Argument(help="Log row id, or the reference users quote (e.g. Q7K2M9).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the record as one JSON object.")] = False,
) -> None:
    """Show one logged question in full."""
    cli = _cli()
    record = find_record(cli._settings(), ref)
    if record is None:
        cli._fail(f"no logged question {ref!r}", 1)
    elif as_json:
        print(json.dumps(record, default=str))
    else:
        _print_record(record)


def _print_record(record: dict[str, Any]) -> None:
    console = _cli().console
    console.print(
        f"[bold]#{record['id']}[/] ref {record['reference']} · {record['created_at']} · {record['surface']}"
        f" · asker {record['asker'] or '-'} · channel {record['channel'] or '-'} · [bold]{record['status']}[/]",
        highlight=False,
    )
    console.print(Panel(record["question"], title="question", expand=False), markup=False)
    if record["action"]:
        thresholds = record["thresholds"]
        console.print(
            f"action [bold]{record['action']}[/]: {record['action_text']} (evaluator {record['evaluator_version']},"
            f" upper {thresholds['upper']}, lower {thresholds['lower']})",
            highlight=False,
        )
    if record["scores"]:
        table = Table("score", "origin", "document", "section", title="evaluator scores")
        for score in sorted(record["scores"], key=lambda s: -s.get("score", 0.0)):
            table.add_row(
                f"{score.get('score', 0.0):.3f}",
                str(score.get("origin", "")),
                str(score.get("document", "")),
                _short(score.get("section"), 60),
            )
        console.print(table)
    if record["strips"]:
        table = Table("score", "document", "kept strip", title="refined evidence")
        table.columns[2].overflow = "fold"
        for strip in record["strips"]:
            table.add_row(f"{strip.get('score', 0.0):.3f}", str(strip.get("document", "")), str(strip.get("text", "")))
        console.print(table)
    for query in record["fallback_queries"]:
        console.print(f"fallback query to {query.get('source')}: {query.get('query')!r}", highlight=False, markup=False)
    if record["answer"]:
        console.print(Panel(record["answer"], title="answer", expand=False), markup=False)
    for citation in record["citations"]:
        origin = "knowledge base" if citation.get("origin") == "kb" else f"fallback: {citation.get('source')}"
        where = " — ".join(p for p in (citation.get("title"), citation.get("section")) if p)
        console.print(
            f"  [{citation.get('n')}] {citation.get('document')}: {where} ({origin})"
            + (f" {citation['url']}" if citation.get("url") else ""),
            highlight=False,
            markup=False,
        )
    fb = record["feedback"]
    timings = ", ".join(f"{k} {v:.0f} ms" for k, v in record["timings_ms"].items() if isinstance(v, (int, float)))
    latency = (
        f"latency {record['latency_ms']:.0f} ms" if record["latency_ms"] is not None else "no latency (never answered)"
    )
    console.print(
        f"feedback 👍 {fb['up']} 👎 {fb['down']} · {latency}" + (f" ({timings})" if timings else ""), highlight=False
    )
    notes = record["timings_ms"].get("notes") if isinstance(record["timings_ms"], dict) else None
    for note in notes or []:
        console.print(f"note: {note}", highlight=False, markup=False)
    if record["error"]:
        console.print(Panel(record["error"], title="error", border_style="red", expand=False), markup=False)


def stats(
    days: Annotated[int, typer.Option("--days", min=1, max=366, help="Days to cover, today included.")] = 7,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Action rates, abstention rate, feedback and latency p50/p95, per day."""
    cli = _cli()
    report = daily_stats(cli._settings(), days)
    if as_json:
        print(json.dumps(report))
        return
    table = Table(
        "day",
        "questions",
        "correct",
        "ambiguous",
        "incorrect",
        "abstained",
        "failed",
        "👍",
        "👎",
        "p50 ms",
        "p95 ms",
        title=f"last {days} days",
    )

    def row(label: str, values: dict[str, Any]) -> list[str]:
        rates = values["action_rates"]
        latency = [f"{values[k]:.0f}" if values[k] is not None else "-" for k in ("latency_p50_ms", "latency_p95_ms")]
        return [
            label,
            str(values["questions"]),
            *(f"{rates[a]:.0%}" for a in ACTIONS),
            f"{values['abstention_rate']:.0%}",
            str(values["failed"]),
            str(values["feedback_up"]),
            str(values["feedback_down"]),
            *latency,
        ]

    for day in report["per_day"]:
        table.add_row(*row(day["day"], day))
    table.add_row(*row("[bold]total[/]", report["total"]), end_section=True)
    cli.console.print(table)
    cli.console.print("rates are shares of answered questions; abstained = no approved source held the answer")


__all__ = ["register", "query_logs", "daily_stats", "stats_summary", "parse_since", "log_record"]
