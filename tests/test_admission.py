"""bench/admission.py replays the Ambiguous band's admission as crag.pipeline.choose_evidence
decides it, so the share it picks on dev is the share the product then applies."""

from __future__ import annotations

import itertools

from bench.admission import Asked, admitted, replay
from crag.pipeline import choose_evidence
from crag.types import Action, Passage, ScoredPassage, Thresholds


def _side(origin: str, score: float | None) -> list[ScoredPassage]:
    if score is None:
        return []
    passage = Passage(id=origin, text="t", origin=origin, source=origin, document="d")  # type: ignore[arg-type]
    return [ScoredPassage(passage, score)]


def _asked(label: str, right: bool, kb: float | None, fallback: float | None, fallback_bar: float | None) -> Asked:
    best = {origin: score for origin, score in (("kb", kb), ("fallback", fallback)) if score is not None}
    return Asked("q", label, "ambiguous", True, right, best, upper=0.6, lower=-0.2, fallback_bar=fallback_bar)


def test_the_replay_admits_exactly_what_the_pipeline_admits():
    scores = (None, -0.1, 0.05, 0.2, 0.35, 0.5)
    for kb, fallback, fallback_bar, share in itertools.product(scores, scores, (None, 0.3), (0.0, 0.3, 0.5, 0.8, 1.0)):
        if kb is None and fallback is None:
            continue
        thresholds = Thresholds(upper=0.6, lower=-0.2, fallback=fallback_bar)
        chosen = choose_evidence(Action.AMBIGUOUS, _side("kb", kb), _side("fallback", fallback), thresholds, share)
        assert admitted(_asked("kb", True, kb, fallback, fallback_bar), share) == bool(chosen), (kb, fallback, share)


def test_a_higher_bar_turns_weak_band_answers_into_abstentions_and_leaves_the_rest():
    rows = [
        _asked("kb", True, 0.5, None, None),  # strong and right
        _asked("none-on-topic", False, 0.1, None, None),  # weak and wrong
        Asked("c", "kb", "correct", True, False, {"kb": 0.7}, 0.6, -0.2, None),  # Correct: never replayed
        Asked("a", "none-off-topic", "incorrect", False, False, {}, 0.6, -0.2, None),
    ]
    low, high = replay(rows, 0.0, cost=2.0), replay(rows, 0.5, cost=2.0)
    assert (low["right"], low["wrong"], low["net"]) == (1, 2, -3)
    assert (high["right"], high["wrong"], high["net"]) == (1, 1, -1)
    assert low["on_topic_abstained"] == 0.0 and high["on_topic_abstained"] == 100.0
    assert high["kb_right"] == 50.0 and high["kb_wrong"] == 50.0 and high["off_topic_abstained"] == 100.0
    # the band's own answers, by the side they draw on (the Correct one is not the band's)
    assert (low["band_net_kb"], high["band_net_kb"]) == (-1, 1) and low["band_net_fallback"] == 0
