"""The save side of the evaluator folder (crag/checkpoint.py reads it): written by training and
recalibration only, never by the runtime."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.torch import load_model, save_model

from crag.checkpoint import FORMAT_NAME, FORMAT_VERSION, METADATA_FILE, TOKENIZER_DIR, WEIGHTS_FILE
from crag.judge import EvaluatorConfig, JudgeBundle


def save_evaluator(bundle: JudgeBundle, folder: str | Path, metadata: dict[str, Any]) -> Path:
    """Write a versioned evaluator folder: config.json, model.safetensors, tokenizer/, metadata.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "kind": bundle.config.kind,
        "evaluator_config": bundle.config.to_dict(),
        "model_configs": bundle.model_configs,
        "score": "2*sigmoid(logit)-1",
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_model(bundle.model, str(folder / WEIGHTS_FILE))  # handles T5's tied token table
    bundle.tokenizer.save_pretrained(str(folder / TOKENIZER_DIR))
    (folder / METADATA_FILE).write_text(json.dumps(metadata, indent=2, default=_json_default))
    return folder


def load_weights(bundle: JudgeBundle, folder: str | Path) -> None:
    """Load a saved evaluator's weights into a judge of the same shape (to train on from there)."""
    saved = EvaluatorConfig.from_dict(json.loads((Path(folder) / "config.json").read_text())["evaluator_config"])
    mine, theirs = bundle.config.to_dict(), saved.to_dict()
    shape = ("kind", "t5_layers", "t5_heads", "t5_d_ff", "similarity_prior", "separate_encoding", "joint_minilm_layers")
    differing = [key for key in shape if mine[key] != theirs[key]]
    if differing:
        raise ValueError(f"{folder}: a judge of another shape ({', '.join(differing)} differ)")
    load_model(bundle.model, str(Path(folder) / WEIGHTS_FILE))


def update_metadata(folder: str | Path, updates: dict[str, Any]) -> dict[str, Any]:
    """Merge `updates` into a folder's metadata.json (e.g. recalibrated thresholds)."""
    path = Path(folder) / METADATA_FILE
    metadata = json.loads(path.read_text()) if path.exists() else {}
    metadata.update(updates)
    path.write_text(json.dumps(metadata, indent=2, default=_json_default))
    return metadata


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
