"""Fitting a judge to labelled pairs within a time budget: batches, the optimiser, the LR schedule."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from crag.judge import (
    EvaluatorConfig,
    FrozenStateCache,
    JudgeBundle,
    MiniLMT5Judge,
    T5EncoderJudge,
    collate,
    encode_pairs,
    read_apart,
)
from crag.training.progress import PhaseEmitter
from crag.training.weak_supervision import Pair

# The frozen part's states of the training texts, kept in fp16 (docs/evaluator.md, "Training on
# two cores": fp16 or fp32, the same held-out AUC; sizes measured there).
FROZEN_CACHE_MB = 1024


def frozen_state_cache(
    model: torch.nn.Module, max_mb: int, dtype: torch.dtype = torch.float16
) -> FrozenStateCache | None:
    """A cache of the frozen part's states for a judge that reads question and passage apart
    (the default); None where it does not apply (joint reading, the t5_encoder kind) or is off."""
    if max_mb <= 0 or not isinstance(model, MiniLMT5Judge) or not model.separate_encoding:
        return None
    if model.frozen_layers < 0:
        return None  # MiniLM's embeddings learn: nothing is frozen
    return FrozenStateCache(max_mb * 2**20, layers=model.frozen_layers, dtype=dtype)


def _fill_ahead(
    model: MiniLMT5Judge, cache: FrozenStateCache, rows: Sequence[dict[str, list[int]]], emit: PhaseEmitter
) -> bool:
    """Read every training text the cache lacks through the frozen part now, in long batches,
    as the "cache" phase; False when they would not all fit (then each step reads those it lacks)."""
    texts = {tuple(text) for row in rows for text in read_apart(row)}
    return model.fill_frozen_cache(list(texts), cache, progress=lambda done, total: emit("cache", done, total))


def _units(pairs: Sequence[Pair], grouped: bool) -> list[list[int]]:
    """Pair indices that travel in one batch: a rank group's pairs together (when `grouped`),
    every other pair alone."""
    units: list[list[int]] = []
    groups: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        if grouped and pair.rank_group:
            groups.setdefault(pair.rank_group, []).append(i)
        else:
            units.append([i])
    return units + list(groups.values())


def _batches(
    units: Sequence[list[int]], lengths: Sequence[int], batch_size: int, rng: random.Random
) -> list[list[int]]:
    """Shuffled batches of similar lengths (less padding), in random order, each unit kept whole
    (a unit larger than a batch is a batch of its own)."""
    order = list(units)
    rng.shuffle(order)
    window = batch_size * 16
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        block = sorted(order[start : start + window], key=lambda unit: max(lengths[i] for i in unit))
        batch: list[int] = []
        for unit in block:
            if batch and len(batch) + len(unit) > batch_size:
                batches.append(batch)
                batch = []
            batch += unit
        if batch:
            batches.append(batch)
    rng.shuffle(batches)
    return batches


def rank_loss(logits: torch.Tensor, labels: torch.Tensor, groups: Sequence[str]) -> torch.Tensor | None:
    """Listwise loss of the rank groups in a batch that hold an answer and a non-answer: minus the
    log of the softmax mass the group's answers get; their mean, or None when no group counts."""
    members: dict[str, list[int]] = {}
    for row, group in enumerate(groups):
        if group:
            members.setdefault(group, []).append(row)
    losses = []
    for rows in members.values():
        group_labels = labels[rows]
        if 0 < float(group_labels.sum()) < len(rows):
            group_logits = logits[rows]
            losses.append(torch.logsumexp(group_logits, 0) - torch.logsumexp(group_logits[group_labels > 0.5], 0))
    return torch.stack(losses).mean() if losses else None


def inference_seconds_per_pair(
    model: torch.nn.Module, pairs: Sequence[Pair], tokenizer: Any, config: EvaluatorConfig, pad_id: int
) -> float:
    """Time one inference batch of held-out pairs (scoring them is what calibration costs)."""
    sample = pairs[: config.batch_size]
    rows = [encode_pairs(tokenizer, config.kind, p.question, [p.passage], config.max_length)[0] for p in sample]
    model.eval()
    with torch.inference_mode():
        model(**collate(rows[:2], pad_id))  # the first call pays one-off setup costs
        started = time.monotonic()
        model(**collate(rows, pad_id))
    model.train()
    return (time.monotonic() - started) / max(1, len(rows))


@dataclass(frozen=True)
class Fitted:
    """How far one run of `fit_judge` got."""

    steps: int
    pairs_seen: int
    epochs: float
    logit_std: float  # of the last batch: near zero means the scores collapsed


