"""`policybot ingest` and `policybot docs list|show|remove|access`: the policy documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, get_args

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.common import AsJson, console, fail, load_settings
from core.config import Settings
from core.names import InvalidName, parse_channels, validate_collection

if TYPE_CHECKING:
    from core.models import Document
    from ingestion.ingest import IngestReport


docs_app = typer.Typer(help="Ingested documents.", no_args_is_help=True)

# -------------------------------------------------------------------- ingest


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
    settings = load_settings()
    missing = [str(path) for path in paths if not path.expanduser().exists()]
    if missing:
        fail(f"no such file or folder: {', '.join(missing)} (nothing was ingested)", 1)
    try:
        collection = validate_collection(collection or settings.default_collection)
        access = parse_channels(channels) if channels is not None else None
    except InvalidName as error:
        fail(str(error), 1)
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
    # LlamaIndex (ingestion/ingest.py): not at the top, for `--help`; here it is loaded already, by the ingest that made the report
    from ingestion.ingest import FileStatus

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

    documents = list_documents(load_settings(), collection, include_deleted)
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
        fail(f"no document {ref!r}" + (f" in collection {collection!r}" if collection else ""), 1)
    if len(matches) > 1:
        fail(f"{ref!r} names {len(matches)} documents; give its id or --collection", 1)
    return matches[0]


@docs_app.command("show")
def docs_show(ref: DocumentRef, collection: DocumentCollection = None, as_json: AsJson = False) -> None:
    """Show a document and its chunks."""
    from application.manage import document_json  # SQLAlchemy: reads the database
    from core import db  # SQLAlchemy and Alembic: reads the database
    from ingestion import store  # LlamaIndex's vector store holds the chunks

    settings = load_settings()
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

    settings = load_settings()
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
        fail(str(error), 1)
    from application.manage import ManageError, set_document_access  # SQLAlchemy: writes the database

    settings = load_settings()
    document = _find_document(settings, ref, collection)
    try:
        document = set_document_access(settings, document.id, allowed)
    except ManageError as error:
        fail(str(error), 1)
    console.print(f"{document.name}: " + (f"only {', '.join(allowed)}" if allowed else "everyone"))


def register(app: typer.Typer) -> None:
    """Add ingest and the docs group to the main CLI."""
    app.command()(ingest)
    app.add_typer(docs_app, name="docs")
