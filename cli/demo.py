"""`policybot demo`: the whole stack against a local fake Slack, in one command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.ask import ask
from cli.common import console, load_settings
from cli.documents import docs_list, ingest
from cli.evaluator import evaluator_train
from cli.fallback import fallback_list
from cli.services import print_status

if TYPE_CHECKING:
    from core.config import Settings
    from core.services import ServiceStatus


# ---------------------------------------------------------------------- demo

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"


DEMO_QUESTIONS = [
    "How long do I have to submit my expense report after a domestic business trip?",
    "When do payslips show up in Workday?",
    "Can I bring my dog to the office?",
]


def demo(
    train_minutes: Annotated[
        float, typer.Option("--train-minutes", min=0.1, help="Evaluator training budget when none exists yet.")
    ] = 2.0,
    slack: Annotated[
        bool, typer.Option("--slack/--no-slack", help="Run the local Slack loop (fake Slack, Bolt app, worker).")
    ] = True,
) -> None:
    """Run the whole local loop on the embedded stack with the sample policies; the services keep running after it."""
    from sqlalchemy import select  # SQLAlchemy: writes the database

    from application import evaluators  # torch: the demo trains an evaluator
    from core import db, services  # SQLAlchemy, torch, the embedded servers: the demo uses them all
    from core.models import FallbackSourceRow  # SQLAlchemy: the table

    settings = load_settings()
    console.rule("[bold]1. local stack")
    print_status(services.services_up(settings))
    try:
        console.rule("[bold]2. sample policies (knowledge base)")
        ingest(
            [SAMPLES_DIR / "policies"], collection=settings.default_collection, prune=True, channels=None, as_json=False
        )
        console.rule("[bold]3. HR portal export (allow-listed fallback collection)")
        ingest([SAMPLES_DIR / "hr-portal"], collection="hr-portal", prune=True, channels=None, as_json=False)
        with db.session(settings) as session:
            if not session.execute(
                select(FallbackSourceRow).where(FallbackSourceRow.name == "HR portal")
            ).scalar_one_or_none():
                session.add(FallbackSourceRow(name="HR portal", kind="collection", collection="hr-portal"))
        fallback_list(as_json=False)
        console.rule("[bold]4. what is in the knowledge base")
        docs_list(collection=None, include_deleted=False, as_json=False)
        console.rule("[bold]5. T5 retrieval evaluator")
        active = evaluators.active_version(settings)
        if active is not None:
            console.print(f"reusing active evaluator {active.version} (`policybot evaluator train` makes a new one)")
        elif evaluators.list_versions(settings):
            console.print(
                "evaluators are stored but none is active (none beat cosine similarity, or `evaluator activate "
                "cosine` chose it), so answers use cosine (`policybot evaluator list` shows them)"
            )
        else:
            evaluator_train(minutes=train_minutes, activate="if-better", as_json=False)
            _say_why_answers_use_cosine(settings, train_minutes)
        if slack:
            # devtools/demo.py loads Slack Bolt, Celery and httpx (the local Slack fake): only for the demo's Slack loop
            from devtools.demo import run_local_slack_loop

            console.rule("[bold]6. questions through the local Slack loop")
            run_local_slack_loop(settings, console, DEMO_QUESTIONS)
        else:
            console.rule("[bold]6. questions")
            for question in DEMO_QUESTIONS:
                ask(question, as_json=False, channel=None)
    finally:
        _say_services_still_run(services.services_status(settings))


def _say_why_answers_use_cosine(settings: Settings, minutes: float) -> None:
    """After the demo's short training (`minutes`): when the evaluator it trained is not activated,
    one line saying why, and how to train the real one."""
    from application import evaluators  # torch: as in demo()

    trained = next(iter(evaluators.list_versions(settings)), None)  # the newest: the one just trained
    if trained is None or trained.active:
        return
    # A budget too short for the policy-qa corpus trains on weak supervision alone, and such an
    # evaluator is not activated even when it beats cosine (application/evaluators.py, activation_decision).
    weak = str((trained.metrics or {}).get("gate", "")).startswith("weak supervision")
    why = (
        "trains on weak supervision alone, whose thresholds do not carry over to people's questions"
        if weak
        else "trains an evaluator that routes no better than cosine here"
    )
    console.print(
        f"[yellow]note:[/] the demo's {round(minutes, 1):g}-minute budget {why}, so it is stored but not activated "
        "and answers use cosine similarity. For the real one: `policybot evaluator pretrain` (once per machine, "
        "about an hour), then `policybot evaluator train`.",
        highlight=False,
    )


def _say_services_still_run(statuses: list[ServiceStatus]) -> None:
    """The demo leaves its embedded services up for the commands people try next; say so, and how to stop them."""
    running = [status for status in statuses if status.mode == "embedded" and status.running]
    if running:
        where = ", ".join(f"{status.name} ({status.detail})" for status in running)
        console.print(
            f"\n[bold]still running:[/] the embedded {where}. `policybot services down` stops them; "
            "their data stays, and the next command that needs them starts them again.",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    """Add demo to the main CLI."""
    app.command()(demo)
