"""The documents page: the collections and their documents, uploads (checked whole before
any file is written, then queued for ingestion), re-ingest, remove, and who may see each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from application import jobs, manage
from application.uploads import check_size, checked_name, size_limit
from console.pages.jobs import enqueue, watched_job
from console.web import FORM_BODY_MAX, MAX_UPLOAD_FILES, Access, BadRequest, Console, url
from core.names import validate_collection
from workers.ingest_tasks import ingest_job_task


def upload_body_limit(c: Console) -> int:
    return int(c.settings.max_file_mb * 1024 * 1024) * MAX_UPLOAD_FILES + FORM_BODY_MAX


async def documents(c: Console, request: Request) -> Response:
    listed = await c.call(manage.list_documents, c.settings)
    collections: dict[str, list[Any]] = {}
    for document in listed:
        collections.setdefault(document.collection, []).append(document)
    recent = await c.call(jobs.recent_jobs, c.settings, "ingest", 5)
    fallback = {row.collection for row in await c.call(manage.list_fallback_sources, c.settings) if row.collection}
    return c.render(
        request,
        "documents.html",
        {
            "collections": collections,
            "jobs": recent,
            "fallback_collections": fallback,
            "default_collection": c.settings.default_collection,
            "max_mb": c.settings.max_file_mb,
            "watch": watched_job(request),
        },
    )


async def upload(c: Console, request: Request) -> Response:
    form = request.state.form
    collection = c.form_value(request, "collection") or c.settings.default_collection
    validate_collection(collection)  # InvalidName and ManageError are UserErrors: view answers 400
    channels = manage.parse_channels(c.form_value(request, "channels"))
    uploads = [item for item in form.getlist("files") if isinstance(item, UploadFile) and item.filename]
    if not uploads:
        raise BadRequest("choose at least one file to upload")
    checked: list[tuple[str, UploadFile]] = []
    for item in uploads:  # every file is checked before any is written (UploadRefused: 415 or 413)
        name = checked_name(item.filename or "upload")
        if any(name == seen for seen, _ in checked):
            raise BadRequest(f"{name}: chosen twice; upload each file once")
        size = item.size if item.size is not None else len(await item.read(size_limit(c.settings) + 1))
        check_size(c.settings, name, size)
        if not size:
            raise BadRequest(f"{name}: the file is empty")
        checked.append((name, item))
    folder = c.settings.home / "uploads" / collection
    folder.mkdir(parents=True, exist_ok=True)
    saved: list[str] = []
    for name, item in checked:
        await item.seek(0)
        partial = folder / f".{name}.part"
        with partial.open("wb") as handle:
            while chunk := await item.read(1024 * 1024):
                await c.call(handle.write, chunk)
        partial.replace(folder / name)
        saved.append(str(folder / name))
    job_id = await queue_ingest(c, request, saved, collection, channels or None)
    return c.back(
        request,
        url("/documents", job=job_id),
        f"{len(saved)} file(s) queued for ingestion into {collection} (job {job_id})",
    )


async def queue_ingest(
    c: Console, request: Request, paths: list[str], collection: str, channels: list[str] | None
) -> int:
    params = {"paths": paths, "collection": collection, "channels": channels}
    return await enqueue(c, request, "ingest", params, lambda job_id: ingest_job_task.delay(job_id))


async def chosen_document(c: Console, request: Request) -> Any:
    document = await c.call(manage.get_document, c.settings, request.path_params["id"])
    if document is None:
        raise BadRequest(f"no document {request.path_params['id']}", 404)
    return document


async def reingest(c: Console, request: Request) -> Response:
    document = await chosen_document(c, request)
    if not Path(document.source).is_file():
        raise BadRequest(f"{document.name}: its source file {document.source} is gone; upload it again", 409)
    # Passing the access list re-processes even an unchanged file (and keeps who may see it).
    job_id = await queue_ingest(
        c, request, [document.source], document.collection, list(document.access_channels or [])
    )
    return c.back(request, url("/documents", job=job_id), f"re-ingesting {document.name} (job {job_id})")


async def remove(c: Console, request: Request) -> Response:
    from ingestion.ingest import remove_document  # LlamaIndex: only for the pages that ingest

    document = await chosen_document(c, request)
    await c.call(remove_document, c.settings, document.id)
    return c.back(request, url("/documents"), f"removed {document.name} from {document.collection}")


async def access(c: Console, request: Request) -> Response:
    document = await chosen_document(c, request)
    channels = manage.parse_channels(c.form_value(request, "channels"))
    await c.call(manage.set_document_access, c.settings, document.id, channels)
    who = ", ".join(channels) if channels else "everyone"
    return c.back(request, url("/documents"), f"{document.name}: visible to {who}")


def routes(c: Console) -> list[tuple[Route, Access]]:
    return [
        c.route("/documents", documents, ["GET"]),
        c.route("/documents/upload", upload, ["POST"], body_limit=upload_body_limit(c)),
        c.route("/documents/{id:int}/reingest", reingest, ["POST"]),
        c.route("/documents/{id:int}/remove", remove, ["POST"]),
        c.route("/documents/{id:int}/access", access, ["POST"]),
    ]
