"""`policybot fallback add|list|remove`: the allow-listed fallback sources."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from cli.common import AsJson, console, fail, load_settings

# ------------------------------------------------------------------ fallback

fallback_app = typer.Typer(help="Allow-listed fallback sources (nothing else is ever queried).", no_args_is_help=True)


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
            load_settings(),
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
        fail(str(error), 1)
    console.print(f"allow-listed {name!r}: " + (f"collection {collection}" if collection else f"{url}"))


@fallback_app.command("list")
def fallback_list(as_json: AsJson = False) -> None:
    """List the allow-listed fallback sources."""
    from application.manage import fallback_source_json, list_fallback_sources  # SQLAlchemy: reads the database

    rows = list_fallback_sources(load_settings())
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
        remove_fallback_source(load_settings(), name)
    except ManageError as error:
        fail(str(error), 1)
    console.print(f"removed {name!r}")


def register(app: typer.Typer) -> None:
    """Add the fallback group to the main CLI."""
    app.add_typer(fallback_app, name="fallback")
