"""Offline training of the evaluator: weak supervision from the knowledge base (weak_supervision.py),
fitting (fitting.py), metrics and calibration (metrics.py), the phases of a run (train.py) and
saving its folder (saving.py). What answers a question never imports this package (pyproject.toml
holds the contract)."""
