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

from crag.judge import EvaluatorConfig, JudgeBundle, MiniLMT5Judge, T5EncoderJudge, collate, encode_pairs
from crag.training.progress import PhaseEmitter
from crag.training.weak_supervision import Pair


def _batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar lengths (less padding), in random order."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    window = batch_size * 16
    batches: list[list[int]] = []
    for start in range(0, len(order), window):
        block = sorted(order[start : start + window], key=lambda i: lengths[i])
        batches += [block[i : i + batch_size] for i in range(0, len(block), batch_size)]
    rng.shuffle(batches)
    return batches


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
) -> Fitted:
    """Train `bundle.model` in place with BCE on `pairs`, for `config.max_epochs` (or
    `config.max_steps`) or until `seconds_left()` runs out, whichever comes first; never fewer
    than `config.min_steps` steps. The planned total (and the LR schedule) follows the measured
    step time, replanned every 10 steps."""
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
    while step < plan["total"]:
        if not epoch_batches:
            epoch_batches = _batches(lengths, config.train_batch_size, rng)
        idx = epoch_batches.pop()
        started = time.monotonic()
        batch = collate([rows[i] for i in idx], pad_id)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            logits = model(**batch)
        logits = logits.float()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[idx], pos_weight=pos_weight)
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
        emit("train", step, plan["total"], loss_ema)
    model.eval()
    return Fitted(steps=step, pairs_seen=seen, epochs=seen / max(1, len(rows)), logit_std=logit_std)
