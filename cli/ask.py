"""`policybot ask`: one question through the pipeline, from the command line."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.panel import Panel

from cli.common import console, errors, fail, load_settings
from core.names import CHANNEL_ID, CHANNEL_ID_HINT
from core.wording import citation_place, describe_action
from crag.text import reader_text

if TYPE_CHECKING:
    from crag.types import Answer


# ----------------------------------------------------------------------- ask


def ask(
    question: Annotated[str, typer.Argument(help="The question, or '-' to read one question per line from stdin.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per question.")] = False,
    channel: Annotated[
        str | None,
        typer.Option(
            "--channel",
            help="Ask as if from this Slack channel, by ID "
            "(e.g. C012ABC3DE): documents restricted to it become visible.",
        ),
    ] = None,
) -> None:
    """Answer a question with the full CRAG pipeline, in this process."""
    settings = load_settings()
    from_stdin = question == "-"
    if not from_stdin:  # refuse before loading any model
        refusal = _question_refusal(question.strip(), settings.max_question_chars)
        if refusal:
            fail(refusal, 1)
    channel = (channel or "").strip() or None
    if channel is not None and not CHANNEL_ID.fullmatch(channel):
        fail(f"--channel takes a Slack channel ID, not {channel!r} ({CHANNEL_ID_HINT})", 1)
    from application import answering  # SQLAlchemy and the CRAG pipeline: only for a question that can be asked
    from application.runtime import get_runtime  # torch, transformers and LlamaIndex: loads the models
    from core import db  # SQLAlchemy: writes the question to the log

    runtime = get_runtime(settings)
    if runtime.loaded.is_cosine and not as_json:
        errors.print(f"[yellow]note:[/] using {runtime.loaded.description}")
    questions = enumerate((line.strip() for line in sys.stdin) if from_stdin else iter([question.strip()]), start=1)
    refused = 0
    for line_number, text in questions:
        if from_stdin and not text:
            continue  # blank lines separate questions
        refusal = _question_refusal(text, settings.max_question_chars)
        if refusal:  # only from stdin: say which line, and answer the rest
            errors.print(f"[bold red]error:[/] line {line_number}: {refusal}; skipped", highlight=False)
            refused += 1
            continue
        with db.session(settings) as session:
            recorded = answering.record_question(
                session, text, surface="cli", asker=os.environ.get("USER"), channel=channel
            )
        answer = answering.answer_question(settings, recorded.id)
        if as_json:
            print(json.dumps(answering.answer_json(answer)), flush=True)
        else:
            _print_answer(answer)
    if refused:
        raise typer.Exit(1)


def _question_refusal(text: str, max_chars: int) -> str | None:
    """Why a question cannot be asked as it stands (None: it can)."""
    if not text:
        return 'the question is empty; for example: policybot ask "How many PTO days carry over?"'
    if len(text) > max_chars:
        return f"question is {len(text)} characters; the limit is {max_chars} (POLICYBOT_MAX_QUESTION_CHARS)"
    return None


def _print_answer(answer: Answer) -> None:
    action = describe_action(answer.action.value, answer.found, answer.sources_used, answer.question_class)
    console.print(
        Panel(
            reader_text(answer.text),
            title=answer.question[:80],
            subtitle=f"{action} · {answer.action.value}",
            expand=False,
        )
    )
    for citation in answer.citations:
        where = citation_place(citation.title, citation.section)
        origin = "knowledge base" if citation.origin == "kb" else f"fallback: {citation.source}"
        console.print(
            f"  [{citation.n}] {citation.document}: {where} ({origin}, score {citation.score:.2f})", highlight=False
        )
    timings = ", ".join(f"{k} {v:.0f} ms" for k, v in answer.timings_ms.items())
    console.print(f"  [dim]{'; '.join(part for part in (answer.evaluator_version, timings) if part)}[/]")


def register(app: typer.Typer) -> None:
    """Add ask to the main CLI."""
    app.command()(ask)
