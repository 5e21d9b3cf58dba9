"""`policybot evaluator train|pretrain|list|activate|eval|calibrate`: the CRAG evaluator's versions."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.common import AsJson, console, errors, fail, load_settings
from core.config import PRETRAIN_MINUTES

if TYPE_CHECKING:
    from application.evaluators import Activation


# ----------------------------------------------------------------- evaluator

evaluator_app = typer.Typer(
    help="The T5 retrieval evaluator: train, list, activate, evaluate, calibrate.", no_args_is_help=True
)


@evaluator_app.command("train")
def evaluator_train(
    minutes: Annotated[
        float | None,
        typer.Option("--minutes", help="Time budget in minutes.", show_default="POLICYBOT_TRAIN_MINUTES or 10"),
    ] = None,
    activate: Annotated[
        str, typer.Option("--activate", help="if-better (beats cosine), always or never.")
    ] = "if-better",
    with_reviews: Annotated[
        bool, typer.Option("--with-reviews", help="Also train on admins' reviewed questions (console labels).")
    ] = False,
    with_feedback: Annotated[
        bool, typer.Option("--with-feedback", help="Also train on askers' 👍/👎 votes (a review outranks them).")
    ] = False,
    seed: Annotated[
        int,
        typer.Option(
            "--seed",
            help="Random seed of the data split, sampling and initial weights; "
            "trainings differ by seed, so compare several before trusting a change.",
        ),
    ] = 0,
    as_json: AsJson = False,
) -> None:
    """Train an evaluator on the policy-qa corpus and on weak supervision from the ingested documents
    (and, optionally, review labels); it is gated against cosine on the corpus's dev questions."""
    activations: dict[str, Activation] = {"if-better": "if_better", "always": "always", "never": "never"}
    if activate not in activations:
        fail("--activate must be if-better, always or never", 1)
    if minutes is not None and minutes <= 0:
        fail("--minutes must be positive", 1)
    settings = load_settings()
    budget_s = (minutes if minutes is not None else settings.train_minutes) * 60
    from application import evaluators  # torch and transformers: trains the model

    with TrainingProgress(errors, bar=not as_json) as show:
        try:
            result = evaluators.train_and_register(
                settings,
                budget_s,
                activations[activate],
                progress=show,
                with_reviews=with_reviews,
                with_feedback=with_feedback,
                seed=seed,
            )
        except evaluators.TrainingError as error:
            fail(str(error), 1)
    active = evaluators.active_version(settings)
    activated = active is not None and active.version == result.version
    if as_json:
        print(
            json.dumps(
                {
                    "version": result.version,
                    "activated": activated,
                    "beats_cosine": result.beats_cosine,
                    "thresholds": result.thresholds.to_dict(),
                    "evaluator": {"auc": result.evaluator.auc, "routing_accuracy": result.evaluator.routing_accuracy},
                    "cosine": {"auc": result.cosine.auc, "routing_accuracy": result.cosine.routing_accuracy},
                    "steps": result.steps,
                    "seconds": round(result.seconds, 1),
                    "seed": seed,
                    "notes": result.notes,
                }
            )
        )
        return
    table = Table("", "held-out AUC", "routing accuracy", title=f"evaluator {result.version}")
    table.add_row("T5 evaluator", f"{result.evaluator.auc:.3f}", f"{result.evaluator.routing_accuracy:.1%}")
    table.add_row("cosine similarity", f"{result.cosine.auc:.3f}", f"{result.cosine.routing_accuracy:.1%}")
    console.print(table)
    t = result.thresholds
    console.print(
        f"thresholds: upper {t.upper:.3f}, lower {t.lower:.3f}, strip {t.strip:.3f}; "
        f"{result.n_train_pairs} training pairs, {result.steps} steps in {result.seconds:.0f}s, seed {seed}"
    )
    for note in result.notes:
        console.print(f"[dim]{note}[/]")
    if activated:
        console.print(f"[green]active:[/] {result.version}")
    elif not result.beats_cosine:
        errors.print(
            "[yellow]warning:[/] this evaluator does not beat cosine similarity; stored but not activated "
            "(`policybot evaluator activate VERSION` to use it anyway)"
        )
    else:
        console.print(f"stored, not activated (`policybot evaluator activate {result.version}`)")


