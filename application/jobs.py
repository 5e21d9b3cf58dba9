"""Background jobs started from the admin console (ingestion, evaluator training) and their progress.

A job row is created before its Celery task is queued; the task (on the `ingest` queue)
marks it running, reports progress into it, and finishes it as done or failed. The
console polls `progress` to show how far along it is. Celery keeps no results here
(`task_ignore_result`), so this table is where the outcome lives.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from core import db
from core.config import Settings
from core.models import Job

JOB_KINDS = ("ingest", "train")


def create_job(settings: Settings, kind: str, params: dict[str, Any], created_by: str | None = None) -> int:
    if kind not in JOB_KINDS:
        raise ValueError(f"unknown job kind {kind!r}")
    with db.session(settings) as session:
        job = Job(kind=kind, status="queued", params=params, progress={}, created_by=created_by)
        session.add(job)
        session.flush()
        return job.id


def update_job(settings: Settings, job_id: int, **values: Any) -> None:
    """Set any of status, progress, result, error (and the update time)."""
    with db.session(settings) as session:
        job = session.get(Job, job_id)
        if job is None:
            return
        for key, value in values.items():
            setattr(job, key, value)
        job.updated_at = datetime.now(UTC)


def fail_job(settings: Settings, job_id: int, error: str) -> None:
    update_job(settings, job_id, status="failed", error=error[:4000])


def progress_reporter(settings: Settings, job_id: int, every_s: float = 1.0) -> Callable[[dict[str, Any]], None]:
    """A callback that writes progress at most once per `every_s` (always the final step)."""
    last = [0.0]

    def report(progress: dict[str, Any]) -> None:
        now = time.monotonic()
        final = progress.get("total") is not None and progress.get("done") == progress.get("total")
        if final or now - last[0] >= every_s:
            last[0] = now
            update_job(settings, job_id, status="running", progress=progress)

    return report


def job_json(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "status": job.status,
        "params": job.params,
        "progress": job.progress,
        "result": job.result,
        "error": job.error,
        "created_by": job.created_by,
        "created_at": job.created_at.isoformat() if job.created_at else None,
        "updated_at": job.updated_at.isoformat() if job.updated_at else None,
    }


def get_job(settings: Settings, job_id: int) -> dict[str, Any] | None:
    with db.session(settings) as session:
        job = session.get(Job, job_id) if 0 < job_id < 2**31 else None
        return job_json(job) if job is not None else None


def recent_jobs(settings: Settings, kind: str | None = None, limit: int = 10) -> list[dict[str, Any]]:
    with db.session(settings) as session:
        query = select(Job).order_by(Job.id.desc()).limit(limit)
        if kind:
            query = query.where(Job.kind == kind)
        return [job_json(job) for job in session.execute(query).scalars()]
