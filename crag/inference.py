"""Scoring with an evaluator: a loaded judge (batched, length-sorted), cosine similarity, a score cache, int8."""

from __future__ import annotations

import hashlib
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.ao.quantization import quantize_dynamic

from crag.judge import (
    JudgeBundle,
    MiniLMT5Judge,
    ModelKind,
    PassageStateCache,
    collate,
    encode_pairs,
    max_positions,
    use_fused_gelu,
)
from crag.types import Thresholds


def native_bf16() -> bool:
    """True when the CPU multiplies bfloat16 natively (AVX512-BF16 or AMX), where bf16 inference is about 2x faster."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:  # not Linux: keep fp32
        pass
    return False


class TorchEvaluator:
    """A loaded judge behind the Evaluator interface, with batched, length-sorted inference."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: Any,
        kind: ModelKind,
        version: str,
        *,
        max_length: int = 512,
        batch_size: int = 32,
        threads: int | None = None,
        raw_scores: bool = False,
        metadata: dict[str, Any] | None = None,
        quantized: bool = False,
        bf16: bool = False,
        passage_cache_mb: int = 0,
    ):
        self.model = use_fused_gelu(model).eval()
        if passage_cache_mb > 0 and isinstance(model, MiniLMT5Judge) and model.separate_encoding:
            model.passage_cache = PassageStateCache(passage_cache_mb * 2**20)
        self.quantized = quantized
        # bf16 autocast of the matmuls: scores move by < 0.01 (unlike int8), so the fp32 thresholds hold.
        self.bf16 = bf16 and not quantized
        self.tokenizer = tokenizer
        self.kind = kind
        self.version = version
        self.max_length = max_length
        self.batch_size = batch_size
        self.threads = threads
        self.raw_scores = raw_scores  # official format: the raw logit *is* the score
        self.metadata = metadata or {}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self._lock = threading.Lock()  # one forward at a time; torch threads do the parallelism

    def drop_passage_cache(self) -> None:
        """Free the passages' cached states: they are this model's, stale once it is quantised."""
        if isinstance(self.model, MiniLMT5Judge):
            self.model.passage_cache = None

    def _threshold_dict(self) -> dict[str, Any]:
        # int8 scores drift from fp32 (the similarity prior amplifies small errors), so a
        # quantised evaluator uses thresholds calibrated on itself when it has them.
        if self.quantized and self.metadata.get("thresholds_int8"):
            return self.metadata["thresholds_int8"]
        return self.metadata.get("thresholds") or {}

    @property
    def thresholds(self) -> Thresholds | None:
        t = self._threshold_dict()
        if "upper" in t and "lower" in t:
            return Thresholds.from_dict(t)
        return None

    def logits(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        rows = encode_pairs(self.tokenizer, self.kind, question, passages, self.max_length)
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))  # less padding
        out = [0.0] * len(rows)
        with self._lock, torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            if self.threads and torch.get_num_threads() != self.threads:
                torch.set_num_threads(self.threads)
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                batch = collate([rows[i] for i in idx], self.pad_id)
                if self.kind == "t5_seq_cls":
                    values = self.model(**batch).logits.reshape(-1)
                else:
                    values = self.model(**batch)
                for i, v in zip(idx, values.float().tolist()):
                    out[i] = float(v)
        return out

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        values = self.logits(question, passages)
        if self.raw_scores:
            return values
        return [2.0 / (1.0 + float(np.exp(-v))) - 1.0 for v in values]  # 2*sigmoid-1, in [-1, 1]


class CosineEvaluator:
    """The baseline: cosine similarity of question and passage embeddings. No training."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray], version: str = "cosine"):
        self.embed = embed
        self.version = version

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        vectors = np.asarray(self.embed([question, *passages]), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
        return [float(v) for v in vectors[1:] @ vectors[0]]


class CachedEvaluator:
    """Caches scores per (version, sha1(question), sha1(passage)) in a bounded LRU.

    Strips and popular questions repeat; a cached score is identical by construction.
    Misses of one call are scored together, in one batched call to the wrapped evaluator.
    """

    def __init__(self, inner: Any, max_items: int = 50_000):
        self.inner = inner
        self.max_items = max_items
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        return self.inner.version

    def __getattr__(self, name: str) -> Any:  # thresholds, metadata, ... of the wrapped evaluator
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @staticmethod
    def _sha1(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        q = self._sha1(question)
        keys = [(self.version, q, self._sha1(p)) for p in passages]
        out: list[float | None] = [None] * len(keys)
        with self._lock:
            for i, key in enumerate(keys):
                if key in self._cache:
                    self._cache.move_to_end(key)
                    out[i] = self._cache[key]
        missing = [i for i, v in enumerate(out) if v is None]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            # Score each distinct missing passage once.
            unique: dict[tuple[str, str, str], int] = {}
            for i in missing:
                unique.setdefault(keys[i], i)
            scored = self.inner.score(question, [passages[i] for i in unique.values()])
            fresh = dict(zip(unique.keys(), scored))
            with self._lock:
                for key, value in fresh.items():
                    self._cache[key] = value
                    self._cache.move_to_end(key)
                while len(self._cache) > self.max_items:
                    self._cache.popitem(last=False)
            for i in missing:
                out[i] = fresh[keys[i]]
        filled = [v for v in out if v is not None]
        assert len(filled) == len(out), "every passage has its score by now"
        return [float(v) for v in filled]


def evaluator_from_bundle(
    bundle: JudgeBundle, version: str, metadata: dict[str, Any] | None = None, *, passage_cache_mb: int = 0
) -> TorchEvaluator:
    """Wrap a judge in memory (e.g. right after training) without a save/load round trip.
    `passage_cache_mb` as `TorchEvaluator`'s: the cache stays on `bundle.model` until
    `drop_passage_cache`."""
    return TorchEvaluator(
        bundle.model,
        bundle.tokenizer,
        bundle.config.kind,
        version,
        max_length=min(bundle.config.max_length, max_positions(bundle.model, bundle.config.kind)),
        batch_size=bundle.config.batch_size,
        threads=bundle.config.threads,
        metadata=metadata,
        passage_cache_mb=passage_cache_mb,
    )


def quantize_int8_linear(model: nn.Module) -> nn.Module:
    """Dynamic int8 quantisation of every nn.Linear (about 2x faster on CPU, small score drift)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch marks quantize_dynamic deprecated
        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
