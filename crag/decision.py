"""The CRAG decision over the top-k evaluator scores (arXiv 2401.15884, section 4.3)."""

from __future__ import annotations

from collections.abc import Sequence

from crag.types import Action, Thresholds


def decide(scores: Sequence[float], thresholds: Thresholds) -> Action:
    """Map the evaluator's scores for one retrieval set to a CRAG action.

    Correct if any score reaches the upper threshold; Incorrect if every score is below
    the lower threshold (an empty set counts as Incorrect: there is no evidence at all);
    Ambiguous otherwise.
    """
    if any(score >= thresholds.upper for score in scores):
        return Action.CORRECT
    if all(score < thresholds.lower for score in scores):
        return Action.INCORRECT
    return Action.AMBIGUOUS
