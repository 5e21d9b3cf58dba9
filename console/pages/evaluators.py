"""The evaluators page: the trained versions, activating one, recalibrating its thresholds
from labelled questions, and queueing a training run."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from application import jobs
from console.pages.jobs import enqueue, watched_job
from console.web import Access, BadRequest, Console, url
from workers.train_tasks import MAX_TRAIN_MINUTES, train_evaluator_task


async def evaluators_page(c: Console, request: Request) -> Response:
    from application import evaluators  # torch: only for the evaluator pages

    versions = await c.call(evaluators.list_versions, c.settings)
    recent = await c.call(jobs.recent_jobs, c.settings, "train", 5)
    return c.render(
        request,
        "evaluators.html",
        {
            "versions": versions,
            "jobs": recent,
            "train_minutes": c.settings.train_minutes,
            "watch": watched_job(request),
        },
    )


async def activate(c: Console, request: Request) -> Response:
    from application import evaluators  # torch: only for the evaluator pages

    version = c.form_value(request, "version")
    await c.call(evaluators.activate_version, c.settings, version)
    return c.back(
        request,
        url("/evaluators"),
        f"active: {version}. Restart the answer workers to use it (`policybot worker`).",
    )


async def recalibrate(c: Console, request: Request) -> Response:
    """A version's upper/lower thresholds from labelled questions: a preview, or stored with "apply"."""
    from application import calibration  # torch: only for the evaluator pages

    from_reviews, from_feedback = c.checked(request, "from_reviews"), c.checked(request, "from_feedback")
    if not (from_reviews or from_feedback):
        raise BadRequest("tick reviews, 👍/👎 votes or both: the labels to calibrate on")
    sources = calibration.LabelSources(from_reviews, from_feedback)
    apply = c.form_value(request, "apply") == "yes"
    version = c.form_value(request, "version") or None
    proposal = await c.call(calibration.propose_from_reviews, c.settings, version, sources=sources)
    notes = await c.call(calibration.apply_proposal, c.settings, proposal) if apply else []
    change = ", ".join(
        f"{key} {getattr(proposal.current, key):.3f} → {getattr(proposal.proposed, key):.3f}"
        for key in ("upper", "lower")
    )
    counts = f"{proposal.n_present} answer-present and {proposal.n_absent} answer-absent questions"
    if apply:
        message = (
            f"{proposal.version}: stored {change} (from {counts}). "
            "Restart the answer workers to use them." + "".join(f" {note}" for note in notes)
        )
    else:
        message = f"{proposal.version}: would set {change} (from {counts}). Preview only: nothing changed."
    return c.back(request, url("/evaluators"), message)


async def train(c: Console, request: Request) -> Response:
    activate = c.form_value(request, "activate", "if_better")
    if activate not in ("if_better", "always", "never"):
        raise BadRequest("activate must be if_better, always or never")
    try:
        minutes = float(c.form_value(request, "minutes") or c.settings.train_minutes)
    except ValueError:
        raise BadRequest("minutes must be a number") from None
    if not 0 < minutes <= MAX_TRAIN_MINUTES:
        raise BadRequest(
            f"minutes must be more than 0 and at most {MAX_TRAIN_MINUTES:g} (the training task's time limit)"
        )
    with_reviews, with_feedback = c.checked(request, "with_reviews"), c.checked(request, "with_feedback")
    params = {
        "minutes": minutes,
        "activate": activate,
        "with_reviews": with_reviews,
        "with_feedback": with_feedback,
    }
    job_id = await enqueue(
        c,
        request,
        "train",
        params,
        lambda job_id: train_evaluator_task.delay(minutes, activate, job_id, with_reviews, with_feedback),
    )
    return c.back(request, url("/evaluators", job=job_id), f"training queued (job {job_id})")


def routes(c: Console) -> list[tuple[Route, Access]]:
    return [
        c.route("/evaluators", evaluators_page, ["GET"]),
        c.route("/evaluators/activate", activate, ["POST"]),
        c.route("/evaluators/train", train, ["POST"]),
        c.route("/evaluators/recalibrate", recalibrate, ["POST"]),
    ]
