"""bench/learning_curve.py's dev figures: sentence choice and document choice of a judge, and the
even sample of dev questions it measures them on."""

from __future__ import annotations

from collections.abc import Sequence

from bench.learning_curve import choices, dev_sample
from crag.training.metrics import HeldOut
from crag.training.weak_supervision import CandidateSet, Pair, StripExample

ANSWER = "Travel > Hotels\nThe nightly hotel cap in Toronto is CAD 240."
BESIDE = "Travel > Hotels\nHotel caps are reviewed every year by Finance."
OTHER = "Travel > Meals\nMeals are paid at cost with receipts."


class WordJudge:
    """Scores a text by how many of `liked` it holds: a stand-in whose choices are known."""

    version = "word-judge"

    def __init__(self, *liked: str) -> None:
        self.liked = liked

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        return [sum(word in text for word in self.liked) / len(self.liked) for text in passages]


def held_out() -> HeldOut:
    """Two questions whose answer was retrieved (chunk "cap" holds it), one whose answer was not."""
    sets, pairs, strips = [], [], []
    for question in ("toronto hotel cap?", "hotel cap in toronto?"):
        sets.append(CandidateSet(question, "corpus", True, ("review", "cap", "meals"), (BESIDE, ANSWER, OTHER)))
        pairs += [
            Pair(question, ANSWER, 1, "positive", "corpus", "cap"),
            Pair(question, BESIDE, 0, "hard", "corpus", "review"),
        ]
        strips += [
            StripExample(question, ANSWER, 1),
            StripExample(question, BESIDE, 0),
            StripExample(question, OTHER, 0),
        ]
    sets.append(CandidateSet("parking?", "corpus", False, ("meals",), (OTHER,)))
    return HeldOut(pairs, sets, strips)


def test_a_judge_that_likes_the_answer_chooses_its_sentence_and_its_chunk() -> None:
    assert choices(WordJudge("CAD", "Toronto"), held_out()) == (1.0, 1.0)


def test_a_judge_that_likes_the_topic_chooses_the_sentence_beside_the_answer() -> None:
    # "Finance" and "reviewed" only in the neighbour: wrong sentence and wrong chunk, for both questions.
    assert choices(WordJudge("Finance", "reviewed"), held_out()) == (0.0, 0.0)


def test_the_dev_sample_keeps_every_part_of_the_questions_it_takes() -> None:
    whole = held_out()
    assert dev_sample(whole, 0, seed=0) == whole  # 0: all
    one = dev_sample(whole, 1, seed=0)
    (question,) = {s.question for s in one.calibration_sets}
    assert all(p.question == question for p in one.val_pairs)
    assert len(one.strip_examples) == (3 if question != "parking?" else 0)
    assert dev_sample(whole, 2, seed=0) == dev_sample(whole, 2, seed=0)  # the same sample for the same seed
