"""How the CLI shows a training run's progress events (crag/training.py sends them through a callback).

On a terminal: a bar per phase that never moves backwards (the train phase replans its step
count from measured step times, so step/total alone can fall). Elsewhere (a file, CI): one
line as each phase starts, so a long phase is never silent.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

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
