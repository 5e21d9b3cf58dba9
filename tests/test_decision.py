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
    assert [
        s.passage.id
        for s in choose_evidence(Action.INCORRECT, _scored("kb", -0.5), _scored("fallback", 0.61, 0.59), BAND)
    ] == ["fallback0"]
    assert choose_evidence(Action.INCORRECT, _scored("kb", -0.5), [], BAND) == []


def test_ambiguous_answers_from_the_fallback_above_the_middle_of_the_band_never_from_a_weak_knowledge_base():
    # At the default share the band's knowledge-base evidence is never enough (AMBIGUOUS_BAR_SHARE):
    # the fallback answers when it clears the middle of the band (0.2), stronger side or not.
    stronger_fallback = choose_evidence(Action.AMBIGUOUS, _scored("kb", 0.3), _scored("fallback", 0.5, 0.1), BAND)
    assert [s.passage.id for s in stronger_fallback] == ["fallback0"]
    weaker_fallback = choose_evidence(Action.AMBIGUOUS, _scored("kb", 0.55), _scored("fallback", 0.3), BAND)
    assert [s.passage.id for s in weaker_fallback] == ["fallback0"]
    assert choose_evidence(Action.AMBIGUOUS, _scored("kb", 0.5), _scored("fallback", 0.1), BAND) == []


def test_the_knowledge_base_bar_of_the_band_moves_with_its_share():
    # lower -0.2, upper 0.6: share 0.25 admits the knowledge base from 0.0, share 0.75 from 0.4
    kb = _scored("kb", 0.3, 0.1)
    assert [s.passage.id for s in choose_evidence(Action.AMBIGUOUS, kb, [], BAND, bar_share=0.25)] == ["kb0", "kb1"]
    assert choose_evidence(Action.AMBIGUOUS, kb, [], BAND, bar_share=0.75) == []
    # below the share, or weaker than the fallback, the knowledge base gives way to the fallback
    fallback = _scored("fallback", 0.25)
    assert choose_evidence(Action.AMBIGUOUS, kb, fallback, BAND, bar_share=0.75) == fallback
    assert choose_evidence(Action.AMBIGUOUS, _scored("kb", 0.2), fallback, BAND, bar_share=0.0) == fallback
    # a fallback result clears its calibrated bar too, whatever the share
    with_bar = Thresholds(upper=0.6, lower=-0.2, fallback=0.45)
    assert choose_evidence(Action.AMBIGUOUS, [], _scored("fallback", 0.4), with_bar, bar_share=0.0) == []
    # Correct and Incorrect do not read the share
    assert choose_evidence(Action.CORRECT, kb, [], BAND, bar_share=1.0) == kb


# --- the pipeline keeps the two sides apart -------------------------------------------------

from crag.pipeline import AskContext, CragPipeline, PipelineConfig  # noqa: E402

KB_RULE = Passage(
    id="kb-carryover",
    text="You may carry over up to 5 unused PTO days.",
    origin="kb",
    source="policies",
    document="leave-policy.md",
)
PORTAL_PAGE = Passage(
    id="fb-payslips",
    text="Payslips are in Workday 2 business days before each pay date.",
    origin="fallback",
    source="HR portal",
    document="payroll-calendar.md",
)


class _ByText:
    version = "by-text"

    def score(self, question: str, passages):
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
    pipeline = CragPipeline(
        lambda _: _Retriever(),
        _ByText(),
        [_Portal()],
        PipelineConfig(thresholds=Thresholds(upper=0.9, lower=0.0, strip=0.0)),
    )
    answer = pipeline.answer("When do payslips show up in Workday?", AskContext())
    assert answer.action == Action.AMBIGUOUS and answer.found
    assert [(c.origin, c.document) for c in answer.citations] == [("fallback", "payroll-calendar.md")]
    assert [s.passage.id for s in answer.scores] == ["kb-carryover", "fb-payslips"]  # both are still logged
    assert answer.evidence_best == {"kb": 0.6, "fallback": 0.8}  # what the band's bar was compared with


class _PassageOverStrips:
    """Judges the whole passage fairly relevant (0.7) but each of its sentences weak."""

    version = "passage-over-strips"

    def score(self, question: str, passages):
        return [0.7 if p == KB_RULE.text + " " + KB_EXTRA else (0.2 if "carry over" in p else -0.5) for p in passages]