@evaluator_app.command("pretrain")
def evaluator_pretrain(
    minutes: Annotated[
        float,
        typer.Option(
            "--minutes",
            help="Time budget in minutes: training stops at it, or after two epochs of the corpus if sooner.",
        ),
    ] = PRETRAIN_MINUTES,
    seed: Annotated[
        int,
        typer.Option(
            "--seed", help="Random seed; `evaluator train --seed` adapts the general evaluator of the same seed."
        ),
    ] = 0,
    force: Annotated[
        bool, typer.Option("--force", help="Train afresh even if this corpus's general evaluator exists.")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Train the existing general evaluator further for this budget (in another batch order)."
        ),
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Train the general evaluator once per machine, on the policy-qa corpus alone. Every later
    `evaluator train` adapts it to your documents instead of starting from MiniLM."""
    if minutes <= 0:
        fail("--minutes must be positive", 1)
    if force and resume:
        fail("--force trains afresh and --resume trains further: give one of them", 1)
    settings = load_settings()
    from application import evaluators  # torch and transformers: trains the model

    with TrainingProgress(errors, bar=not as_json) as show:
        try:
            folder = evaluators.pretrain_general(
                settings, minutes * 60, seed=seed, force=force, resume=resume, progress=show
            )
        except evaluators.TrainingError as error:
            fail(str(error), 1)
    training = evaluators.general_summary(folder)["training"]
    if as_json:
        print(json.dumps({"folder": str(folder), "seed": seed, **training}))
        return
    console.print(
        f"general evaluator {folder.name}: {training['steps']} steps, {training['epochs']:.2f} epochs of "
        f"{training['n_train_pairs']} corpus pairs, {training['seconds']:.0f}s in {training.get('runs', 1)} run(s)"
    )
    console.print("`policybot evaluator train` now adapts it to the ingested documents")


@evaluator_app.command("list")
def evaluator_list(as_json: AsJson = False) -> None:
    """List trained evaluator versions with their metrics."""
    from application import evaluators  # torch: the training module keeps the versions' table

    rows = evaluators.list_versions(load_settings())
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "version": r.version,
                        "active": r.active,
                        "beats_cosine": r.beats_cosine,
                        "upper": r.upper,
                        "lower": r.lower,
                        "strip": r.strip_threshold,
                        "metrics": r.metrics,
                        "created_at": r.created_at.isoformat(),
                    }
                    for r in rows
                ]
            )
        )
        return
    table = Table("version", "active", "AUC", "cosine AUC", "routing", "upper", "lower", "created")
    for row in rows:
        model, cosine = row.metrics.get("evaluator", {}), row.metrics.get("cosine", {})
        table.add_row(
            row.version,
            "[green]yes[/]" if row.active else "",
            f"{model.get('auc', 0):.3f}",
            f"{cosine.get('auc', 0):.3f}",
            f"{model.get('routing_accuracy', 0):.1%}",
            f"{row.upper:.3f}",
            f"{row.lower:.3f}",
            f"{row.created_at:%Y-%m-%d %H:%M}",
        )
    console.print(table)
    if not rows:
        console.print(
            "no evaluator trained yet: `policybot evaluator train` (answers use cosine similarity until then)"
        )
    elif not any(row.active for row in rows):
        console.print(
            "none is active: answers use cosine similarity (`policybot evaluator activate VERSION` to use one)"
        )


@evaluator_app.command("activate")
def evaluator_activate(
    version: Annotated[
        str,
        typer.Argument(
            help="A version from `policybot evaluator list`, or 'cosine' for cosine "
            "similarity (trained versions stay stored)."
        ),
    ],
) -> None:
    """Make a stored evaluator version the one answers use, or go back to cosine similarity."""
    from application import evaluators  # torch: the training module keeps the versions' table

    settings = load_settings()
    try:
        evaluators.activate_version(settings, version)
    except evaluators.TrainingError as error:
        fail(str(error), 1)
    console.print("active: cosine similarity" if version == evaluators.COSINE else f"active: {version}")
    if settings.evaluator_path is not None:
        errors.print(f"[yellow]note:[/] POLICYBOT_EVALUATOR_PATH={settings.evaluator_path} overrides this choice")


@evaluator_app.command("eval")
def evaluator_eval(
    version: Annotated[
        str | None,
        typer.Argument(help="Evaluator version (see `policybot evaluator list`).", show_default="the active one"),
    ] = None,
    as_json: AsJson = False,
) -> None:
    """Measure an evaluator against cosine similarity on the current corpus."""
    from application import evaluators  # torch and transformers: runs the model

    try:
        report = evaluators.evaluate_version(load_settings(), version)
    except evaluators.TrainingError as error:
        fail(str(error), 1)
    if as_json:
        print(json.dumps({"evaluator": asdict(report.evaluator), "cosine": asdict(report.cosine)}, default=str))
        return
    table = Table(
        "", "validation AUC", "routing accuracy", title=f"evaluator {report.evaluator_version or version or 'active'}"
    )
    table.add_row("T5 evaluator", f"{report.evaluator.auc:.3f}", f"{report.evaluator.routing_accuracy:.1%}")
    table.add_row("cosine similarity", f"{report.cosine.auc:.3f}", f"{report.cosine.routing_accuracy:.1%}")
    console.print(table)


@evaluator_app.command("calibrate")
def evaluator_calibrate(
    version: Annotated[
        str | None,
        typer.Argument(help="Evaluator version (see `policybot evaluator list`).", show_default="the active one"),
    ] = None,
    from_reviews: Annotated[
        bool, typer.Option("--from-reviews", help="Calibrate on the console's review labels.")
    ] = False,
    from_feedback: Annotated[
        bool, typer.Option("--from-feedback", help="Calibrate on askers' 👍/👎 votes (a review outranks them).")
    ] = False,
    apply: Annotated[
        bool, typer.Option("--apply", help="Store the proposed thresholds (default: only show them).")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """Recalibrate a version's upper/lower thresholds from admins' reviews (and askers' votes) of logged answers."""
    if not (from_reviews or from_feedback):
        fail("say where the labels come from: --from-reviews, --from-feedback or both", 1)
    from application import calibration  # torch: the calibration shares the training module's metrics

    settings = load_settings()
    try:
        proposal = calibration.propose_from_reviews(
            settings, version, sources=calibration.LabelSources(from_reviews, from_feedback)
        )
        notes = calibration.apply_proposal(settings, proposal) if apply else []
    except calibration.CalibrationError as error:
        fail(str(error), 1)
    if as_json:
        print(json.dumps(proposal.to_dict() | {"applied": apply, "notes": notes}))
        return
    table = Table(
        "threshold",
        "current",
        "proposed",
        title=f"evaluator {proposal.version}: thresholds from {proposal.sources.describe()}",
    )
    current, proposed = proposal.current.to_dict(), proposal.proposed.to_dict()
    for key in ("upper", "lower", "strip"):
        table.add_row(key, f"{current[key]:.3f}", f"{proposed[key]:.3f}")
    console.print(table)
    console.print(
        f"labels: {proposal.n_present} answer-present, {proposal.n_absent} answer-absent "
        f"({sum(proposal.skipped.values())} reviewed questions skipped as ambiguous); strip kept (no strip labels)"
    )
    for note in notes:
        errors.print(f"[yellow]warning:[/] {note}")
    if apply:
        console.print(
            f"[green]stored[/] on {proposal.version} (from {proposal.n_reviews} labelled questions); "
            "running workers pick them up on restart"
        )
    else:
        console.print("dry run: nothing changed (`--apply` stores them)")


PERCENT = 100.0


class TrainingProgress:
    """A context manager and a progress callback: `with TrainingProgress(errors) as show: train(progress=show)`."""

    def __init__(self, console: Console, bar: bool = True) -> None:
        self.console = console
        self.live = bar and console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[steps]}"),
            TextColumn("{task.fields[loss]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not self.live,
        )
        self.phase: str | None = None
        self.task: TaskID | None = None
        self.fraction = 0.0

    def __enter__(self) -> TrainingProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.progress.stop()

    def __call__(self, event: dict[str, Any]) -> None:
        phase = " ".join(filter(None, (str(event.get("phase") or ""), event.get("detail"))))
        step, total = int(event.get("step") or 0), int(event.get("total") or 0)
        if phase != self.phase:
            self._start_phase(phase, float(event.get("elapsed") or 0.0))
        if total:
            self.fraction = max(self.fraction, min(1.0, step / total))
        if self.task is not None:
            loss = f"loss {event['loss']:.3f}" if event.get("loss") is not None else ""
            self.progress.update(
                self.task, completed=self.fraction * PERCENT, steps=f"{step}/{total}" if total > 1 else "", loss=loss
            )

    def _start_phase(self, phase: str, elapsed_s: float) -> None:
        self.phase, self.fraction = phase, 0.0
        if self.live:
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task(phase, total=PERCENT, steps="", loss="")
        else:
            minutes, seconds = divmod(int(elapsed_s), 60)
            self.console.print(f"[{minutes:d}:{seconds:02d}] {phase}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    """Add the evaluator group to the main CLI."""
    app.add_typer(evaluator_app, name="evaluator")
