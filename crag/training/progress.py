"""How training and measuring report progress: one event dict per step of a phase."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

Progress = Callable[[dict[str, Any]], None]  # {"phase", "step", "total", "loss", "elapsed"}


class PhaseEmitter(Protocol):
    def __call__(self, phase: str, step: int, total: int, loss: float | None = None) -> None: ...


def phase_emitter(progress: Progress | None, t0: float) -> PhaseEmitter:
    """A progress callback taking (phase, step, total, loss), with the time since `t0`."""

    def emit(phase: str, step: int, total: int, loss: float | None = None) -> None:
        if progress:
            progress({"phase": phase, "step": step, "total": total, "loss": loss, "elapsed": time.monotonic() - t0})

    return emit
