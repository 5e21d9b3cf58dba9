"""Training an evaluator, a Celery task on the ingest queue: queued by the admin console, and
after the first ingestion (workers/ingest_tasks.py, POLICYBOT_AUTO_TRAIN). Like every task it is
not run again once its worker died during each of its first MAX_DELIVERIES deliveries."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from application import jobs
from core.config import get_settings
from core.errors import UserError
from slack_shared.client import describe_error
from workers.celery_app import (
    INGEST_HARD_LIMIT_S,
    INGEST_SOFT_LIMIT_S,
    DeliveredTooOften,
    celery_app,
    delivered_too_often,
    log_given_up,
)

if TYPE_CHECKING:
    from application.evaluators import Activation

log = logging.getLogger(__name__)

# Training runs under the ingest queue's time limit; the console refuses longer budgets.
MAX_TRAIN_MINUTES = (INGEST_SOFT_LIMIT_S - 60) / 60


@celery_app.task(
    bind=True, name="policybot.train_evaluator", soft_time_limit=INGEST_SOFT_LIMIT_S, time_limit=INGEST_HARD_LIMIT_S
)
def train_evaluator_task(
    self,
    minutes: float | None = None,
    activate: Activation = "if_better",
    job_id: int | None = None,
    with_reviews: bool = False,
    with_feedback: bool = False,
) -> dict[str, Any]:
    """Train an evaluator on the ingest queue (activated only if it beats cosine, unless told otherwise),
    optionally also on admins' reviews and askers' votes (as `policybot evaluator train --with-...`).

    With a `job_id` (the admin console), progress and the outcome are written to that job.
    Answer workers load the active evaluator when their process starts: restart them
    (or run `policybot worker` again) to use a newly activated version.
    """
    from application.evaluators import active_version, train_and_register  # torch: loaded by the task that trains

    settings = get_settings()
    if delivered_too_often(self):
        log_given_up(self, "training" + (f" job {job_id}" if job_id is not None else ""))
        if job_id is not None:
            jobs.fail_job(settings, job_id, str(DeliveredTooOften()))
        return {"error": str(DeliveredTooOften())}
    budget_minutes = min(minutes or settings.train_minutes, MAX_TRAIN_MINUTES)
    progress = None
    if job_id is not None:
        jobs.update_job(settings, job_id, status="running", progress={"phase": "preparing"})
        report = jobs.progress_reporter(settings, job_id)

        def progress(event: dict) -> None:
            report(
                {
                    "phase": event.get("phase", ""),
                    "done": event.get("step", 0),
                    "total": event.get("total"),
                    "loss": event.get("loss"),
                }
            )

    try:
        result = train_and_register(
            settings,
            budget_s=budget_minutes * 60,
            activate=activate,
            progress=progress,
            with_reviews=with_reviews,
            with_feedback=with_feedback,
        )
    except Exception as error:
        if job_id is not None:
            jobs.fail_job(settings, job_id, str(error) if isinstance(error, UserError) else describe_error(error))
        if isinstance(error, UserError):
            log.warning("training refused: %s", error)
            return {"error": str(error)}
        raise
    active = active_version(settings)
    outcome = {
        "version": result.version,
        "beats_cosine": result.beats_cosine,
        "thresholds": result.thresholds.to_dict(),
        "activated": active is not None and active.version == result.version,
        "auc": result.evaluator.auc,
        "cosine_auc": result.cosine.auc,
    }
    if job_id is not None:
        jobs.update_job(settings, job_id, status="done", result=outcome)
    return outcome
