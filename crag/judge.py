"""The judge: the model that scores how well a passage answers a question, and its inputs.

Three kinds, all behind the single `crag.types.Evaluator` interface once loaded
(`crag.inference.TorchEvaluator`):

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
* `kind="t5_encoder"` is an encoder-only T5 built from a config, reusing MiniLM's tokenizer and
  word-embedding matrix. It is kept for experiments: on our corpora it learned far worse.

Nothing here downloads anything: every load passes `local_files_only=True` on a local folder.
No module of crag sets HF_HUB_OFFLINE or TOKENIZERS_PARALLELISM: huggingface_hub reads them once,
when it is imported, so the process entry points (the policybot CLI, the Celery worker app) set them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, TypeVar, cast

import torch
from torch import nn

from crag.minilm import minilm_folder

ModelKind = Literal["minilm_t5", "t5_seq_cls", "t5_encoder"]
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
    # Training (used by crag/training/fitting.py and crag/training/train.py).
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
    # Weight of a listwise term beside the BCE: within each rank group of the pairs (one corpus
    # question's passages, or its sentences), a softmax over the group's logits with the answer's
    # as the targets. BCE alone compares pairs of any question, so a judge can pass it by knowing
    # the topic; the ranking term asks which of one question's sentences answers it.
    rank_weight: float = 0.0
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
    # jointly, and seed to seed far more steadily (docs/quality-history.md, "Reading question and passage apart").
    separate_encoding: bool = True
    # Read apart, MiniLM's top `joint_minilm_layers` layers also read the question's and the
    # passage's states packed together, and the T5 blocks get those: pretrained attention
    # across the pair, while the prior keeps the states read apart. Only layers that learn
    # (above `freeze_minilm_layers`), so the frozen-state cache still holds every text apart.
    # Off: 2 chose no better on dev for 40% more time a step (docs/quality.md).
    joint_minilm_layers: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluatorConfig:
        known = {f.name for f in fields(cls)}
        # Evaluators saved before separate encoding existed read question and passage jointly.
        return cls(**({"separate_encoding": False} | {k: v for k, v in data.items() if k in known}))


def quiet_transformers() -> None:
    """No progress bars or warnings from transformers while a judge loads."""
    # transformers (seconds): only to build or load a model, not for whoever imports crag for its
    # configs and metrics (application/evaluators.py: the console's evaluator pages, `evaluator list`)
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
    from transformers.activations import GELUTanh, NewGELUActivation  # transformers: as in quiet_transformers

    for module in list(model.modules()):
        for name, child in module.named_children():
            if isinstance(child, NewGELUActivation):
                setattr(module, name, GELUTanh())
    return model


def _t5_config(config: EvaluatorConfig, d_model: int, vocab_size: int) -> Any:
    from transformers import T5Config  # transformers: as in quiet_transformers

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

    def __contains__(self, key: bytes) -> bool:
        return key in self._states  # counts neither a hit nor a miss

    def __len__(self) -> int:
        return len(self._states)


class FrozenStateCache(PassageStateCache):
    """What the frozen part of MiniLM (its embeddings and `layers` lowest layers) makes of each
    text read apart, per token ids, in an LRU bounded by bytes and stored as `dtype`. For
    training: those weights never change, so each distinct question and passage goes through
    them once, and a step runs only the layers that learn, the T5 blocks and the head. The
    frozen part reads in eval mode (no dropout), or its states would differ at every reading."""

    def __init__(self, max_bytes: int, layers: int, dtype: torch.dtype = torch.float16):
        super().__init__(max_bytes)
        self.layers = layers
        self.dtype = dtype


class MiniLMT5Judge(nn.Module):
    """MiniLM (question and passage apart, or jointly) -> T5 encoder blocks -> mean pooling ->
    linear head (one logit), plus the similarity prior."""

    def __init__(
        self,
        bert_config: Any,
        t5_config: Any,
        similarity_prior: bool = True,
        separate_encoding: bool = False,
        joint_minilm_layers: int = 0,
    ):
        super().__init__()
        if joint_minilm_layers and not separate_encoding:
            raise ValueError("joint_minilm_layers needs separate_encoding: read jointly, every layer reads the pair")
        if not 0 <= joint_minilm_layers <= bert_config.num_hidden_layers:
            raise ValueError(f"joint_minilm_layers must be 0 to {bert_config.num_hidden_layers}")
        from transformers import BertModel, T5EncoderModel  # transformers: as in quiet_transformers

        self.minilm = BertModel(bert_config, add_pooling_layer=False)
        self.t5 = T5EncoderModel(t5_config)  # fed inputs_embeds: its token table is unused
        self.head = nn.Linear(t5_config.d_model, 1)
        nn.init.zeros_(self.head.weight)  # start neutral: only the prior speaks at first
        nn.init.zeros_(self.head.bias)
        self.similarity_prior = similarity_prior
        self.separate_encoding = separate_encoding
        # After this many layers read apart, the rest read the pair packed (None: all apart).
        self.joint_from = bert_config.num_hidden_layers - joint_minilm_layers if joint_minilm_layers else None
        # Scale and shift map the untrained cosines to logits of about +-2 to +-4: read apart
        # (bi-encoder) they sit in about [0.1, 0.8]; segments of one joint pass in [0.7, 0.95].
        scale, shift = (10.0, 0.45) if separate_encoding else (20.0, 0.82)
        self.prior_scale = nn.Parameter(torch.tensor(scale))
        self.prior_shift = nn.Parameter(torch.tensor(shift))
        self.passage_cache: PassageStateCache | None = None  # set for inference by TorchEvaluator
        self.frozen_cache: FrozenStateCache | None = None  # set for training by fit_judge

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
        q_states, q_middle = self._read_apart(distinct_q, q_mask[first_row], self.joint_from)
        q_states = q_states[row_of]
        p_states, p_middle = self._passage_states(p_ids, p_mask, p_len)
        # Pack: the question's tokens, then the passage's, then padding.
        total = q_len + p_len
        steps = torch.arange(int(total.max()), device=input_ids.device)
        mask = (steps[None, :] < total[:, None]).long()
        from_passage = steps[None, :] >= q_len[:, None]
        index = torch.where(from_passage, steps_q.numel() + steps[None, :] - q_len[:, None], steps[None, :])
        index = index.clamp(max=steps_q.numel() + steps_p.numel() - 1)

        def pack(question: torch.Tensor, passage: torch.Tensor) -> torch.Tensor:
            both = torch.cat([question, passage], dim=1)
            return torch.gather(both, 1, index.unsqueeze(-1).expand(-1, -1, both.shape[-1]))

        if self.joint_from is None or q_middle is None or p_middle is None:
            packed = pack(q_states, p_states)
        else:
            packed = self._minilm_layers(pack(q_middle[row_of], p_middle), mask, self.joint_from, None)
        states = self.t5(inputs_embeds=packed, attention_mask=mask).last_hidden_state
        logit = self.head(_masked_mean(states, mask)).squeeze(-1)
        if self.similarity_prior:
            logit = self._with_prior(logit, _masked_mean(q_states, q_mask), _masked_mean(p_states, p_mask))
        return logit

    def _passage_states(
        self, p_ids: torch.Tensor, p_mask: torch.Tensor, p_len: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """MiniLM over the passages, padded like p_ids, and their states where the joint layers
        start (None without joint layers); through the cache when there is one."""
        cache = self.passage_cache
        if cache is None or torch.is_grad_enabled():
            return self._read_apart(p_ids, p_mask, self.joint_from)
        lengths = p_len.tolist()
        keys = [p_ids[row, :n].numpy().tobytes() for row, n in enumerate(lengths)]
        found = [cache.get(key) for key in keys]
        missing = [row for row, states in enumerate(found) if states is None]
        if missing:
            longest = max(lengths[row] for row in missing)
            final, middle = self._read_apart(p_ids[missing, :longest], p_mask[missing, :longest], self.joint_from)
            fresh = final if middle is None else torch.cat([final, middle], dim=-1)  # one entry holds both
            for i, row in enumerate(missing):
                computed = fresh[i, : lengths[row]].clone()  # a copy: no view pinning the whole batch
                cache.put(keys[row], computed)
                found[row] = computed
        states_by_row = [states for states in found if states is not None]  # every row, now all filled
        width = states_by_row[0].shape[-1]
        out = p_ids.new_zeros((len(keys), p_ids.shape[1], width), dtype=states_by_row[0].dtype)
        for row, states in enumerate(states_by_row):
            out[row, : lengths[row]] = states
        hidden = self.minilm.config.hidden_size
        return (out, None) if width == hidden else (out[..., :hidden], out[..., hidden:])

    def _read_apart(
        self, ids: torch.Tensor, mask: torch.Tensor, middle_at: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """MiniLM's last states of texts read apart ([CLS] text [SEP] rows, right-padded), and
        their states after `middle_at` layers (None when not asked); with a frozen-state cache,
        only the layers above the frozen ones run on the cached states."""
        cache = self.frozen_cache
        if cache is None and middle_at is None:
            return self.minilm(input_ids=ids, attention_mask=mask).last_hidden_state, None
        if cache is None:
            hidden, start = self.minilm.embeddings(input_ids=ids), 0
        else:
            hidden, start = self._frozen_states(ids, mask, cache), cache.layers
        if middle_at is None:
            return self._minilm_layers(hidden, mask, start, None), None
        if middle_at < start:
            raise ValueError(f"the joint layers start at {middle_at}, below the {start} frozen ones the cache holds")
        middle = self._minilm_layers(hidden, mask, start, middle_at)
        return self._minilm_layers(middle, mask, middle_at, None), middle

    def _minilm_layers(self, hidden: torch.Tensor, mask: torch.Tensor, start: int, stop: int | None) -> torch.Tensor:
        """MiniLM's layers `start:stop` on `hidden`, with the attention mask its own forward builds."""
        from transformers.masking_utils import create_bidirectional_mask  # transformers: as in quiet_transformers

        attention = create_bidirectional_mask(config=self.minilm.config, inputs_embeds=hidden, attention_mask=mask)
        for layer in self.minilm.encoder.layer[start:stop]:
            hidden = layer(hidden, attention)
        return hidden

    @property
    def frozen_layers(self) -> int:
        """How many of MiniLM's lowest layers learn nothing (with its embeddings): `freeze_lower`'s
        count; -1 when the embeddings learn too."""
        if any(p.requires_grad for p in self.minilm.embeddings.parameters()):
            return -1
        frozen = 0
        for layer in self.minilm.encoder.layer:
            if any(p.requires_grad for p in layer.parameters()):
                break
            frozen += 1
        return frozen

    def fill_frozen_cache(
        self,
        texts: Sequence[Sequence[int]],
        cache: FrozenStateCache,
        batch_size: int = 64,
        progress: Callable[[int, int], None] | None = None,
    ) -> bool:
        """Read the texts (token ids as read apart, `[CLS] text [SEP]`) the cache lacks through
        the frozen part, in batches of similar lengths, and keep them; `progress(done, total)`
        before the first batch and after each. False, and nothing read, when they would not all
        fit in the cache's bytes."""
        todo = {key: list(text) for text in texts if (key := torch.tensor(list(text)).numpy().tobytes()) not in cache}
        size = sum(len(ids) for ids in todo.values()) * self.minilm.config.hidden_size * cache.dtype.itemsize
        if cache.bytes + size > cache.max_bytes:
            return False
        ordered = sorted(todo.items(), key=lambda item: len(item[1]))
        for start in range(0, len(ordered), batch_size):
            if progress:
                progress(start, len(ordered))
            part = ordered[start : start + batch_size]
            batch = collate([{"input_ids": ids} for _, ids in part], pad_id=0)
            fresh = self.frozen_states(batch["input_ids"], batch["attention_mask"], cache.layers)
            for row, (key, ids) in enumerate(part):
                cache.put(key, fresh[row, : len(ids)].to(cache.dtype, copy=True))
        if progress and ordered:
            progress(len(ordered), len(ordered))
        return True

    def frozen_states(self, ids: torch.Tensor, mask: torch.Tensor, layers: int) -> torch.Tensor:
        """The embeddings and the `layers` lowest MiniLM layers on `ids`, in eval mode, without
        gradients: what a `FrozenStateCache` holds."""
        modules = [self.minilm.embeddings, *self.minilm.encoder.layer[:layers]]
        modes = [module.training for module in modules]
        try:
            for module in modules:
                module.eval()
            with torch.no_grad():
                return self._minilm_layers(self.minilm.embeddings(input_ids=ids), mask, 0, layers)
        finally:
            for module, mode in zip(modules, modes, strict=True):
                module.train(mode)

    def _frozen_states(self, ids: torch.Tensor, mask: torch.Tensor, cache: FrozenStateCache) -> torch.Tensor:
        """The frozen part's states of each row, padded like `ids` (zeros), from the cache; the
        texts it lacks are read together once, then kept."""
        lengths = mask.sum(1).tolist()
        keys = [ids[row, :n].numpy().tobytes() for row, n in enumerate(lengths)]
        found: dict[bytes, torch.Tensor] = {}
        missing: dict[bytes, int] = {}
        for row, key in enumerate(keys):
            if key in found or key in missing:
                continue  # the same text twice in one batch
            states = cache.get(key)
            if states is None:
                missing[key] = row
            else:
                found[key] = states
        if missing:
            rows = list(missing.values())
            longest = max(lengths[row] for row in rows)
            fresh = self.frozen_states(ids[rows, :longest], mask[rows, :longest], cache.layers)
            for i, (key, row) in enumerate(missing.items()):
                computed = fresh[i, : lengths[row]].to(cache.dtype, copy=True)  # a copy: no view of the batch
                cache.put(key, computed)
                found[key] = computed
        out = torch.zeros((len(keys), ids.shape[1], self.minilm.config.hidden_size))
        for row, key in enumerate(keys):
            out[row, : lengths[row]] = found[key]
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
        from transformers import T5EncoderModel  # transformers: as in quiet_transformers

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
    from transformers import AutoTokenizer, BertConfig, BertModel  # transformers: as in quiet_transformers

    quiet_transformers()
    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    bert_config = BertConfig.from_pretrained(folder, local_files_only=True)
    model: MiniLMT5Judge | T5EncoderJudge
    if config.kind == "minilm_t5":
        t5_config = _t5_config(config, bert_config.hidden_size, vocab_size=1)
        model = MiniLMT5Judge(
            bert_config, t5_config, config.similarity_prior, config.separate_encoding, config.joint_minilm_layers
        )
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


def read_apart(row: dict[str, list[int]]) -> tuple[list[int], list[int]]:
    """The two texts a separate-encoding judge reads of one encoded pair (`encode_pairs`):
    `[CLS] question [SEP]` and `[CLS] passage [SEP]`, as `MiniLMT5Judge` splits them."""
    ids, types = row["input_ids"], row["token_type_ids"]
    q_len = types.index(1) if 1 in types else len(ids)
    return ids[:q_len], ids[:1] + ids[q_len:]


def max_positions(model: nn.Module, kind: ModelKind) -> int:
    """The most tokens a judge of this kind reads in one row."""
    if kind == "minilm_t5":
        judge = cast(MiniLMT5Judge, model)  # what build_judge and load_evaluator make for this kind
        return int(judge.minilm.config.max_position_embeddings)
    return 512  # T5 has relative positions; 512 is the paper's cap
