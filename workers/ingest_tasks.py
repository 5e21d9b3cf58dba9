"""The ingest queue's Celery tasks: ingest the files an admin sent the bot in Slack (fetched with
the bot token), and a console job's files (uploads or a re-ingest).

Like every task they take plain IDs and are idempotent, because delivery is at least once
(acks_late): an upload already replied to, or a job already finished, is not ingested again. A
task whose worker died during each of its first MAX_DELIVERIES deliveries (killed for memory,
say) is not run again: the upload or job gets the usual failure reply, and one error line goes
in the log (`delivered_too_often`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from application import jobs
from application.uploads import UploadRefused, check_size, checked_name
from core.config import get_settings, secret_value
from core.errors import UserError
from slack_shared import blocks, state
from slack_shared.client import describe_error, web_client
from slack_shared.progress import clear_progress
from workers.celery_app import (
    INGEST_HARD_LIMIT_S,
    INGEST_SOFT_LIMIT_S,
    DeliveredTooOften,
    celery_app,
    delivered_too_often,
    log_given_up,
)
from workers.retries import RETRY_COUNTDOWNS_S
from workers.train_tasks import train_evaluator_task

if TYPE_CHECKING:
    from slack_sdk import WebClient

    from core.config import Settings

log = logging.getLogger(__name__)


class DownloadError(RuntimeError):
    pass


def _trusted_file_url(settings: Settings, url: str) -> bool:
    """Only send the bot token to Slack's own file hosts (or to the configured API host: a local fake)."""
    host = (urlsplit(url).hostname or "").lower()
    api_host = (urlsplit(settings.slack_api_url).hostname or "").lower()
    return urlsplit(url).scheme in ("https", "http") and (
        host == api_host or host == "slack.com" or host.endswith(".slack.com") or host.endswith(".slack-edge.com")
    )


def download_file(client: WebClient, settings: Settings, file_id: str, folder: Path) -> Path:
    """Fetch an uploaded file with the bot token into `folder` (same name: a re-upload updates the document)."""

    info: dict[str, Any] = client.files_info(file=file_id)["file"]
    name = checked_name(str(info.get("name") or info.get("title") or file_id))  # UploadRefused: not downloaded
    check_size(settings, name, int(info.get("size") or 0))
    url = str(info.get("url_private_download") or info.get("url_private") or "")
    if not url or not _trusted_file_url(settings, url):
        raise DownloadError(f"{name}: Slack gave no downloadable URL on a Slack host")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    partial = folder / f".{name}.part"
    with httpx.stream(
        "GET",
        url,
        headers={"Authorization": f"Bearer {secret_value(settings.slack_bot_token)}"},
        follow_redirects=True,
        timeout=60,
    ) as response:
        if response.status_code != 200:
            raise DownloadError(f"{name}: download failed with HTTP {response.status_code}")
        if "text/html" in response.headers.get("content-type", "") and target.suffix.lower() not in (".html", ".htm"):
            raise DownloadError(f"{name}: Slack returned a sign-in page; does the app have the files:read scope?")
        size = 0
        with partial.open("wb") as out:
            for chunk in response.iter_bytes():
                size += len(chunk)
                check_size(settings, name, size)
                out.write(chunk)
    partial.replace(target)
    return target


@celery_app.task(
    bind=True,
    name="policybot.ingest_files",
    max_retries=2,
    soft_time_limit=INGEST_SOFT_LIMIT_S,
    time_limit=INGEST_HARD_LIMIT_S,
)
def ingest_file_task(
    self,
    claim_id: int,
    file_ids: Sequence[str],
    channel: str,
    thread_ts: str,
    user: str,
    collection: str | None = None,
) -> str:
    """Ingest files an admin sent the bot in a DM and confirmed, into the collection the offer
    named, then say in the DM what happened; the 👀 goes whatever the outcome. `user`: who
    confirmed, as the bot saw it (the claim's record of it is what counts)."""

    settings = get_settings()
    too_often = delivered_too_often(self)
    claim = state.get_claim(settings, claim_id)
    if claim is not None and claim.reply_ts:
        return "already replied"
    client = web_client(settings)
    # Who may add documents is the bot's decision (POLICYBOT_ADMINS there), recorded with the
    # message when an admin confirmed it: the worker does not decide again, nor trust the queue alone.
    if claim is None or not claim.confirmed_by:
        message, outcome = blocks.upload_refused_message(), "refused"
    elif too_often:
        log_given_up(self, f"upload {claim_id}")
        message, outcome = blocks.upload_result_message([f"ingestion failed: {DeliveredTooOften()}"], False), "failed"
    else:
        log.info("ingesting upload %s, confirmed by admin %s", claim_id, claim.confirmed_by)
        try:
            lines, ok = _ingest_uploads(client, settings, file_ids, collection or settings.default_collection)
        except Exception as error:
            if self.request.retries < self.max_retries:
                raise self.retry(exc=error, countdown=RETRY_COUNTDOWNS_S[self.request.retries]) from None
            log.error("ingesting upload %s failed: %s", claim_id, describe_error(error), exc_info=True)
            lines, ok = [f"ingestion failed: {describe_error(error)}"], False
        message, outcome = blocks.upload_result_message(lines, ok), "ingested" if ok else "failed"
    try:
        posted = client.chat_postMessage(channel=channel, thread_ts=thread_ts, **message)
        if claim is not None:
            state.set_reply_ts(settings, claim_id, str(posted["ts"]))
    finally:
        clear_progress(
            client,
            "assistant" if state.is_assistant_thread(settings, channel, thread_ts) else "dm",
            channel,
            thread_ts,
            claim.message_ts if claim is not None else None,
        )
    return outcome


