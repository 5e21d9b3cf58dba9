"""`policybot logs [show ID]` and `policybot stats`: review the action log.

The queries live in application/review.py, shared with the bot's admin `stats` reply and
the admin console, so all three show the same numbers. That module imports SQLAlchemy: each
command imports it once its options are checked, so that `--help` answers at once
(tests/test_cli_startup.py); the options' values come from application/action_log.py."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table

from application.action_log import ACTIONS, FEEDBACK_CHOICES, STATUSES, parse_since, records_csv
from cli.common import console, fail, load_settings
from core.wording import citation_place, path_end, shorten
from crag.text import reader_text


def logs(
    ctx: typer.Context,
    since: Annotated[str, typer.Option("--since", help="How far back: 7d, 12h, 30m, 2w or a date.")] = "7d",
    action: Annotated[str | None, typer.Option("--action", help="correct, ambiguous or incorrect.")] = None,
    found: Annotated[
        str | None, typer.Option("--found", help="true (answered from a source) or false (abstained).")
    ] = None,
    feedback: Annotated[str | None, typer.Option("--feedback", help="up, down, any or none.")] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status", help="What happened to the asker: answered, abstained, apologised, failed or pending."
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="Newest N rows.")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array with every field.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="CSV on stdout.")] = False,
) -> None:
    """Review logged actions: question, scores, action, sources, fallback queries, answer, feedback, latency."""
    if ctx.invoked_subcommand is not None:
        return
    if as_json and as_csv:
        fail("choose one of --json or --csv", 1)
    try:
        since_at = parse_since(since)
    except ValueError as error:
        fail(str(error), 1)
    if action is not None and action not in ACTIONS:
        fail(f"--action must be one of {', '.join(ACTIONS)}", 1)
    found_value = None
    if found is not None:
        if found.lower() not in ("true", "false", "yes", "no"):
            fail("--found must be true or false", 1)
        found_value = found.lower() in ("true", "yes")
    if feedback is not None and feedback not in FEEDBACK_CHOICES:
        fail("--feedback must be up, down, any or none", 1)
    if status is not None and status not in STATUSES:
        fail(f"--status must be one of {', '.join(STATUSES)}", 1)
    from application.review import query_logs  # SQLAlchemy: see the module docstring

    records = query_logs(
        load_settings(), since=since_at, action=action, found=found_value, feedback=feedback, status=status, limit=limit
    )
    if as_json:
        print(json.dumps(records, default=str))
        return
    if as_csv:
        sys.stdout.write(records_csv(records))
        return
    _print_log_table(records)


STATUS_COLOURS = {"answered": "green", "abstained": "yellow", "apologised": "red", "failed": "red", "pending": "yellow"}


def _print_log_table(records: list[dict[str, Any]]) -> None:
    table = Table(
        "id", "ref", "when (UTC)", "via", "question", "action", "found", "top", "sources", "fb", "ms", "status"
    )
    table.columns[4].overflow = "fold"
    for record in records:
        colour = STATUS_COLOURS.get(record["status"], "white")
        fb = record["feedback"]
        top = record["top_score"]
        table.add_row(
            str(record["id"]),
            record["reference"],
            (record["created_at"] or "")[:16].replace("T", " "),
            record["surface"],
            shorten(record["question"], 60),
            record["action"] or "-",
            "-" if record["found"] is None else ("yes" if record["found"] else "[yellow]no[/]"),
            f"{top:.2f}" if top is not None else "-",
            shorten(", ".join(record["sources_used"]), 24),
            (f"👍{fb['up']}" if fb["up"] else "") + (f"👎{fb['down']}" if fb["down"] else ""),
            f"{record['latency_ms']:.0f}" if record["latency_ms"] is not None else "-",
            f"[{colour}]{record['status']}[/]",
        )
    console.print(table)
    console.print(f"{len(records)} rows (`policybot logs show ID` for one in full)")


def logs_show(
    ref: Annotated[str, typer.Argument(help="Log row id, or the reference users quote (e.g. Q7K2M9).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the record as one JSON object.")] = False,
) -> None:
    """Show one logged question in full."""
    from application.review import find_record  # SQLAlchemy: see the module docstring

    record = find_record(load_settings(), ref)
    if record is None:
        fail(f"no logged question {ref!r}", 1)
    elif as_json:
        print(json.dumps(record, default=str))
    else:
        _print_record(record)


def _threshold(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"  # 3 decimals, as the scores and the console show them


def _print_record(record: dict[str, Any]) -> None:
    console.print(
        f"[bold]#{record['id']}[/] ref {record['reference']} · {record['created_at']} · {record['surface']}"
        f" · asker {record['asker'] or '-'} · channel {record['channel'] or '-'} · [bold]{record['status']}[/]"
        + (f" (reply {record['delivery']})" if record["delivery"] else ""),
        highlight=False,
    )
    console.print(Panel(record["question"], title="question", expand=False), markup=False)
    if record["action"]:
        thresholds = record["thresholds"]
        console.print(
            f"action [bold]{record['action']}[/]: {record['action_text']} (evaluator {record['evaluator_version']},"
            f" upper {_threshold(thresholds['upper'])}, lower {_threshold(thresholds['lower'])})",
            highlight=False,
        )
    if record["scores"]:
        table = Table("score", "origin", "document", "section", title="evaluator scores")
        for score in sorted(record["scores"], key=lambda s: -s.get("score", 0.0)):
            table.add_row(
                f"{score.get('score', 0.0):.3f}",
                str(score.get("origin", "")),
                str(score.get("document", "")),
                path_end(score.get("section"), 60),
            )
        console.print(table)
    if record["strips"]:
        table = Table("score", "document", "kept strip", title="refined evidence")
        table.columns[2].overflow = "fold"
        for strip in record["strips"]:
            table.add_row(
                f"{strip.get('score', 0.0):.3f}",
                str(strip.get("document", "")),
                reader_text(str(strip.get("text", ""))),
            )
        console.print(table)
    for query in record["fallback_queries"]:
        console.print(f"fallback query to {query.get('source')}: {query.get('query')!r}", highlight=False, markup=False)
    if record["answer"]:
        console.print(Panel(reader_text(record["answer"]), title="answer", expand=False), markup=False)
    for citation in record["citations"]:
        origin = "knowledge base" if citation.get("origin") == "kb" else f"fallback: {citation.get('source')}"
        where = citation_place(citation.get("title"), citation.get("section"))
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
    from application.review import daily_stats  # SQLAlchemy: see the module docstring

    report = daily_stats(load_settings(), days)
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
    console.print(table)
    console.print("rates are shares of answered questions; abstained = no approved source held the answer")


def register(app: typer.Typer) -> None:
    """Add the logs group and stats to the main CLI."""
    logs_app = typer.Typer(
        help="Review the action log: questions, scores, actions, sources, answers, feedback.",
        invoke_without_command=True,
    )
    logs_app.callback(invoke_without_command=True)(logs)
    logs_app.command("show")(logs_show)
    app.add_typer(logs_app, name="logs")
    app.command()(stats)