KB_EXTRA = "Requests go through Workday. Your manager approves them. Unused days expire on March 31."


class _OneLongRule:
    def retrieve(self, question: str, top_k: int) -> list[Passage]:
        return [
            Passage(
                id="kb-carryover-long",
                text=KB_RULE.text + " " + KB_EXTRA,
                origin="kb",
                source="policies",
                document="leave-policy.md",
            )
        ]


@pytest.mark.parametrize(
    ("upper", "lower", "action", "kept"),
    [
        (0.6, 0.0, Action.CORRECT, True),  # the passage (0.7) clears upper
        (0.75, 0.0, Action.AMBIGUOUS, True),  # below upper, above the band's bar at share 0.5 (0.375)
        (0.95, 0.6, Action.AMBIGUOUS, False),  # below that bar (0.775): not evidence, abstain naming it
        (0.95, 0.8, Action.INCORRECT, False),  # below lower: off the topic, abstain naming nothing
    ],
)
def test_admitted_evidence_keeps_its_best_strip_even_below_the_strip_threshold(upper, lower, action, kept):
    # Share 0.5: a band that admits knowledge-base evidence (the default, 1.0, never does).
    config = PipelineConfig(
        thresholds=Thresholds(upper=upper, lower=lower, strip=0.5), strip_mode="sentences", ambiguous_bar_share=0.5
    )
    pipeline = CragPipeline(lambda _: _OneLongRule(), _PassageOverStrips(), [], config)
    answer = pipeline.answer("How many PTO days roll over?", AskContext())
    assert answer.action == action and answer.found == kept
    if kept:
        # The best strip only (the one with the rule), not the whole passage.
        assert len(answer.strips) == 1 and "carry over" in answer.strips[0].text
        assert "March 31" not in answer.text
        assert [c.document for c in answer.citations] == ["leave-policy.md"]
    elif action == Action.AMBIGUOUS:  # on the topic, short of an answer: the section is named, not quoted
        assert answer.closest is not None and answer.closest.id == "kb-carryover-long"
        assert "The closest section I found is leave-policy.md; it may not answer this." in answer.text
        assert "carry over" not in answer.text and not answer.citations
    else:
        assert answer.closest is None and "closest" not in answer.text


# --- evidence that refers to an allow-listed source -----------------------------------------

from crag.pipeline import sources_named_in  # noqa: E402
from crag.types import Strip  # noqa: E402

ENROLMENT_RULE = Passage(
    id="kb-enrol",
    text="Dates for open enrollment are published on the HR portal. "
    "Enroll in Workday within 30 days of your start date.",
    origin="kb",
    source="policies",
    document="onboarding.md",
)
PORTAL_DATES = Passage(
    id="fb-dates",
    text="Open enrollment runs from November 2 to November 20.",
    origin="fallback",
    source="HR portal",
    document="benefits-enrollment.md",
)
PORTAL_OFF_TOPIC = Passage(
    id="fb-parking",
    text="Parking in Boston costs $12 per day.",
    origin="fallback",
    source="HR portal",
    document="office-facilities.md",
)


class _Recording:
    """A fallback source that records the keywords it is sent."""

    kind = "collection"

    def __init__(self, name: str, results: list[Passage], open_web: bool = False) -> None:
        self.name, self.results, self.open_web, self.sent = name, results, open_web, []

    def search(self, keywords: str, limit: int) -> list[Passage]:
        self.sent.append(keywords)
        return self.results


class _Judge:
    version = "judge"

    def score(self, question: str, passages):
        return [
            0.9 if "November 2" in p or "published on the HR portal" in p else (0.5 if "Enroll" in p else -0.9)
            for p in passages
        ]


class _Enrolment:
    def retrieve(self, question: str, top_k: int) -> list[Passage]:
        return [ENROLMENT_RULE]


def _refer_pipeline(*sources: _Recording, strips_top_n: int = 5) -> CragPipeline:
    config = PipelineConfig(
        thresholds=Thresholds(upper=0.8, lower=0.0, strip=0.0),
        strip_mode="sentences",
        strips_top_n=strips_top_n,
    )
    return CragPipeline(lambda _: _Enrolment(), _Judge(), list(sources), config)


