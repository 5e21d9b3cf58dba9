"""The fast inference paths give the scores of the plain one (correctness only: speed lives in bench/)."""

from __future__ import annotations

import pytest
import torch

from crag.checkpoint import load_evaluator
from crag.judge import EvaluatorConfig, build_judge
from crag.training.saving import save_evaluator

from support.travel_example import DEADLINE, NEGATION, QUESTION, SCOPE, TRAVEL_TEXT

PASSAGES = [TRAVEL_TEXT, DEADLINE, NEGATION, SCOPE, "The cafeteria opens at 8 am.", TRAVEL_TEXT * 3]


@pytest.fixture(scope="module")
def saved_judge(tmp_path_factory):  # -> Path
    torch.manual_seed(0)
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64))  # with the similarity prior
    # A non-trivial head, though trained heads are far smaller (std ~0.001): at std 0.5 a random
    # T5 block made logits so steep that bf16 rounding moved a mid-range score by 0.035.
    with torch.no_grad():
        bundle.model.head.weight.normal_(0, 0.2, generator=torch.Generator().manual_seed(3))
    folder = tmp_path_factory.mktemp("judge") / "v1"
    save_evaluator(bundle, folder, {"version": "v1"})
    return folder


def test_bf16_inference_keeps_fp32_scores_and_version(saved_judge):
    fp32 = load_evaluator(saved_judge, threads=1)
    bf16 = load_evaluator(saved_judge, threads=1, bf16=True)
    assert bf16.bf16 and not fp32.bf16
    assert bf16.version == fp32.version  # same thresholds, same cache entries, same logged version
    expected = fp32.score(QUESTION, PASSAGES)
    assert bf16.score(QUESTION, PASSAGES) == pytest.approx(expected, abs=0.03)
    assert torch.get_autocast_dtype("cpu") == torch.bfloat16 and not torch.is_autocast_enabled("cpu")  # left off


def test_bf16_is_never_combined_with_int8(saved_judge):
    assert not load_evaluator(saved_judge, threads=1, quantize_int8=True, bf16=True).bf16


def test_bf16_setting(monkeypatch):
    from application import runtime
    from core.config import Settings

    monkeypatch.setattr(runtime, "native_bf16", lambda: False)
    assert not runtime.use_bf16(Settings(POLICYBOT_EVALUATOR_BF16="auto"))
    assert runtime.use_bf16(Settings(POLICYBOT_EVALUATOR_BF16="on"))
    monkeypatch.setattr(runtime, "native_bf16", lambda: True)
    assert runtime.use_bf16(Settings(POLICYBOT_EVALUATOR_BF16="auto"))
    assert not runtime.use_bf16(Settings(POLICYBOT_EVALUATOR_BF16="off"))
