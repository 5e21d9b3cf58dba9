"""`policybot services up|down|status` and `policybot db upgrade`: the embedded PostgreSQL+pgvector and Redis, and the schema."""

from __future__ import annotations

import typer
from rich.table import Table

from cli.common import console, load_settings
from core import services
from core.services import ServiceStatus

services_app = typer.Typer(help="Manage the embedded PostgreSQL+pgvector and Redis.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)

# ------------------------------------------------------------------ services


@services_app.command("up")
def services_up() -> None:
    """Start the embedded services (nothing starts for DATABASE_URL / REDIS_URL)."""
    print_status(services.services_up(load_settings()))


@services_app.command("down")
def services_down() -> None:
    """Stop the embedded services; their data stays under POLICYBOT_HOME."""
    stopped = services.services_down(load_settings())
    console.print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))


@services_app.command("status")
def services_status() -> None:
    """Show whether each service is running and where."""
    statuses = services.services_status(load_settings())
    print_status(statuses)
    if not all(status.running for status in statuses):
        raise typer.Exit(1)


def print_status(statuses: list[ServiceStatus]) -> None:
    table = Table("service", "mode", "running", "where")
    for status in statuses:
        table.add_row(status.name, status.mode, "yes" if status.running else "[red]no[/]", status.url or status.detail)
    console.print(table)


# ------------------------------------------------------------------------ db


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply pending schema migrations (a no-op when up to date)."""
    from core import db  # SQLAlchemy and Alembic: only for commands that read or write the database

    settings = load_settings()
    engine = db.engine(settings)  # first use already upgrades; report what is there
    applied = db.upgrade(engine, settings)
    console.print(
        f"schema at revision {db.current_revision(settings)}"
        + (f" (applied {', '.join(applied)})" if applied else " (up to date)")
    )


def register(app: typer.Typer) -> None:
    """Add the services and db groups to the main CLI."""
    app.add_typer(services_app, name="services")
    app.add_typer(db_app, name="db")
