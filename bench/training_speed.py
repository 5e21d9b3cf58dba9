"""Training speed on two cores: seconds per training step without and with the frozen-state cache.

    .venv/bin/python -m bench.training_speed [--pairs 160] [--steps 11] [--quality]

The default evaluator (MiniLM with its embeddings and 4 lowest layers frozen, 2 T5 blocks,
batch 16) is trained by `fit_judge` itself, on pairs built from the policy-qa corpus's
documents as training reads them: each kb question of the train organisations against
- its answer's chunk and 3 other chunks of its organisation (chunked as ingestion chunks,
  up to 200 word pieces), and
- its answer's sentence and 3 other sentences of the same document.

Side by side, on the same batches, two copies of the judge take training steps in turns
(fit_judge's step: collate, forward, BCE, backward, clipping, AdamW), so that both see the
same load on a shared machine:
- **before**: no cache: every step runs the whole of MiniLM;
- **after**: the default, the frozen part's states cached (fp16, read ahead as fit_judge reads
  them once its plan reads every pair): steps run only the layers that learn.
The ratio is the median of the turns' ratios.

Then the one-off cost of the cache: filling it with 1,000 chunks, 1,000 sentences and 1,000
questions (seconds and bytes), and the bytes the whole corpus's texts would take.

`--quality` adds held-out AUC at equal steps (`--quality-steps`, seeds `--seeds`), before and
after, and with the cache kept in fp32: trained on the train organisations' pairs (chunks and
sentences mixed), scored on the dev organisations' pairs.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402  (after the environment above: huggingface_hub reads it once, at import)
import yaml  # noqa: E402

from bench.common import REPO, load_average, machine, table  # noqa: E402
from crag.judge import (  # noqa: E402
    EvaluatorConfig,
    FrozenStateCache,
    JudgeBundle,
    MiniLMT5Judge,
    build_judge,
    collate,
    encode_pairs,
    read_apart,
)
from crag.training.fitting import FROZEN_CACHE_MB, _batches, _units, fit_judge, frozen_state_cache  # noqa: E402
from crag.training.metrics import roc_auc  # noqa: E402
from crag.training.weak_supervision import Pair  # noqa: E402

ORGS = REPO / "datasets" / "policy-qa" / "orgs"


@dataclass
class Corpus:
    chunk_pairs: list[Pair]
    sentence_pairs: list[Pair]
    chunks: list[str]  # every distinct chunk and sentence, and question, of the organisations read
    sentences: list[str]
    questions: list[str]


def _documents(org: Path) -> dict[str, str]:
    """The organisation's documents that are text already, by their name in questions.yaml."""
    docs = {f"kb/{p.name}": p.read_text() for p in sorted((org / "kb").glob("*")) if p.suffix in (".md", ".txt")}
    for source in sorted((org / "src").glob("*.md")):  # src/x.docx.md renders to kb/x.docx
        if not source.name.startswith("fallback--"):
            docs[f"kb/{source.name.removesuffix('.md')}"] = source.read_text()
    return docs


def corpus(split: str, seed: int = 0) -> Corpus:
    """Chunk pairs and sentence pairs (1 positive, 3 negatives each) of one split's kb questions."""
    from crag.minilm import minilm_folder
    from crag.text import plain_sentences
    from ingestion.chunking import HEADING_SEPARATOR, chunk_markdown, word_piece_counter

    tokenize = word_piece_counter(str(minilm_folder()))
    rng = random.Random(seed)
    out = Corpus([], [], [], [], [])
    for org in sorted(ORGS.iterdir()):
        if yaml.safe_load((org / "org.yaml").read_text())["split"] != split:
            continue
        chunks = {name: chunk_markdown(text, tokenize) for name, text in _documents(org).items()}
        every_chunk = [c.text for drafts in chunks.values() for c in drafts]
        out.chunks += every_chunk
        out.sentences += [s for text in every_chunk for s in plain_sentences(text)]
        for item in yaml.safe_load((org / "questions.yaml").read_text()):
            if item["label"] != "kb" or item["document"] not in chunks or item.get("first_turn"):
                continue
            phrases = [p.casefold() for p in item["phrases"]]

            def holds(text: str, phrases: list[str] = phrases) -> bool:
                return any(p in text.casefold() for p in phrases)

            drafts = chunks[item["document"]]
            gold = [c for c in drafts if item["section"] in c.section.split(HEADING_SEPARATOR) and holds(c.text)]
            if not gold:
                continue
            question = item["question"]
            out.questions.append(question)
            others = [text for text in every_chunk if not holds(text)]
            out.chunk_pairs.append(Pair(question, gold[0].text, 1, "positive", "corpus", item["id"]))
            out.chunk_pairs += [Pair(question, t, 0, "hard", "corpus", item["id"]) for t in rng.sample(others, 3)]
            answers = [s for s in plain_sentences(gold[0].text) if holds(s)]
            wrong = [s for c in drafts for s in plain_sentences(c.text) if not holds(s)]
            if answers and len(wrong) >= 3:
                out.sentence_pairs.append(Pair(question, answers[0], 1, "positive", "corpus", item["id"]))
                out.sentence_pairs += [Pair(question, s, 0, "hard", "corpus", item["id"]) for s in rng.sample(wrong, 3)]
    out.chunks = sorted(set(out.chunks))
    out.sentences = sorted(set(out.sentences))
    out.questions = sorted(set(out.questions))
    return out