def test_a_correct_answer_that_refers_to_a_fallback_source_asks_it_too():
    portal = _Recording("HR portal", [PORTAL_DATES, PORTAL_OFF_TOPIC])
    wiki = _Recording("Engineering wiki", [PORTAL_DATES])
    answer = _refer_pipeline(wiki, portal).answer("When does open enrollment start? My email is ada@example.com")
    assert answer.action == Action.CORRECT and answer.found
    # Only the source the evidence names is asked, and only with the redacted keywords.
    assert wiki.sent == [] and len(portal.sent) == 1 and "ada@example.com" not in portal.sent[0]
    assert answer.fallback_queries == [{"source": "HR portal", "query": portal.sent[0]}]
    # Its result that clears upper joins the answer with a fallback citation; the off-topic one does not.
    assert ("fallback", "benefits-enrollment.md") in [(c.origin, c.document) for c in answer.citations]
    assert "office-facilities.md" not in [c.document for c in answer.citations]
    assert "November 2" in answer.text.splitlines()[0]
    assert answer.sources_used == ["HR portal", "knowledge base"]
    assert any("refers to HR portal" in note for note in answer.notes)


def test_a_correct_answer_that_names_no_source_or_an_unpermitted_one_asks_nothing():
    open_web = _Recording("HR portal", [PORTAL_DATES], open_web=True)  # a policy question never reaches the open web
    answer = _refer_pipeline(open_web).answer("When does open enrollment for health benefits start?")
    assert answer.question_class == "policy"
    assert answer.action == Action.CORRECT and open_web.sent == [] and answer.fallback_queries == []
    assert [c.origin for c in answer.citations] == ["kb"]
    unnamed = _Recording("Payroll calendar", [PORTAL_DATES])
    answer = _refer_pipeline(unnamed).answer("When does open enrollment start?")
    assert unnamed.sent == [] and [c.origin for c in answer.citations] == ["kb"]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("Dates are published on the HR portal.", True),
        ("Dates are published on the hr-portal.", True),
        ("See the HR\nportal for dates.", True),
        ("Dates are published on the HR portals page.", False),  # a different word
        ("Ask HR for the dates; the portal is down.", False),
    ],
)
def test_sources_named_in_matches_the_source_name_as_words(text, named):
    strip = Strip(passage=ENROLMENT_RULE, index=0, text=text)
    assert (sources_named_in([strip], [_Recording("HR portal", [])]) != []) == named


def test_sources_used_are_the_sources_the_reply_cites():
    # The portal was asked and its result cleared upper, but only one strip fits the reply.
    portal = _Recording("HR portal", [PORTAL_DATES])
    answer = _refer_pipeline(portal, strips_top_n=1).answer("When does open enrollment start?")
    assert portal.sent and len(answer.citations) == 1
    cited = {"knowledge base" if c.origin == "kb" else c.source for c in answer.citations}
    assert set(answer.sources_used) == cited


class _Broken:
    kind, open_web = "http", False

    def __init__(self, name: str, reply):
        self.name, self.reply = name, reply

    def search(self, keywords: str, limit: int) -> list[Passage]:
        return self.reply()


def _huge_json_number() -> list[Passage]:
    import json

    json.loads("1" * 5000)  # ValueError: more digits than Python converts (a source's odd reply)
    return []


def test_an_odd_reply_from_one_fallback_source_skips_that_source_only():
    surrogate = Passage(id="fb-x", text="Payslips \ud83d are out", origin="fallback", source="Wiki", document="w.md")
    sources = [_Broken("Numbers", _huge_json_number), _Broken("Wiki", lambda: [surrogate]), _Portal()]
    pipeline = CragPipeline(
        lambda _: _Retriever(),
        _ByText(),
        sources,
        PipelineConfig(thresholds=Thresholds(upper=0.9, lower=0.0, strip=0.0)),
    )
    answer = pipeline.answer("When do payslips show up in Workday?", AskContext())
    assert answer.found and [c.document for c in answer.citations] == ["payroll-calendar.md"]
    assert "fallback source Numbers failed: ValueError" in answer.notes
    assert "fallback source Wiki failed: UnicodeEncodeError" in answer.notes
    assert [q["source"] for q in answer.fallback_queries] == ["Numbers", "Wiki", "HR portal"]
