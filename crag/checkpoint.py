"""The evaluator folder on disk: config.json, model.safetensors, tokenizer/, metadata.json.

Ours (trained here, `FORMAT_NAME`) or an official-format T5 checkpoint; `load_evaluator` reads
either. Nothing here downloads anything: every load passes `local_files_only=True` on a local folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_model
from torch import nn

from crag.inference import TorchEvaluator, quantize_int8_linear
from crag.judge import (
    EvaluatorConfig,
    MiniLMT5Judge,
    ModelKind,
    T5EncoderJudge,
    max_positions,
    quiet_transformers,
)

FORMAT_NAME = "policybot-evaluator"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
METADATA_FILE = "metadata.json"
TOKENIZER_DIR = "tokenizer"


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
    from transformers import AutoTokenizer  # transformers (seconds): as in crag/judge.py, only once a model loads

    quiet_transformers()
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
                saved.joint_minilm_layers,
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
        max_length=min(max_length or saved.max_length, max_positions(model, kind)),
        batch_size=batch_size or saved.batch_size,
        threads=threads if threads is not None else saved.threads,
        raw_scores=raw,
        metadata=metadata,
        quantized=use_int8,
        bf16=bf16,
        passage_cache_mb=passage_cache_mb,
    )
