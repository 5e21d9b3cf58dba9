"""What every command of the CLI shares: where it prints, how it fails, and its settings."""

from __future__ import annotations

import sys
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from core.config import ConfigError, Settings, get_settings


def _flags_take_no_value_in_help() -> None:
    """Typer 0.29's rich help prints a value's type beside every flag, --help included (`--json <bool>`),
    as if it took one; its plain help does not (typer/core.py's get_help_record skips flags). The
    rich help here does the same: a flag shows no type. Older typers have no display_type_rich and
    print none already."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "flags_bare", False):
        return

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag or self.count else shown(self, ctx)

    display_type_rich.flags_bare = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_take_no_value_in_help()

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
