"""bench/admission.py replays the Ambiguous band's admission as crag.pipeline.choose_evidence
decides it, so the share it picks on dev is the share the product then applies."""

from __future__ import annotations

import itertools

from bench.admission import Asked, by_height, from_knowledge_base, outcome, replay
from crag.pipeline import choose_evidence
from crag.types import Action, Passage, ScoredPassage, Thresholds


def _side(origin: str, score: float | None) -> list[ScoredPassage]:
    if score is None:
        return []
    passage = Passage(id=origin, text="t", origin=origin, source=origin, document="d")  # type: ignore[arg-type]
    return [ScoredPassage(passage, score)]


def _asked(
    label: str, kb: float | None, fallback: float | None, at_lower: tuple[bool, bool], at_upper: tuple[bool, bool]
) -> Asked:
    best = {origin: score for origin, score in (("kb", kb), ("fallback", fallback)) if score is not None}
    return Asked("q", label, "ambiguous", *at_lower, *at_upper, best, upper=0.6, lower=-0.2)


def test_the_replay_answers_from_the_knowledge_base_exactly_when_the_pipeline_does():
    scores = (None, -0.1, 0.05, 0.2, 0.35, 0.5)
    for kb, fallback, share in itertools.product(scores, scores, (0.0, 0.3, 0.5, 0.8, 1.0)):
        if kb is None:
            continue  # the band needs knowledge-base evidence above lower
        chosen = choose_evidence(
            Action.AMBIGUOUS, _side("kb", kb), _side("fallback", fallback), Thresholds(upper=0.6, lower=-0.2), share
        )
        asked = _asked("kb", kb, fallback, (True, True), (False, False))
        from_kb = bool(chosen) and chosen[0].passage.origin == "kb"
        assert from_knowledge_base(asked, share) == from_kb, (kb, fallback, share)
        assert outcome(asked, share) == ((True, True) if from_kb else (False, False))


def test_a_higher_bar_takes_the_second_passs_answers_and_leaves_the_other_actions():
    rows = [
        _asked("kb", 0.5, None, (True, True), (False, False)),  # high in the band, right: abstained at upper
        _asked("none-on-topic", 0.0, None, (True, False), (False, False)),  # low in the band, wrong
        _asked("fallback", 0.1, 0.3, (True, True), (True, True)),  # the fallback answers either way
        Asked("c", "kb", "correct", True, False, True, False, {"kb": 0.7}, 0.6, -0.2),  # Correct: never replayed
        Asked("a", "none-off-topic", "incorrect", False, False, False, False, {}, 0.6, -0.2),
    ]
    low, middle, high = (replay(rows, share, cost=2.0) for share in (0.0, 0.5, 1.0))
    assert (low["right"], low["wrong"], low["net"]) == (2, 2, -2)
    assert (middle["right"], middle["wrong"], middle["net"]) == (2, 1, 0)
    assert (high["right"], high["wrong"], high["net"]) == (1, 1, -1)
    assert low["on_topic_abstained"] == 0.0 and middle["on_topic_abstained"] == 100.0
    assert (low["band_kb_right"], low["band_kb_wrong"], high["band_kb_right"]) == (1, 1, 0)
    assert high["kb_right"] == 0.0 and high["kb_wrong"] == 50.0 and high["fallback_right"] == 100.0
    # heights 0.25 and 0.875 of the band: the wrong one low, the right one high
    assert by_height(rows) == [(0.0, 0, 0), (0.25, 0, 1), (0.5, 0, 0), (0.75, 1, 0)]
