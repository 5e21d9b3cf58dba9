"""Routing and choosing on sentence evidence (crag/evidence.py, crag/pipeline.py, crag/compose.py):
an evaluator trained on answer sentences routes on whether a sentence answers, leads the reply
with the sentence it judges best, and answers from a fallback only above the fallback's own bar."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from crag.evidence import SENTENCE_PASSAGES, answer_score, answer_scores, sentence_texts
from crag.pipeline import CragPipeline, PipelineConfig
from crag.training.weak_supervision import CandidateSet
from crag.types import Action, Passage, Thresholds

THRESHOLDS = Thresholds(upper=0.7, lower=-0.5, strip=0.0)

# On the topic, but no sentence gives Vancouver's cap: a passage judge likes it.
ON_TOPIC = Passage(
    id="hotels",
    text=(
        "Hotel stays on business trips are booked through the travel desk, and the nightly hotel "
        "caps for each city are reviewed every year by Finance. Receipts for hotels are required."
    ),
    origin="kb",
    source="kb",
    document="travel.md",
    section="Travel > Hotels",
)
# A sentence shares the question's words without answering; another gives the cap.
ANSWERING = Passage(
    id="caps",
    text=(
        "Hotel caps for business trips to Toronto are set by the travel desk for every booking. "
        "The nightly cap in Toronto is CAD 240 before taxes."
    ),
    origin="kb",
    source="kb",
    document="travel.md",
    section="Travel > Hotel caps",
)


def candidate_set(question: str, present: bool, *passages: Passage, answer_ids: tuple[str, ...] = ()) -> CandidateSet:
    """A retrieval set of `passages` as calibration holds it; `answer_ids`: those that answer."""
    return CandidateSet(
        question,
        "corpus",
        present,
        tuple(p.id for p in passages),
        tuple(p.text for p in passages),
        tuple(p.section for p in passages),
        answer_ids,
    )


class SentenceJudge:
    """Likes long passages on hotels; among sentences, only one stating a figure answers."""

    version = "sentence-judge"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.asked += passages
        return [self._score(p) for p in passages]

    @staticmethod
    def _score(text: str) -> float:
        sentence = text.rsplit("\n", 1)[-1]  # a sentence comes after its context line
        if "CAD 240" in sentence:
            return 0.9
        if "hotel" in sentence.lower():
            return 0.8 if len(sentence) > 160 else 0.1  # a whole passage, or one sentence
        return -0.9


class Retriever:
    def __init__(self, *passages: Passage) -> None:
        self.passages = list(passages)

    def retrieve(self, question: str, top_k: int) -> list[Passage]:
        return self.passages[:top_k]


class Portal:
    kind = "collection"
    name = "HR portal"
    open_web = False

    def __init__(self, *results: Passage) -> None:
        self.results = list(results)

    def search(self, keywords: str, limit: int) -> list[Passage]:
        return self.results


def pipeline(*passages: Passage, sentence_evidence: bool, thresholds: Thresholds = THRESHOLDS, fallback=()):
    config = PipelineConfig(thresholds=thresholds, sentence_evidence=sentence_evidence)
    return CragPipeline(lambda _: Retriever(*passages), SentenceJudge(), list(fallback), config)


def test_answer_score_is_the_mean_of_the_passage_and_its_best_sentence() -> None:
    assert answer_score(0.8, 0.1) == 0.45
    assert answer_score(0.8, None) == 0.8  # a passage without sentences keeps its own score
    assert answer_score(0.8, 0.2, sentence_weight=0.75) == pytest.approx(0.35)  # the sentence weighs 3/4
    assert answer_score(0.8, 0.2, sentence_weight=1.0) == 0.2
    judge = SentenceJudge()
    scores = answer_scores(judge, "hotel cap?", [ON_TOPIC, ANSWERING], [0.8, 0.9])
    assert scores == [0.9, 0.45]  # best passage first: ANSWERING (0.9, its cap sentence 0.9), then ON_TOPIC
    # Each sentence is read with its context line: the section it stands under.
    assert all(text.startswith("Travel > Hotel") for text in sentence_texts(ANSWERING))


def test_only_the_best_passages_sentences_are_read() -> None:
    many = [
        Passage(id=f"p{i}", text=f"Hotel rule {i}. Another hotel sentence {i}.", origin="kb", source="kb", document="d")
        for i in range(SENTENCE_PASSAGES + 2)
    ]
    judge = SentenceJudge()
    scores = answer_scores(judge, "hotel?", many, [0.1 * i for i in range(len(many))])
    assert len(scores) == SENTENCE_PASSAGES
    assert {text.split("\n")[-1] for text in judge.asked} == {
        sentence
        for p in many[-SENTENCE_PASSAGES:]
        for sentence in (f"Hotel rule {p.id[1:]}.", f"Another hotel sentence {p.id[1:]}.")
    }


def test_a_passage_on_the_topic_with_no_answering_sentence_is_not_correct() -> None:
    question = "What is the hotel cap in Vancouver?"
    by_passage = pipeline(ON_TOPIC, sentence_evidence=False).answer(question)
    assert by_passage.action == Action.CORRECT  # the passage judge alone: on topic is enough
    by_sentence = pipeline(ON_TOPIC, sentence_evidence=True).answer(question)
    assert by_sentence.action == Action.AMBIGUOUS  # its answer score, (0.8 + 0.1) / 2, is under upper
    # ... and under the middle of the ambiguous band, where no evidence is admitted: it abstains.
    band = Thresholds(upper=0.7, lower=0.3, strip=0.0)
    assert not pipeline(ON_TOPIC, sentence_evidence=True, thresholds=band).answer(question).found
    assert pipeline(ON_TOPIC, sentence_evidence=False, thresholds=band).answer(question).found


def test_the_best_judged_sentence_leads_not_the_one_sharing_most_words() -> None:
    question = "hotel caps for business trips to Toronto set by the travel desk?"
    lexical = pipeline(ANSWERING, sentence_evidence=False).answer(question)
    judged = pipeline(ANSWERING, sentence_evidence=True).answer(question)
    assert judged.action == Action.CORRECT
    assert judged.text.splitlines()[0].startswith("The nightly cap in Toronto is CAD 240")
    assert not lexical.text.splitlines()[0].startswith("The nightly cap")  # word overlap picks the other one


def test_words_shared_with_the_question_settle_a_near_tie_of_the_judge_not_a_clear_judgement() -> None:
    from dataclasses import replace

    from crag.compose import SHARED_WORDS_WEIGHT, compose_extractive
    from crag.types import Strip

    leave = Passage(id="leave", text="", origin="kb", source="kb", document="leave.md", section="Leave")
    question = "How many weeks of parental leave do I get?"
    answer = Strip(leave, 0, "Parental leave is 16 weeks at full pay.", score=0.60)
    beside = Strip(leave, 1, "Leave requests go to your manager in the HR portal.", score=0.62)
    near_tie, _ = compose_extractive(question, [answer, beside], lead_by_score=True)
    assert near_tie.startswith("Parental leave is 16 weeks")  # the judge alone would lead with the other
    clear = replace(answer, score=beside.score - SHARED_WORDS_WEIGHT - 0.1)
    judged, _ = compose_extractive(question, [clear, beside], lead_by_score=True)
    assert judged.startswith("Leave requests go to your manager")


PORTAL_PAGE = Passage(
    id="portal-caps",
    text=(
        "Hotel bookings and their nightly caps are listed per city in the travel section of this portal, "
        "with the booking codes and approvers for each office. The nightly cap in Toronto is CAD 240 before taxes."
    ),
    origin="fallback",
    source="HR portal",
    document="travel-portal.md",
)
OFF_TOPIC = Passage(id="parking", text="Parking permits cost $40 a month.", origin="kb", source="kb", document="p.md")


def test_a_fallback_result_answers_only_above_the_fallbacks_own_bar() -> None:
    question = "Toronto hotel cap?"
    # The knowledge base holds nothing (Incorrect); the portal's page has an answer score of 0.9.
    answered = pipeline(OFF_TOPIC, sentence_evidence=True, fallback=[Portal(PORTAL_PAGE)]).answer(question)
    assert answered.action == Action.INCORRECT and answered.found
    assert [c.origin for c in answered.citations] == ["fallback"]
    strict = Thresholds(upper=0.7, lower=-0.5, strip=0.0, fallback=0.95)
    held_back = pipeline(OFF_TOPIC, sentence_evidence=True, thresholds=strict, fallback=[Portal(PORTAL_PAGE)])
    assert not held_back.answer(question).found  # 0.9 < the fallback's bar, though above upper


def test_thresholds_with_a_fallback_bar_round_trip_and_older_ones_keep_upper() -> None:
    with_bar = Thresholds(upper=0.5, lower=-0.2, strip=0.1, fallback=0.6)
    assert Thresholds.from_dict(with_bar.to_dict()) == with_bar
    older = Thresholds.from_dict({"upper": 0.5, "lower": -0.2})
    assert older.fallback is None and older.fallback_bar == 0.5 and older.strip == -0.5
    assert "fallback" not in older.to_dict()


def test_a_costlier_wrong_correct_raises_upper_and_the_fallback_gets_its_own_bar() -> None:
    from crag.training.metrics import calibrate

    present = [0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    absent = [-0.5, -0.2, 0.0, 0.3, 0.45, 0.55, 0.65]
    youden = calibrate(present, absent, cost=1.0)
    costly = calibrate(present, absent, cost=3.0)
    assert costly.upper > youden.upper  # fewer absent sets clear it
    assert sum(a >= costly.upper for a in absent) < sum(a >= youden.upper for a in absent)
    assert youden.fallback is None  # no fallback sets: the fallback answers from upper
    with_fallback = calibrate(present, absent, fallback_present=[0.7, 0.8, 0.9], fallback_absent=[0.1, 0.75])
    assert with_fallback.fallback is not None and 0.75 < with_fallback.fallback <= 0.8


def test_calibration_routes_on_answer_scores_as_the_pipeline_does() -> None:
    from crag.inference import CachedEvaluator
    from crag.training.metrics import HeldOut, measure

    sets = [candidate_set(f"q{i} hotel cap?", True, ANSWERING) for i in range(3)]
    sets += [candidate_set(f"q{i} Vancouver hotel cap?", False, ON_TOPIC) for i in range(3)]
    held_out = HeldOut([], sets, [])
    judge = CachedEvaluator(SentenceJudge())
    by_passage = measure(judge, held_out, fixed_thresholds=THRESHOLDS)
    by_sentence = measure(judge, held_out, fixed_thresholds=THRESHOLDS, sentence_evidence=True)
    assert by_passage.action_rates["absent"]["correct"] == 1.0  # on topic: every absent set routed Correct
    assert by_sentence.action_rates["absent"]["correct"] == 0.0
    assert by_sentence.action_rates["present"]["correct"] == 1.0


def test_calibration_counts_a_set_led_by_the_wrong_candidate_as_a_wrong_correct() -> None:
    """A set that holds the answer but whose best-scored candidate does not would quote that
    candidate if routed Correct: upper weighs it as an answer-absent set, not as a right answer."""
    from dataclasses import replace

    from crag.inference import CachedEvaluator
    from crag.training.metrics import HeldOut, leads_with_answer, measure

    parking = Passage(
        id="parking", text="Parking permits are issued by Facilities.", origin="kb", source="kb", document="p.md"
    )

    right = [
        candidate_set(f"q{i} Toronto hotel cap?", True, ON_TOPIC, ANSWERING, answer_ids=("caps",)) for i in range(3)
    ]
    # The answer is in the parking passage, yet the hotel passage scores best and would lead.
    wrong = [
        candidate_set(f"q{i} permit for hotel parking?", True, ON_TOPIC, parking, answer_ids=("parking",))
        for i in range(3)
    ]
    absent = [candidate_set(f"q{i} gym allowance?", False, parking) for i in range(3)]
    judge = CachedEvaluator(SentenceJudge())
    measured = measure(judge, HeldOut([], [*right, *wrong, *absent], []), sentence_evidence=True)
    routing_wrong = answer_scores(judge, wrong[0].question, wrong[0].as_passages(), [0.8, -0.9])
    assert max(routing_wrong) < 0.9  # the hotel passage's answer score, below the answering sets'
    assert measured.thresholds.upper > max(routing_wrong)  # the wrong-led sets stay under upper
    scores = {(s.question, p): judge.score(s.question, [p])[0] for s in [*right, *wrong] for p in s.passages}
    assert leads_with_answer(
        right[0], answer_scores(judge, right[0].question, right[0].as_passages(), [0.8, 0.9]), scores, True
    )
    # Where the set does not say which candidate answers, every present set counts as right, as before.
    unknown = [replace(s, answer_ids=()) for s in wrong]
    before = measure(judge, HeldOut([], [*right, *unknown, *absent], []), sentence_evidence=True)
    assert before.thresholds.upper < max(routing_wrong)


def test_calibration_keeps_its_present_sets_when_none_leads_with_its_answer() -> None:
    from crag.training.metrics import calibrate

    absent = [-0.5, -0.2, 0.0]
    only_wrong = calibrate([], absent, wrong_lead=[0.6, 0.7], fallback_absent=[0.1], fallback_wrong_lead=[0.5])
    assert only_wrong == calibrate([0.6, 0.7], absent, fallback_present=[0.5], fallback_absent=[0.1])
    with pytest.raises(ValueError):
        calibrate([], absent)
    kinds = calibrate(
        [], absent, wrong_lead=[0.6, 0.7], absent_kinds=["labelled"] * 3, wrong_lead_kinds=["labelled"] * 2
    )
    assert (
        kinds.upper
        == calibrate([0.6, 0.7], absent, present_kinds=["labelled"] * 2, absent_kinds=["labelled"] * 3).upper
    )
