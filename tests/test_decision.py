import pytest

from crag.decision import decide
from crag.types import Action, Thresholds

PAPER_POPQA = Thresholds(upper=0.59, lower=-0.99)


def test_one_score_at_or_above_upper_is_correct() -> None:
    assert decide([-1.0, 0.59, -0.5], PAPER_POPQA) is Action.CORRECT
    assert decide([0.9], PAPER_POPQA) is Action.CORRECT


def test_every_score_below_lower_is_incorrect() -> None:
    assert decide([-0.995, -1.2, -0.999], PAPER_POPQA) is Action.INCORRECT


def test_empty_scores_is_incorrect() -> None:
    assert decide([], PAPER_POPQA) is Action.INCORRECT


def test_a_score_at_lower_is_not_incorrect() -> None:
    # "every score < lower" is strict: a score equal to lower makes the set Ambiguous.
    assert decide([-0.99, -1.5], PAPER_POPQA) is Action.AMBIGUOUS


def test_in_between_is_ambiguous() -> None:
    assert decide([0.58, -1.0], PAPER_POPQA) is Action.AMBIGUOUS
    assert decide([0.0], PAPER_POPQA) is Action.AMBIGUOUS


def test_correct_wins_over_low_scores() -> None:
    assert decide([-5.0] * 9 + [0.6], PAPER_POPQA) is Action.CORRECT


@pytest.mark.parametrize(
    ("scores", "expected"),
    [([0.5], Action.CORRECT), ([0.49], Action.AMBIGUOUS), ([-0.92], Action.INCORRECT), ([-0.91], Action.AMBIGUOUS)],
)
def test_uses_the_given_thresholds(scores: list[float], expected: Action) -> None:
    assert decide(scores, Thresholds(upper=0.5, lower=-0.91)) is expected


def test_equal_thresholds() -> None:
    same = Thresholds(upper=0.0, lower=0.0)
    assert decide([0.0], same) is Action.CORRECT
    assert decide([-0.1], same) is Action.INCORRECT


# --- which evidence an action may answer from (crag.pipeline.choose_evidence) ----------

from crag.pipeline import choose_evidence  # noqa: E402
from crag.types import Passage, ScoredPassage  # noqa: E402

BAND = Thresholds(upper=0.6, lower=-0.2)  # middle of the ambiguous band: 0.2


def _scored(origin: str, *scores: float) -> list[ScoredPassage]:
    return [
        ScoredPassage(Passage(id=f"{origin}{i}", text="t", origin=origin, source=origin, document="d"), score)  # type: ignore[arg-type]
        for i, score in enumerate(scores)
    ]


def test_correct_answers_from_internal_passages_above_lower():
    chosen = choose_evidence(Action.CORRECT, _scored("kb", 0.7, 0.0, -0.5), _scored("fallback", 0.9), BAND)
    assert [s.passage.id for s in chosen] == ["kb0", "kb1"]


def test_incorrect_answers_only_from_fallback_that_is_itself_correct():
    assert [s.passage.id for s in choose_evidence(Action.INCORRECT, _scored("kb", -0.5), _scored("fallback", 0.61, 0.59), BAND)] == ["fallback0"]
    assert choose_evidence(Action.INCORRECT, _scored("kb", -0.5), [], BAND) == []


def test_ambiguous_uses_the_stronger_side_above_the_middle_of_the_band():
    stronger_fallback = choose_evidence(Action.AMBIGUOUS, _scored("kb", 0.3), _scored("fallback", 0.5, 0.1), BAND)
    assert [s.passage.id for s in stronger_fallback] == ["fallback0"]
    stronger_internal = choose_evidence(Action.AMBIGUOUS, _scored("kb", 0.5, 0.25), _scored("fallback", 0.3), BAND)
    assert [s.passage.id for s in stronger_internal] == ["kb0", "kb1"]
    assert choose_evidence(Action.AMBIGUOUS, _scored("kb", 0.15), _scored("fallback", 0.1), BAND) == []


# --- the pipeline keeps the two sides apart -------------------------------------------------

from crag.pipeline import AskContext, CragPipeline, PipelineConfig  # noqa: E402

KB_RULE = Passage(id="kb-carryover", text="You may carry over up to 5 unused PTO days.", origin="kb", source="policies", document="leave-policy.md")
PORTAL_PAGE = Passage(id="fb-payslips", text="Payslips are in Workday 2 business days before each pay date.", origin="fallback",
                      source="HR portal", document="payroll-calendar.md")


class _ByText:
    version = "by-text"

    def score(self, question: str, passages):  # type: ignore[no-untyped-def]
        return [0.8 if "Payslips" in p else 0.6 for p in passages]  # both above the middle (0.45); the portal stronger


class _Portal:
    name, kind, open_web = "HR portal", "collection", False

    def search(self, keywords: str, limit: int) -> list[Passage]:
        return [PORTAL_PAGE]


class _Retriever:
    def retrieve(self, question: str, top_k: int) -> list[Passage]:
        return [KB_RULE]


def test_an_ambiguous_answer_from_the_fallback_cites_no_knowledge_base_passage():
    # Regression: the answer's score list was the candidates' own list, so fallback results
    # appended to it joined the "internal" side and both sides were mixed into the answer.
    pipeline = CragPipeline(lambda _: _Retriever(), _ByText(), [_Portal()],
                            PipelineConfig(thresholds=Thresholds(upper=0.9, lower=0.0), strip_threshold=0.0))
    answer = pipeline.answer("When do payslips show up in Workday?", AskContext())
    assert answer.action == Action.AMBIGUOUS and answer.found
    assert [(c.origin, c.document) for c in answer.citations] == [("fallback", "payroll-calendar.md")]
    assert [s.passage.id for s in answer.scores] == ["kb-carryover", "fb-payslips"]  # both are still logged


class _PassageOverStrips:
    """Judges the whole passage fairly relevant (0.7) but each of its sentences weak."""

    version = "passage-over-strips"

    def score(self, question: str, passages):  # type: ignore[no-untyped-def]
        return [0.7 if p == KB_RULE.text + " " + KB_EXTRA else (0.2 if "carry over" in p else -0.5) for p in passages]


KB_EXTRA = "Requests go through Workday. Your manager approves them. Unused days expire on March 31."


class _OneLongRule:
    def retrieve(self, question: str, top_k: int) -> list[Passage]:
        return [Passage(id="kb-carryover-long", text=KB_RULE.text + " " + KB_EXTRA, origin="kb", source="policies",
                        document="leave-policy.md")]


@pytest.mark.parametrize(("upper", "lower", "action", "kept"), [
    (0.6, 0.0, Action.CORRECT, True),  # the passage (0.7) clears upper
    (0.75, 0.0, Action.AMBIGUOUS, True),  # below upper, above the middle of the band (0.375)
    (0.95, 0.6, Action.AMBIGUOUS, False),  # below the middle (0.775): not evidence, abstain
])
def test_admitted_evidence_keeps_its_best_strip_even_below_the_strip_threshold(upper, lower, action, kept):
    config = PipelineConfig(thresholds=Thresholds(upper=upper, lower=lower), strip_threshold=0.5,
                            strip_mode="sentences")
    pipeline = CragPipeline(lambda _: _OneLongRule(), _PassageOverStrips(), [], config)
    answer = pipeline.answer("How many PTO days roll over?", AskContext())
    assert answer.action == action and answer.found == kept
    if kept:
        # The best strip only (the one with the rule), not the whole passage.
        assert len(answer.strips) == 1 and "carry over" in answer.strips[0].text
        assert "March 31" not in answer.text
        assert [c.document for c in answer.citations] == ["leave-policy.md"]