def fit_judge(
    bundle: JudgeBundle,
    pairs: Sequence[Pair],
    config: EvaluatorConfig,
    seed: int,
    seconds_left: Callable[[], float],
    emit: PhaseEmitter,
    frozen_cache_mb: int = FROZEN_CACHE_MB,
    frozen_cache_dtype: torch.dtype = torch.float16,
    after_step: Callable[[int, JudgeBundle], None] | None = None,
) -> Fitted:
    """Train `bundle.model` in place with BCE on `pairs` (and, with `config.rank_weight`, the
    listwise `rank_loss` within each rank group, a group's pairs kept in one batch), for `config.max_epochs` (or
    `config.max_steps`) or until `seconds_left()` runs out, whichever comes first; never fewer
    than `config.min_steps` steps. The planned total (and the LR schedule) follows the measured
    step time, replanned every 10 steps.

    A judge that reads question and passage apart (the default) keeps what its frozen part
    (MiniLM's embeddings and lowest layers) makes of each distinct question and passage in a
    `FrozenStateCache` of `frozen_cache_mb` (0: none) in `frozen_cache_dtype`, so that a step runs only the layers that
    learn. The frozen part then reads in eval mode: no dropout below the layers that learn.
    `after_step(step, bundle)` runs after every step (bench/learning_curve.py measures the judge there).
    Each step reads through it the texts the cache lacks; once the plan covers every pair,
    the texts left are read ahead in long batches, shown as the "cache" phase."""
    rng = random.Random(seed)
    model = bundle.model
    if not isinstance(model, MiniLMT5Judge | T5EncoderJudge):
        raise TypeError(f"only the judges built here can be trained, not {type(model).__name__}")
    model.train()
    rows = [
        encode_pairs(bundle.tokenizer, config.kind, p.question, [p.passage], config.train_max_length)[0] for p in pairs
    ]
    labels = torch.tensor([float(p.label) for p in pairs])
    n_pos = float(labels.sum())
    # Negatives outnumber positives about 3:1; weigh positives up so both classes count alike.
    pos_weight = torch.tensor((len(labels) - n_pos) / max(n_pos, 1.0))
    pad_id = bundle.tokenizer.pad_token_id or 0
    lengths = [len(r["input_ids"]) for r in rows]
    ranked = config.rank_weight > 0
    units = _units(pairs, ranked)
    groups = [p.rank_group if ranked else "" for p in pairs]
    steps_per_epoch = math.ceil(len(rows) / config.train_batch_size)
    max_steps = config.max_epochs * steps_per_epoch
    if config.max_steps is not None:
        max_steps = min(max_steps, config.max_steps)
    max_steps = max(max_steps, config.min_steps)

    optimizer = torch.optim.AdamW(model.param_groups(config), weight_decay=config.weight_decay)
    plan = {"total": max_steps}  # replanned from measured step time; the LR schedule follows it

    def lr_factor(step: int) -> float:
        warmup = max(1, int(config.warmup_frac * plan["total"]))
        if step < warmup:
            return (step + 1) / warmup
        return max(0.05, 1.0 - (step - warmup) / max(1, plan["total"] - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    step, seen, loss_ema, logit_std = 0, 0, None, 0.0
    epoch_batches: list[list[int]] = []
    step_times: list[float] = []
    cache = frozen_state_cache(model, frozen_cache_mb, frozen_cache_dtype)
    fill_ahead = cache is not None
    if isinstance(model, MiniLMT5Judge):
        model.frozen_cache = cache
    try:
        while step < plan["total"]:
            if not epoch_batches:
                epoch_batches = _batches(units, lengths, config.train_batch_size, rng)
            idx = epoch_batches.pop()
            started = time.monotonic()
            batch = collate([rows[i] for i in idx], pad_id)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
                logits = model(**batch)
            logits = logits.float()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[idx], pos_weight=pos_weight)
            if ranked:
                ranking = rank_loss(logits, labels[idx], [groups[i] for i in idx])
                if ranking is not None:
                    loss = loss + config.rank_weight * ranking
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            seen += len(idx)
            step_times.append(time.monotonic() - started)
            value = loss.item()
            loss_ema = value if loss_ema is None else 0.9 * loss_ema + 0.1 * value
            logit_std = float(logits.detach().std()) if len(idx) > 1 else logit_std
            if step == 3 or step % 10 == 0:
                # Replan: how many steps fit in the time left.
                per_step = float(np.median(step_times[-10:]))
                fits = step + int(max(0.0, seconds_left()) / per_step)
                plan["total"] = max(config.min_steps, min(max_steps, fits))
                if fill_ahead and plan["total"] - step >= len(epoch_batches):
                    # The plan reads every pair, so every text: read those the cache lacks now, in long batches.
                    assert isinstance(model, MiniLMT5Judge) and cache is not None  # fill_ahead says so
                    _fill_ahead(model, cache, rows, emit)
                    fill_ahead = False
            emit("train", step, plan["total"], loss_ema)
            if after_step is not None:
                after_step(step, bundle)
    finally:
        if isinstance(model, MiniLMT5Judge):
            model.frozen_cache = None  # the training texts' states: of no use to scoring, and memory
    model.eval()
    return Fitted(steps=step, pairs_seen=seen, epochs=seen / max(1, len(rows)), logit_std=logit_std)
