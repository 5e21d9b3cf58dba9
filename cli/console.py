"""`policybot console`: serve the admin console; `policybot console hash-password`: make a password hash."""

from __future__ import annotations

import getpass
import logging
import sys
from typing import Annotated

import typer

from cli.common import errors, fail, load_settings
from console.auth import hash_password as make_hash

console_app = typer.Typer(
    help="The admin web console (activity, health, documents, sources, evaluator).", invoke_without_command=True
)


@console_app.callback(invoke_without_command=True)
def console(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8080,
) -> None:
    """Serve the admin console at http://HOST:PORT/admin (sign in with POLICYBOT_CONSOLE_USERS)."""
    if ctx.invoked_subcommand is not None:
        return
    from console.app import PREFIX, serve  # Starlette, uvicorn and SQLAlchemy: only to serve the console

    settings = load_settings()
    if not settings.console_accounts:
        fail("no console users: set POLICYBOT_CONSOLE_USERS=name:hash (hash from `policybot console hash-password`)")
    logging.getLogger().setLevel(logging.INFO)
    errors.print(f"policybot: admin console on http://{host}:{port}{PREFIX}/", highlight=False)
    serve(settings, host=host, port=port)


@console_app.command("hash-password")
def hash_password(
    user: Annotated[str, typer.Option("--user", help="Sign-in name to print with the hash.")] = "admin",
) -> None:
    """Read a password (twice, not echoed; or one line from a pipe) and print a POLICYBOT_CONSOLE_USERS entry."""
    if ":" in user or "," in user or not user.strip():
        fail("the user name may not be empty or contain ':' or ','", 1)
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            fail("the passwords differ", 1)
    else:
        password = sys.stdin.readline().rstrip("\n")
    try:
        hashed = make_hash(password, load_settings().console_scrypt_n)
    except ValueError as error:
        fail(str(error), 1)
    print(f"{user.strip()}:{hashed}")


def register(app: typer.Typer) -> None:
    """Add the console group to the main CLI."""
    app.add_typer(console_app, name="console")
