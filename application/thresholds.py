"""Where crag.types.Thresholds meets the database: an evaluator version's row stores it as
three columns (core/models.py), and this is the only place that converts between the two."""

from __future__ import annotations

from core.models import EvaluatorVersion
from crag.types import Thresholds


def stored_thresholds(row: EvaluatorVersion) -> Thresholds:
    return Thresholds(upper=row.upper, lower=row.lower, strip=row.strip_threshold, fallback=row.fallback_threshold)


def store_thresholds(row: EvaluatorVersion, thresholds: Thresholds) -> None:
    row.upper = float(thresholds.upper)
    row.lower = float(thresholds.lower)
    row.strip_threshold = float(thresholds.strip)
    row.fallback_threshold = None if thresholds.fallback is None else float(thresholds.fallback)
