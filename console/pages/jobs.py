"""Long work the pages queue (ingestion, training) as jobs on the `ingest` Celery queue, and
the job status the documents and evaluators pages poll."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from application import jobs
from console.web import Access, BadRequest, Console, session_of


def watched_job(request: Request) -> str:
    """The `job` to watch: a job id (digits), or nothing."""
    job = request.query_params.get("job", "")
    if job and not (job.isdigit() and len(job) <= 10):
        raise BadRequest("job must be a job id (a number)")
    return job


async def enqueue(c: Console, request: Request, kind: str, params: dict[str, Any], send: Callable[[int], Any]) -> int:
    """Record a job, then queue its task on the ingest queue; a queue that cannot be reached fails the job."""
    job_id = await c.call(jobs.create_job, c.settings, kind, params, session_of(request).user)
    try:
        await c.call(send, job_id)
    except Exception as error:
        await c.call(jobs.fail_job, c.settings, job_id, f"could not queue the job: {error}")
        raise BadRequest(f"could not queue the {kind} job (is Redis running?): {type(error).__name__}", 503) from None
    return job_id


async def job(c: Console, request: Request) -> Response:
    found = await c.call(jobs.get_job, c.settings, request.path_params["id"])
    if found is None:
        return JSONResponse({"error": "no such job"}, status_code=404)
    return JSONResponse(found)


def routes(c: Console) -> list[tuple[Route, Access]]:
    return [c.route("/api/jobs/{id:int}", job, ["GET"], access="data")]