def new_judge(seed: int) -> JudgeBundle:
    torch.manual_seed(seed)
    return build_judge(EvaluatorConfig())


def interleaved_steps(pairs: Sequence[Pair], steps: int, seed: int = 0) -> tuple[list[float], list[float], float, int]:
    """Training steps of two copies of one judge, in turns on the same batches: without the
    cache, then with it (filled ahead, as fit_judge fills it once the plan reads every pair).
    A step is fit_judge's: collate, forward, BCE, backward, clipping, AdamW. Returns the
    seconds of each one's steps, and the read-ahead's seconds and texts."""
    before, after = new_judge(seed), new_judge(seed)
    config = before.config
    rows = [
        encode_pairs(before.tokenizer, "minilm_t5", p.question, [p.passage], config.train_max_length)[0] for p in pairs
    ]
    labels = torch.tensor([float(p.label) for p in pairs])
    cache = frozen_state_cache(after.model, FROZEN_CACHE_MB)
    assert isinstance(after.model, MiniLMT5Judge) and cache is not None
    texts = {tuple(text) for row in rows for text in read_apart(row)}
    started = time.perf_counter()
    after.model.fill_frozen_cache(list(texts), cache)
    fill_s = time.perf_counter() - started
    after.model.frozen_cache = cache
    judges = [cast(MiniLMT5Judge, b.model) for b in (before, after)]
    optimisers = [torch.optim.AdamW(j.param_groups(config), weight_decay=config.weight_decay) for j in judges]
    lengths = [len(r["input_ids"]) for r in rows]
    batches = _batches(_units(pairs, grouped=False), lengths, config.train_batch_size, random.Random(seed))
    seconds: list[list[float]] = [[], []]
    for n in range(steps):
        idx = batches[n % len(batches)]
        for i in (0, 1) if n % 2 == 0 else (1, 0):  # who goes first alternates
            model = judges[i]
            model.train()
            started = time.perf_counter()
            logits = model(**collate([rows[j] for j in idx], 0))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels[idx])
            optimisers[i].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimisers[i].step()
            seconds[i].append(time.perf_counter() - started)
    return seconds[0][1:], seconds[1][1:], fill_s, len(texts)  # the first step of each pays one-off setup


def fill_cost(texts: Sequence[str], tokenizer: Any, model: MiniLMT5Judge, max_length: int) -> tuple[float, int, float]:
    """Seconds and bytes to fill a cache with these texts (read apart, as training reads them)."""
    ids = [tokenizer(t, truncation=True, max_length=max_length)["input_ids"] for t in texts]
    cache = FrozenStateCache(2**40, layers=model.frozen_layers)
    started = time.perf_counter()
    model.fill_frozen_cache(ids, cache)
    return time.perf_counter() - started, cache.bytes, statistics.mean(len(i) for i in ids)


def corpus_bytes(texts: Sequence[str], tokenizer: Any, max_length: int, hidden: int = 384) -> int:
    """What the frozen part's fp16 states of these texts take."""
    tokens = sum(len(tokenizer(t, truncation=True, max_length=max_length)["input_ids"]) for t in texts)
    return tokens * hidden * 2


def held_out_aucs(bundle: JudgeBundle, sets: Sequence[Sequence[Pair]]) -> list[float]:
    """AUC of the judge's logits on each set of held-out pairs."""
    bundle.model.eval()
    aucs = []
    for pairs in sets:
        rows = [encode_pairs(bundle.tokenizer, "minilm_t5", p.question, [p.passage], 256)[0] for p in pairs]
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))
        scores = [0.0] * len(rows)
        with torch.inference_mode():
            for start in range(0, len(order), 32):
                part = order[start : start + 32]
                for i, logit in zip(part, bundle.model(**collate([rows[i] for i in part], 0)).tolist(), strict=True):
                    scores[i] = logit
        aucs.append(roc_auc(scores, [p.label for p in pairs]))
    return aucs


