"""What every command of the CLI shares: where it prints, how it fails, and its settings."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from core.config import ConfigError, Settings, get_settings

# Piped output (logs, CI, scripts) gets room for full file names instead of 80 columns.
console = Console(width=None if sys.stdout.isatty() else 140)
errors = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def load_settings() -> Settings:
    """The settings, or one line naming what is wrong with them."""
    try:
        return get_settings()
    except ConfigError as error:
        fail(str(error))


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one error line and exit with `code`."""
    errors.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