def _ingest_uploads(
    client: WebClient, settings: Settings, file_ids: Sequence[str], collection: str
) -> tuple[list[str], bool]:
    from ingestion.ingest import ingest_paths  # LlamaIndex: loaded by the tasks that ingest, not by whoever queues them

    folder = settings.home / "uploads" / collection
    paths: list[Path] = []
    lines: list[str] = []
    for file_id in file_ids:
        try:
            paths.append(download_file(client, settings, file_id, folder))
        except (DownloadError, UploadRefused) as error:
            lines.append(str(error))
    ok = not lines
    if paths:
        report = ingest_paths(settings, paths, collection=collection)
        for item in report.files:
            if item.status == "failed":
                ok = False
                lines.append(f"{item.document}: {item.detail}")
            elif item.status == "skipped":
                lines.append(f"{item.document}: skipped, {item.detail}")
            else:
                lines.append(f"{item.document}: {item.status}, {item.chunks} chunks in collection {collection}")
        if report.count("added") or report.count("updated"):
            lines.append("New questions are answered from it right away.")
            if _start_first_training(settings):
                lines.append(
                    "No evaluator is trained yet: training one in the background "
                    "(answers use cosine similarity until it is ready)."
                )
    return lines, ok


def _start_first_training(settings: Settings) -> bool:
    """After the first ingestion, train an evaluator on the ingest queue (POLICYBOT_AUTO_TRAIN)."""
    from application import evaluators  # torch: loaded by the tasks that train, not by whoever queues them

    if not settings.auto_train or evaluators.list_versions(settings):
        return False
    if len(evaluators.corpus_chunks(settings)) < evaluators.MIN_CHUNKS:
        return False
    train_evaluator_task.delay()
    return True


@celery_app.task(
    bind=True,
    name="policybot.ingest_job",
    max_retries=0,
    soft_time_limit=INGEST_SOFT_LIMIT_S,
    time_limit=INGEST_HARD_LIMIT_S,
)
def ingest_job_task(self, job_id: int) -> str:
    """Ingest the files of a console job (uploads or a re-ingest), reporting progress per file."""
    from ingestion.ingest import ingest_paths  # LlamaIndex: loaded by the tasks that ingest, not by whoever queues them

    settings = get_settings()
    too_often = delivered_too_often(self)
    job = jobs.get_job(settings, job_id)
    if job is None:
        log.warning("ingest job %s does not exist", job_id)
        return "missing"
    if job["status"] in ("done", "failed"):
        return "already finished"  # a redelivery after the job completed
    if too_often:
        log_given_up(self, f"ingest job {job_id}")
        jobs.fail_job(settings, job_id, str(DeliveredTooOften()))
        return "failed"
    params = job["params"]
    paths = [Path(p) for p in params.get("paths", [])]
    total = len(paths)
    jobs.update_job(settings, job_id, status="running", progress={"done": 0, "total": total, "files": []})
    report_progress = jobs.progress_reporter(settings, job_id, every_s=0.5)
    files: list[dict[str, Any]] = []

    def show(step) -> None:
        files.append(
            {
                "document": step.result.document,
                "status": step.result.status,
                "chunks": step.result.chunks,
                "detail": step.result.detail,
            }
        )
        report_progress({"done": step.done, "total": step.total, "files": list(files)})

    try:
        report = ingest_paths(
            settings,
            paths,
            collection=params.get("collection"),
            access_channels=params.get("channels"),
            on_progress=show,
        )
    except Exception as error:
        message = str(error) if isinstance(error, UserError) else describe_error(error)
        log.error("ingest job %s failed: %s", job_id, message, exc_info=not isinstance(error, UserError))
        jobs.fail_job(settings, job_id, message)
        return "failed"
    result = report.as_json() | {"collection": report.collection, "seconds": round(report.seconds, 1)}
    if report.failed:
        jobs.update_job(
            settings,
            job_id,
            status="failed",
            result=result,
            error="; ".join(f"{Path(item.path).name}: {item.detail}" for item in report.failed),
        )
        return "failed"
    jobs.update_job(settings, job_id, status="done", result=result)
    return "ingested"