def quality(train: Corpus, dev: Corpus, steps: int, seeds: Sequence[int], n_dev: int) -> list[list[str]]:
    pairs = train.chunk_pairs + train.sentence_pairs
    rng = random.Random(0)
    held = [rng.sample(dev.chunk_pairs, min(n_dev // 2, len(dev.chunk_pairs)))]
    held.append(rng.sample(dev.sentence_pairs, min(n_dev // 2, len(dev.sentence_pairs))))
    untrained = held_out_aucs(new_judge(0), held)
    print(f"  untrained: AUC {untrained[0]:.3f} (chunks), {untrained[1]:.3f} (sentences)", flush=True)
    rows = [["untrained (the prior: the retriever's cosine)", f"{untrained[0]:.3f}", f"{untrained[1]:.3f}", ""]]
    variants = {
        "before: no cache (dropout in the frozen layers)": (0, torch.float16, seeds),
        "after: cache, fp16 (the default)": (FROZEN_CACHE_MB, torch.float16, seeds),
        "cache, fp32 (first seed)": (2 * FROZEN_CACHE_MB, torch.float32, seeds[:1]),
    }
    for name, (mb, dtype, its_seeds) in variants.items():
        aucs, seconds = [], []
        for seed in its_seeds:
            bundle = new_judge(seed)
            config = replace(bundle.config, max_steps=steps, min_steps=steps)
            started = time.perf_counter()
            fit_judge(
                bundle,
                pairs,
                config,
                seed,
                lambda: 3600.0,
                lambda *_: None,
                frozen_cache_mb=mb,
                frozen_cache_dtype=dtype,
            )
            seconds.append(time.perf_counter() - started)
            aucs.append(held_out_aucs(bundle, held))
            print(
                f"  {name}, seed {seed}: AUC {aucs[-1][0]:.3f} (chunks), {aucs[-1][1]:.3f} (sentences)"
                f" in {seconds[-1]:.0f} s (load {load_average()})",
                flush=True,
            )
        rows.append(
            [
                name,
                " / ".join(f"{a[0]:.3f}" for a in aucs),
                " / ".join(f"{a[1]:.3f}" for a in aucs),
                " / ".join(f"{s:.0f}" for s in seconds),
            ]
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=160, help="pairs per timed run (10 batches of 16)")
    parser.add_argument("--steps", type=int, default=11, help="steps of each judge, in turns (the first is not timed)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quality", action="store_true", help="also held-out AUC at equal steps")
    parser.add_argument("--quality-steps", type=int, default=80)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--dev-pairs", type=int, default=400)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(machine(), flush=True)

    train = corpus("train")
    rng = random.Random(0)
    sets = {
        "chunks": rng.sample(train.chunk_pairs, args.pairs),
        "sentences": rng.sample(train.sentence_pairs, args.pairs),
    }
    bundle = new_judge(0)
    lengths = {
        kind: statistics.median(
            len(encode_pairs(bundle.tokenizer, "minilm_t5", p.question, [p.passage], 256)[0]["input_ids"])
            for p in pairs
        )
        for kind, pairs in sets.items()
    }
    rows = []
    for kind, pairs in sets.items():
        before, after, fill_s, n_texts = interleaved_steps(pairs, args.steps)
        ratios = [b / a for b, a in zip(before, after, strict=True)]
        print(f"  {kind}: {statistics.median(before):.2f} / {statistics.median(after):.2f} s (load {load_average()})")
        rows.append(
            [
                f"{kind} ({lengths[kind]:.0f} word pieces a pair)",
                f"{statistics.median(before):.2f}",
                f"{statistics.median(after):.2f}",
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
                f"{fill_s:.1f} s for {n_texts} texts",
            ]
        )
    print()
    print(f"Seconds per training step (batch 16, the default evaluator), median of {args.steps - 1} steps in turns:")
    print(table(["pairs", "before: no cache", "after: cache", "ratio, median of turns (range)", "read-ahead"], rows))

    model = bundle.model
    assert isinstance(model, MiniLMT5Judge)
    cost_rows = []
    for kind, texts in (("chunks", train.chunks), ("sentences", train.sentences), ("questions", train.questions)):
        sample = random.Random(1).sample(texts, min(1000, len(texts)))
        seconds, size, mean_len = fill_cost(sample, bundle.tokenizer, model, 256)
        per = 1000 / len(sample)
        cost_rows.append([kind, f"{mean_len:.0f}", f"{seconds * per:.0f} s", f"{size * per / 2**20:.0f} MiB"])
    print()
    print("The cache's one-off cost per 1,000 texts (embeddings + 4 frozen layers, batches of 64, fp16):")
    print(table(["texts", "word pieces (mean)", "seconds", "memory"], cost_rows))
    dev = corpus("dev")
    everything = [t for c in (train, dev) for t in (*c.chunks, *c.sentences, *c.questions)]
    print(
        f"\nThe train and dev organisations' {len(everything):,} distinct chunks, sentences and questions: "
        f"{corpus_bytes(everything, bundle.tokenizer, 256) / 2**20:.0f} MiB in fp16 (FROZEN_CACHE_MB is 1,024)."
    )

    if args.quality:
        print(
            f"\nHeld-out AUC at {args.quality_steps} steps (dev organisations' chunk and sentence pairs):", flush=True
        )
        print(
            table(
                ["training", "chunk pairs", "sentence pairs", "seconds (whole run)"],
                quality(train, dev, args.quality_steps, args.seeds, args.dev_pairs),
            )
        )
    print(f"\n{machine()}")


if __name__ == "__main__":
    main()
