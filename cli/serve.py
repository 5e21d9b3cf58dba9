"""`policybot serve --http|--socket` and `policybot worker`: run the Slack bot and the Celery workers.

The only place that wires the layers together: the bot gets the Celery enqueuer, the sweep
runs beside it, and in HTTP mode the admin console is mounted beside /slack/events."""

from __future__ import annotations

import logging
import os
from typing import Annotated

import typer

from cli.common import errors, fail, load_settings
from core import services
from core.config import Settings

QUEUES = ("answer", "ingest")


def _require(settings: Settings, *names: str) -> None:
    from bot.app import SlackConfigError, require_slack_settings  # Slack Bolt and SQLAlchemy: only for serve and worker

    try:
        require_slack_settings(settings, *names)
    except SlackConfigError as error:
        fail(str(error))


def serve(
    http: Annotated[
        bool,
        typer.Option("--http", help="HTTP mode: Slack posts events to /slack/events (needs SLACK_SIGNING_SECRET)."),
    ] = False,
    socket: Annotated[
        bool, typer.Option("--socket", help="Socket Mode: connect out to Slack (needs SLACK_APP_TOKEN).")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="Address to bind in HTTP mode.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port in HTTP mode.")] = 3000,
) -> None:
    """Run the Slack bot (listeners only: answers come from `policybot worker`)."""
    if http == socket:
        fail("choose one of --http or --socket", 1)
    settings = load_settings()
    if http:
        _require(settings, "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET")
    else:
        _require(settings, "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")
    logging.getLogger().setLevel(logging.INFO)
    logging.getLogger("slack_bolt").setLevel(logging.WARNING)
    from slack_bolt.error import BoltError  # Slack Bolt: only once the options are known good

    try:
        if http:
            serve_http(settings, host, port)
        else:
            serve_socket(settings)
    except BoltError as error:
        # e.g. auth.test rejected the token; Bolt's message names the error, never the token.
        fail(f"Slack refused to start the app: {error}")


def serve_http(settings: Settings, host: str, port: int) -> None:
    """The bot behind uvicorn, the admin console beside it (given POLICYBOT_CONSOLE_USERS), the sweep around it."""
    # Slack Bolt, Starlette, uvicorn, Celery and SQLAlchemy: only for serve, once its options are known good
    import uvicorn

    from bot.app import build_app, replay_event
    from bot.http import EVENTS_PATH, create_asgi_app
    from bot.recovery import QuestionSweeper
    from console.app import console_routes
    from workers.enqueuer import CeleryEnqueuer

    errors.print(
        f"policybot: HTTP mode on http://{host}:{port}{EVENTS_PATH} (Slack API {settings.slack_api_url})",
        highlight=False,
    )
    enqueuer = CeleryEnqueuer()
    bolt = build_app(settings, enqueuer)
    asgi = create_asgi_app(bolt, console_routes(settings) if settings.console_accounts else ())
    with QuestionSweeper(settings, enqueuer, replay=lambda body: replay_event(bolt, body)):
        uvicorn.run(asgi, host=host, port=port, log_level="info", access_log=False)


def serve_socket(settings: Settings) -> None:
    """The bot connected out to Slack over Socket Mode, the sweep around it."""
    # Slack Bolt, Celery and SQLAlchemy: only for serve, once its options are known good
    from bot import socket
    from bot.app import build_app, replay_event
    from bot.recovery import QuestionSweeper
    from workers.enqueuer import CeleryEnqueuer

    errors.print(f"policybot: Socket Mode (Slack API {settings.slack_api_url})", highlight=False)
    enqueuer = CeleryEnqueuer()
    app = build_app(settings, enqueuer, socket_mode=True)
    with QuestionSweeper(settings, enqueuer, replay=lambda body: replay_event(app, body)):
        socket.serve(settings, app)


def worker(
    queues: Annotated[str, typer.Option("--queues", "-Q", help="Comma-separated: answer, ingest.")] = "answer,ingest",
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-c",
            min=1,
            max=64,
            help="Worker processes.",
            show_default="cores / POLICYBOT_TORCH_THREADS, at most 4",
        ),
    ] = None,
    pool: Annotated[
        str, typer.Option("--pool", help="prefork (time limits, crash isolation) or solo (one process).")
    ] = "prefork",
    loglevel: Annotated[
        str, typer.Option("--loglevel", "-l", help="Celery's log level: debug, info, warning or error.")
    ] = "info",
) -> None:
    """Run a Celery worker for the answer and/or ingest queue (models load once per process)."""
    chosen = [q.strip() for q in queues.split(",") if q.strip()]
    unknown = sorted(set(chosen) - set(QUEUES))
    if not chosen or unknown:
        fail(
            f"--queues must name some of {', '.join(QUEUES)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
            1,
        )
    if pool not in ("prefork", "solo"):
        fail("--pool must be prefork or solo (models load in worker_process_init, which the threads pool skips)", 1)
    settings = load_settings()
    _require(settings, "SLACK_BOT_TOKEN")
    if concurrency is None:
        concurrency = max(1, min(4, (os.cpu_count() or 1) // settings.evaluator_threads))
    if pool == "solo":
        concurrency = 1
    from workers.celery_app import celery_app  # Celery and its broker client: only once the options are known good

    services.database_url(settings)  # started here if embedded: the worker's processes never start it

    name = f"policybot-{'-'.join(chosen)}-{os.getpid()}@%h"
    celery_app.worker_main(
        [
            "worker",
            "-Q",
            ",".join(chosen),
            "-c",
            str(concurrency),
            "--pool",
            pool,
            "--loglevel",
            loglevel,
            "-n",
            name,
            "--without-gossip",
            "--without-mingle",
        ]
    )


def register(app: typer.Typer) -> None:
    """Add serve and worker to the main CLI."""
    app.command()(serve)
    app.command()(worker)
