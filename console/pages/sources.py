"""The fallback sources page: allow-list a collection or an HTTP source, remove one, and try
a question to see what would be sent where (after redaction)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote_plus

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from application import manage
from console.web import Access, BadRequest, Console, url
from core.urls import mask_query


async def sources_page(c: Console, request: Request, test: dict[str, Any] | None = None) -> Response:
    rows = await c.call(manage.list_fallback_sources, c.settings)
    documents = await c.call(manage.list_documents, c.settings)
    return c.render(
        request,
        "sources.html",
        {"sources": rows, "collections": sorted({d.collection for d in documents}), "test": test},
    )


async def add_source(c: Console, request: Request) -> Response:
    kind = c.form_value(request, "kind")
    if kind not in ("collection", "http"):
        raise BadRequest("kind must be collection or http")
    try:
        timeout = float(c.form_value(request, "timeout") or 3.0)
        max_bytes = int(c.form_value(request, "max_bytes") or 1_000_000)
    except ValueError:
        raise BadRequest("timeout and max bytes must be numbers") from None
    name = c.form_value(request, "name")
    await c.call(
        manage.add_fallback_source,
        c.settings,
        name,
        collection=c.form_value(request, "collection") if kind == "collection" else None,
        url=c.form_value(request, "url") if kind == "http" else None,
        field_map=c.form_value(request, "field_map") or None,
        query_template=c.form_value(request, "query_template") or None,
        allowed_hosts=c.form_value(request, "allowed_hosts") or None,
        allow_private=c.checked(request, "allow_private"),
        timeout=timeout,
        max_bytes=max_bytes,
        open_web=c.checked(request, "open_web"),
    )
    return c.back(request, url("/sources"), f"allow-listed {name!r}")


async def remove_source(c: Console, request: Request) -> Response:
    name = c.form_value(request, "name")
    await c.call(manage.remove_fallback_source, c.settings, name)
    return c.back(request, url("/sources"), f"removed {name!r}")


async def test_source(c: Console, request: Request) -> Response:
    from application.runtime import fallback_preview  # torch and LlamaIndex: only for a preview

    settings = c.settings
    question = c.form_value(request, "question")
    if not question:
        raise BadRequest("type a question to test")
    names = [n.strip() for n in c.form_value(request, "asker_names").split(",") if n.strip()]
    plan = await c.call(fallback_preview, settings, question[: settings.max_question_chars], names)
    sent = []
    for source in plan.sources:
        request_url = (
            mask_query(
                source.request_url(plan.keywords, settings.fallback_limit),
                keep=(quote_plus(plan.keywords), str(settings.fallback_limit)),
            )
            if hasattr(source, "request_url") and plan.keywords
            else None
        )
        sent.append({"name": source.name, "kind": source.kind, "request": request_url})
    test = {
        "question": question,
        "asker_names": ", ".join(names),
        "question_class": plan.question_class,
        "redacted": plan.redacted,
        "keywords": plan.keywords,
        "sent": sent,
    }
    return await sources_page(c, request, test)


def routes(c: Console) -> list[tuple[Route, Access]]:
    return [
        c.route("/sources", sources_page, ["GET"]),
        c.route("/sources/add", add_source, ["POST"]),
        c.route("/sources/remove", remove_source, ["POST"]),
        c.route("/sources/test", test_source, ["POST"]),
    ]
