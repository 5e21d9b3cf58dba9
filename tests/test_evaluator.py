"""The evaluator: weak supervision, training, calibration, formats, caching, int8.

Everything runs offline on the packaged MiniLM and tiny configurations; the training test
takes well under a minute on 2 CPU cores.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from crag.checkpoint import detect_format, load_evaluator
from crag.inference import CachedEvaluator, CosineEvaluator, evaluator_from_bundle
from crag.judge import (
    EvaluatorConfig,
    FrozenStateCache,
    JudgeBundle,
    PassageStateCache,
    build_judge,
    collate,
    encode_pairs,
    read_apart,
)
from crag.minilm import minilm_folder
from crag.text import plain_sentences as split_sentences
from crag.training.fitting import _batches, _units, fit_judge, frozen_state_cache, rank_loss
from crag.training.metrics import (
    MIN_CALIBRATION_QUESTIONS,
    calibrate,
    evaluate_evaluator,
    held_out_passages,
    measure,
    roc_auc,
    score_until,
)
from crag.training.saving import load_weights, save_evaluator
from crag.training.train import OVERRUN_TOLERANCE, HeldOutScored, _overrun_note, general_fingerprint, train_evaluator
from crag.training.weak_supervision import (
    CorpusChunk,
    Pair,
    build_weak_supervision,
    conversational,
    find_entities,
    swap_entity,
    swap_focus,
    template_question,
)
from crag.types import Thresholds

if TYPE_CHECKING:
    from crag.training.train import LabelledData
    from crag.training.weak_supervision import WeakSupervision

# Short chunks about distinct topics, a few per document, with the numbers, dates and names
# that templated questions are made from.
TOY = [
    (
        "travel.md",
        "Travel > Expense reports",
        "Submit your expense report within 30 calendar days after the trip ends. Late reports need approval from your department VP. Reports older than 90 days are not reimbursed.",
    ),
    (
        "travel.md",
        "Travel > Lodging",
        "The nightly hotel cap is $250 before taxes. In New York and San Francisco the cap is $350. Conference hotels may exceed the cap when the group rate is used.",
    ),
    (
        "travel.md",
        "Travel > Meals",
        "Meals are covered by a per diem of $75 per full travel day. On the first and last day the per diem is $40. Do not claim meals provided by a client.",
    ),
    (
        "travel.md",
        "Travel > Airfare",
        "Book economy class for domestic flights. Premium economy is allowed when a flight segment is longer than 5 hours. First class is never reimbursed.",
    ),
    (
        "leave.md",
        "Leave > Paid time off",
        "Full-time employees receive 25 days of paid time off per calendar year. Unused days carry over up to a maximum of 5 days. Request time off in Workday.",
    ),
    (
        "leave.md",
        "Leave > Sick leave",
        "Every employee receives 10 paid sick days per year, credited on January 1. A doctor's note is required after 3 consecutive sick days.",
    ),
    (
        "leave.md",
        "Leave > Parental leave",
        "Birth and adoptive parents get 16 weeks of fully paid parental leave. Leave can be taken within 12 months of the birth or placement.",
    ),
    (
        "leave.md",
        "Leave > Bereavement",
        "Employees may take up to 5 days of paid bereavement leave for the death of a close family member. Tell your manager as soon as you can.",
    ),
    (
        "security.md",
        "Security > Passwords",
        "Passwords must be at least 14 characters long. Use the company password manager, 1Password, for every work account. Never reuse a password.",
    ),
    (
        "security.md",
        "Security > Lost devices",
        "Report a lost or stolen laptop to the IT helpdesk within 24 hours. IT will wipe the device remotely and issue a replacement.",
    ),
    (
        "security.md",
        "Security > USB drives",
        "USB storage drives are blocked on company laptops. Approved exceptions are valid for 30 days and only for encrypted drives.",
    ),
    (
        "security.md",
        "Security > Phishing",
        "Forward suspicious emails to the security team with the report button. Never enter your credentials on a page you reached from an email link.",
    ),
    (
        "remote.md",
        "Remote work > Hybrid schedule",
        "Hybrid employees work from their office at least 2 days per week. Tuesday and Thursday are the company-wide anchor days.",
    ),
    (
        "remote.md",
        "Remote work > Home office stipend",
        "Remote employees receive a one-time home office stipend of $500 for a desk, chair and monitor. Claim it within 60 days of your start date.",
    ),
    (
        "remote.md",
        "Remote work > Working abroad",
        "You may work from outside the country for up to 20 working days per calendar year. Longer stays need approval from People Operations.",
    ),
    (
        "remote.md",
        "Remote work > Core hours",
        "Core collaboration hours are 10:00 to 15:00 in your local time zone. Be reachable on Slack during core hours.",
    ),
    (
        "learning.md",
        "Learning > Budget",
        "Each employee has a learning budget of $1,500 per year for courses, books and conferences. Unused budget does not roll over.",
    ),
    (
        "learning.md",
        "Learning > Certifications",
        "The company pays exam fees for approved certifications. If you fail an exam, the company pays for one retake.",
    ),
    (
        "learning.md",
        "Learning > Study time",
        "You may spend up to 4 hours per week of working time on approved learning. Agree the schedule with your manager first.",
    ),
    (
        "referrals.md",
        "Referrals > Bonus",
        "A successful referral earns a bonus of $3,000, paid after the new hire completes 90 days. Interns and contractors are not eligible.",
    ),
    (
        "referrals.md",
        "Referrals > How to refer",
        "Submit referrals through the Referrals tab in Greenhouse. A recruiter will contact the candidate within 5 business days.",
    ),
    (
        "cards.md",
        "Corporate cards > Eligibility",
        "Employees who travel more than 4 times per year can request a corporate card. Finance approves every card request.",
    ),
    (
        "cards.md",
        "Corporate cards > Lost cards",
        "Freeze a lost card in the Ramp app immediately. Ramp ships a replacement card within 5 business days.",
    ),
    (
        "conduct.md",
        "Code of conduct > Gifts",
        "You may accept gifts worth up to $100 from a vendor. Report any larger gift to the Ethics Committee within 10 days.",
    ),
    (
        "conduct.md",
        "Code of conduct > Whistleblowing",
        "Report suspected fraud through the Ethics Line, which is available 24 hours a day. Reports can be made anonymously.",
    ),
    (
        "parking.md",
        "Office > Parking",
        "Parking permits for the Boston office cost $40 per month. Bicycle parking in the basement is free for every employee.",
    ),
]


@pytest.fixture(scope="module")
def embed():
    """all-MiniLM-L6-v2 sentence embeddings (mean pooling, normalised), as ingestion stores them."""
    from transformers import AutoTokenizer, BertModel

    folder = minilm_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = BertModel.from_pretrained(folder, local_files_only=True, add_pooling_layer=False).eval()

    def _embed(texts: list[str]) -> np.ndarray:
        out = []
        for i in range(0, len(texts), 64):
            enc = tokenizer(texts[i : i + 64], padding=True, truncation=True, max_length=256, return_tensors="pt")
            with torch.inference_mode():
                states = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).float()
            vectors = (states * mask).sum(1) / mask.sum(1)
            out.append(torch.nn.functional.normalize(vectors, dim=-1).numpy())
        return np.concatenate(out)

    return _embed


@pytest.fixture(scope="module")
def chunks(embed) -> list[CorpusChunk]:
    vectors = embed([text for _, _, text in TOY])
    return [
        CorpusChunk(id=f"{doc}#{i}", text=text, document=doc, section=section, embedding=vectors[i])
        for i, (doc, section, text) in enumerate(TOY)
    ]


TINY = EvaluatorConfig(
    t5_layers=1,
    t5_heads=2,
    t5_d_ff=128,
    max_length=128,
    train_max_length=96,
    train_batch_size=16,
    freeze_minilm_layers=3,
    lr_minilm=1e-4,
    lr_head=2e-3,
    # Held-out AUC of this prior-less toy model ranges about 0.4-0.65 over seeds and data
    # changes at 40 steps, 0.61-0.76 at 80 (seeds 0-2) and 0.73-0.87 at 120 (seeds 0, 1, 3; 2026-12-04).
    max_steps=120,
    min_steps=120,
    similarity_prior=False,  # the test must show learning, not the embedding prior
    separate_encoding=False,  # with no prior, the joint reading is the one that can learn in 80 steps
)


@pytest.fixture(scope="module")
def trained(chunks, embed, tmp_path_factory):
    events: list[dict] = []
    out = tmp_path_factory.mktemp("evaluators")
    result = train_evaluator(chunks, embed, out, budget_s=120, config=TINY, seed=0, progress=events.append)
    return result, events


# --- weak supervision -------------------------------------------------------------------


def test_templated_questions_ask_about_the_value():
    sentence = "Submit your expense report within 30 calendar days after the trip ends."
    entities = find_entities(sentence)
    kind, start, end, wh = entities[0]
    assert sentence[start:end] == "30 calendar days" and wh == "How many calendar days"
    questions = {template_question(sentence, start, end, wh, random.Random(s)) for s in range(6)}
    for q in questions:
        assert q.startswith("How many calendar days ") and q.endswith("?")
        assert "30" not in q and "within" not in q.split()  # the answer is not in the question
    money = "The nightly hotel cap is $250 before taxes."
    assert [(k, money[s:e], w) for k, s, e, w in find_entities(money)] == [("amount", "$250", "How much")]


def test_entity_swap_changes_only_the_value():
    text = "Reports are due within 30 calendar days. The cap is $250."
    swapped = swap_entity(text, "30 calendar days", random.Random(0))
    assert swapped is not None and swapped != text
    assert re.sub(r"\d+", "N", swapped) == re.sub(r"\d+", "N", text)
    assert swap_entity(text, "not there", random.Random(0)) is None
    assert swap_entity("Effective January 1, 2026.", "January 1", random.Random(0)) != "Effective January 1, 2026."


def test_weak_supervision_splits_by_chunk_and_never_uses_near_duplicates(chunks, embed):
    duplicate = CorpusChunk("dup#0", chunks[0].text + " ", chunks[0].document, chunks[0].section, chunks[0].embedding)
    ws = build_weak_supervision([*chunks, duplicate], embed, seed=0)
    assert ws.train_ids.isdisjoint(ws.val_ids)
    assert {chunks[0].id, "dup#0"} <= ws.train_ids or {chunks[0].id, "dup#0"} <= ws.val_ids
    text_to_id = {c.text: c.id for c in [*chunks, duplicate]}
    for pair in ws.train_pairs:
        assert pair.chunk_id in ws.train_ids  # training never sees a held-out chunk
    source_of = {q.text: q for q in ws.train_queries + ws.val_queries}
    for pair in ws.train_pairs + ws.val_pairs:
        if pair.label == 0 and pair.kind not in ("swap", "focus"):
            assert text_to_id[pair.passage] not in source_of[pair.question].related
    kinds = {q.kind for q in ws.train_queries}
    assert kinds == {"cloze", "template", "heading"}
    pair_kinds = {p.kind for p in ws.train_pairs}
    assert {"positive", "hard", "random"} <= pair_kinds
    # Inverse cloze removes the sentence from the positive most of the time.
    cloze = [q for q in ws.train_queries if q.kind == "cloze"]
    assert sum(q.text not in q.positive_text for q in cloze) > 0.7 * len(cloze)
    # Calibration: every question has an answer-present and an answer-absent set; some also
    # an on-topic absent set: the present candidates, asked about something they never mention.
    present = [s for s in ws.calibration_sets if s.present]
    absent = [s for s in ws.calibration_sets if not s.present and s.question in source_of]
    on_topic = [s for s in ws.calibration_sets if not s.present and s.question not in source_of]
    assert present and len(present) == len(absent) and on_topic
    for s in absent:
        assert not set(s.chunk_ids) & source_of[s.question].related
    for s in on_topic:
        twin = next(p for p in present if p.chunk_ids == s.chunk_ids)
        assert _one_word_apart(twin.question, s.question)


def _one_word_apart(a: str, b: str) -> bool:
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) and sum(x != y for x, y in zip(wa, wb)) == 1


def test_focus_negatives_ask_about_something_the_source_never_mentions(chunks, embed):
    ws = build_weak_supervision(chunks, embed, seed=0)
    focus = [p for p in ws.train_pairs if p.kind == "focus"]
    assert len(focus) > 0.3 * sum(q.kind != "cloze" for q in ws.train_queries)
    questions = {q.text: q for q in ws.train_queries}
    for pair in focus:
        assert pair.label == 0 and pair.query_kind != "cloze"
        original = next(
            q for q in questions.values() if q.source_id == pair.chunk_id and _one_word_apart(q.text, pair.question)
        )
        assert pair.passage == original.positive_text  # the very passage that answers the original
        new_word = next(y for x, y in zip(original.text.split(), pair.question.split()) if x != y)
        assert new_word.strip("?,.!").lower() not in pair.passage.lower()

    source = "Every employee receives 10 paid sick days per year."
    words = {w.lower().strip(".") for w in source.split()}
    swapped = swap_focus(
        "How many paid sick days per year?", words, ["bicycle", "sick"], {"sick": 3.0, "paid": 1.0}, random.Random(0)
    )
    assert swapped == "How many paid bicycle days per year?"  # the rarest shared word goes, for a word the source lacks
    assert swap_focus("What is this?", words, ["bicycle"], {}, random.Random(0)) is None  # no focus word


def test_conversational_questions_keep_the_question():
    rng_a, rng_b = random.Random(4), random.Random(4)
    variants = [conversational("How many sick days do I get?", rng_a) for _ in range(20)]
    assert variants == [conversational("How many sick days do I get?", rng_b) for _ in range(20)]  # deterministic
    assert all("sick days do i get" in v.lower() for v in variants)
    assert len(set(variants)) > 5 and "How many sick days do I get?" not in variants


def test_weak_supervision_is_deterministic(chunks, embed):
    a = build_weak_supervision(chunks, embed, seed=3)
    b = build_weak_supervision(chunks, embed, seed=3)
    assert a.train_pairs == b.train_pairs and a.val_pairs == b.val_pairs
    # The same documents ingested from elsewhere: other chunk ids (they hash the path), same data.
    moved = [replace(chunk, id=hashlib.sha1(f"/elsewhere/{chunk.id}".encode()).hexdigest()) for chunk in chunks]
    c = build_weak_supervision(moved, embed, seed=3)

    def content(pairs):
        return [(p.question, p.passage, p.label, p.kind) for p in pairs]

    assert content(c.train_pairs) == content(a.train_pairs) and content(c.val_pairs) == content(a.val_pairs)
    assert split_sentences("One sentence here. Two sentences here!\n- a list item") == [
        "One sentence here.",
        "Two sentences here!",
        "a list item",
    ]


# --- calibration and metrics ------------------------------------------------------------


def test_calibration_separates_present_from_absent():
    rng = np.random.default_rng(0)
    present = rng.normal(0.6, 0.1, 200)
    absent = rng.normal(-0.2, 0.1, 200)
    t = calibrate(present, absent, [0.5, 0.6, 0.7], [-0.5, -0.4, 0.0])
    assert -0.2 < t.upper < 0.6
    assert t.lower <= t.upper
    assert np.mean(absent < t.lower) >= 0.85
    assert 0.0 < t.strip <= 0.5
    assert roc_auc([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert roc_auc([0.5, 0.5], [1, 0]) == 0.5


def test_upper_is_the_best_cut_not_the_strict_end_of_a_flat_optimum():
    # One answer-present set at 0.4, 99 at 0.9, every answer-absent one at 0.0: a bar at 0.2
    # separates them all (J = 1.00); one at 0.65 loses the set at 0.4 (J = 0.99), nearly as good.
    t = calibrate([0.4] + [0.9] * 99, [0.0] * 100)
    assert t.upper == pytest.approx(0.2)


def test_upper_balanced_over_kinds_does_not_follow_how_many_of_each_kind_were_scored():
    labelled_present, labelled_absent = [0.3, 0.35, 0.4, 0.5, 0.6], [0.1, 0.2, 0.25, 0.45, 0.7]
    weak_present, weak_absent = [0.7, 0.8, 0.85, 0.9, 0.95], [0.2, 0.4, 0.5, 0.6, 0.65]

    def uppers(copies: int) -> tuple[float, float]:
        present, absent = labelled_present + weak_present * copies, labelled_absent + weak_absent * copies
        kinds = ["labelled"] * 5 + ["weak"] * 5 * copies
        pooled = calibrate(present, absent).upper
        return pooled, calibrate(present, absent, present_kinds=kinds, absent_kinds=kinds).upper

    (pooled_once, balanced_once), (pooled_five_times, balanced_five_times) = uppers(1), uppers(5)
    assert pooled_once != pooled_five_times  # pooled, five times the weak sets move upper
    assert balanced_once == balanced_five_times == pooled_once  # balanced, they do not


@pytest.mark.training
def test_evaluate_evaluator_measures_cosine_with_the_same_code(chunks, embed):
    cosine = CosineEvaluator(embed)
    report = evaluate_evaluator(cosine, chunks, embed, seed=0)
    assert report.evaluator.auc == pytest.approx(report.cosine.auc, abs=1e-6)
    assert 0.5 < report.cosine.auc <= 1.0
    assert report.evaluator.thresholds.lower <= report.evaluator.thresholds.upper
    assert not report.beats_cosine  # equal is not better
    q, passages = "How many sick days do I get?", [chunks[5].text, chunks[8].text]
    expected = embed(passages) @ embed([q])[0]
    assert cosine.score(q, passages) == pytest.approx(expected.tolist(), abs=1e-5)


class _ClockedEvaluator:
    """Cosine scores on a clock that each call moves on by `seconds_per_call`: a machine whose speed
    the test sets, and changes mid-way."""

    def __init__(self, embed, seconds_per_call: float):
        self.cosine, self.seconds_per_call, self.now, self.calls = CosineEvaluator(embed), seconds_per_call, 0.0, 0
        self.version = "clocked"

    def score(self, question, passages):
        self.now += self.seconds_per_call
        self.calls += 1
        return self.cosine.score(question, passages)

    def clock(self) -> float:
        return self.now


def test_calibration_scores_until_the_deadline_on_the_clock(chunks, embed):
    ws = build_weak_supervision(chunks, embed, seed=0)
    everything = held_out_passages(ws)
    timed = _ClockedEvaluator(embed, seconds_per_call=1.0)
    cached = CachedEvaluator(timed)
    assert score_until(cached, ws, deadline=1e9, sentence_evidence=True, clock=timed.clock) == (ws, None)
    # measure() then reads every score from the cache: nothing is scored twice.
    calls = timed.calls
    measure(cached, ws, sentence_evidence=True)
    assert timed.calls == calls

    # Past the deadline from the start: only the minimum, threshold-setting questions first.
    timed = _ClockedEvaluator(embed, seconds_per_call=1.0)
    subset, note = score_until(
        CachedEvaluator(timed), ws, deadline=0.0, sentence_evidence=True, min_questions=3, clock=timed.clock
    )
    kept = held_out_passages(subset)
    assert (
        len(kept) == 3
        and note
        == f"measured and calibrated on 3 of {len(everything)} held-out questions to stay within the time budget"
    )
    assert set(kept) <= {s.question for s in ws.calibration_sets}
    assert all(kept[q] == everything[q] for q in kept)  # a kept question keeps all its passages
    assert {s.question for s in subset.calibration_sets} == set(kept)
    assert subset.train_pairs == ws.train_pairs

    # A machine that slows down mid-way: scoring stops at the first question past the deadline.
    timed = _ClockedEvaluator(embed, seconds_per_call=1.0)
    cached = CachedEvaluator(timed)
    fast, _ = score_until(cached, ws, deadline=20.0, sentence_evidence=False, min_questions=1, clock=timed.clock)
    assert len(held_out_passages(fast)) == 20 < len(everything)
    timed.seconds_per_call = 10.0
    slow, _ = score_until(
        cached, ws, deadline=timed.now + 20.0, sentence_evidence=False, min_questions=1, clock=timed.clock
    )
    assert len(held_out_passages(slow)) == 20 + 2  # the 20 already cached cost nothing; then 2 slow ones


def _as_labelled(ws: WeakSupervision) -> LabelledData:
    """Weak supervision's held-out questions again as labelled ones, worded apart so that scoring
    one does not find the other in a cache."""
    from crag.training.metrics import HeldOut
    from crag.training.train import LabelledData

    def written(question: str) -> str:
        return "as written: " + question

    return LabelledData(
        [],
        HeldOut(
            [replace(p, question=written(p.question)) for p in ws.val_pairs],
            [replace(s, question=written(s.question)) for s in ws.calibration_sets],
            [replace(e, question=written(e.question)) for e in ws.strip_examples],
        ),
        embeddings={},
        description="weak supervision's questions, as written",
    )


def test_labelled_questions_get_the_calibration_time_and_weak_supervision_only_its_minimum(chunks, embed):
    from crag.training.train import _score_held_out_within_budget

    ws = build_weak_supervision(chunks, embed, seed=0)
    labelled = _as_labelled(ws)
    n_weak = len(held_out_passages(ws))
    assert n_weak > MIN_CALIBRATION_QUESTIONS
    # Time for everything twice over: the labelled questions calibrate, so they take it all ...
    timed = _ClockedEvaluator(embed, seconds_per_call=1.0)
    scored = _score_held_out_within_budget(
        CachedEvaluator(timed), ws, labelled, 1e5, 0.0, quantize_int8=False, clock=timed.clock
    )
    assert scored.gate == labelled.held_out
    # ... and weak supervision's sets, whose metrics are only kept beside the gate's, their minimum.
    assert len(held_out_passages(scored.weak)) == MIN_CALIBRATION_QUESTIONS
    assert scored.notes == [
        f"measured weak supervision on {MIN_CALIBRATION_QUESTIONS} of {n_weak} held-out questions: "
        "the labelled questions calibrate, so they get the time"
    ]
    # Without labelled questions, weak supervision's sets calibrate and get the time.
    timed = _ClockedEvaluator(embed, seconds_per_call=1.0)
    alone = _score_held_out_within_budget(
        CachedEvaluator(timed), ws, None, 1e5, 0.0, quantize_int8=False, clock=timed.clock
    )
    assert (alone.weak, alone.gate, alone.notes) == (ws, None, [])


def test_the_time_kept_for_calibration_is_for_the_questions_calibration_scores(chunks, embed, monkeypatch):
    from crag.training import train

    seconds_per_pair = 0.01
    monkeypatch.setattr(train, "inference_seconds_per_pair", lambda *args: seconds_per_pair)
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64))
    ws = build_weak_supervision(chunks, embed, seed=0)
    # More weak questions than their minimum: with labelled questions, the rest must take no time.
    assert len(held_out_passages(ws)) > MIN_CALIBRATION_QUESTIONS
    labelled = _as_labelled(ws)
    budget = 1e6  # no cap: the reserve is the estimate itself
    for with_labelled in (labelled, None):
        timed = _ClockedEvaluator(embed, seconds_per_call=1.0)
        held_out = train._score_held_out_within_budget(
            CachedEvaluator(timed), ws, with_labelled, budget, 0.0, quantize_int8=False, clock=timed.clock
        )
        scored_sets = [held_out.weak] + ([held_out.gate] if held_out.gate is not None else [])
        pairs = sum(len(passages) for held in scored_sets for passages in held_out_passages(held).values())
        reserve = train._calibration_reserve(bundle, ws, with_labelled, budget)
        assert reserve == pytest.approx(pairs * seconds_per_pair * train.CALIBRATION_OVERHEAD + 5.0)


def test_a_run_well_past_its_budget_says_by_how_much_and_why(chunks, embed):
    ws = build_weak_supervision(chunks, embed, seed=0)
    held_out = HeldOutScored(ws, None, [])
    phases = {"data": 4.0, "train": 159.0, "calibrate": 732.0}
    assert _overrun_note(300.0, 300.0 * OVERRUN_TOLERANCE, phases, held_out) is None
    note = _overrun_note(300.0, 895.0, phases, held_out)
    n = len(held_out_passages(ws))
    assert note is not None and note.startswith(
        f"overran its budget: 895 s against 300 s (data 4 s, training 159 s, calibration 732 s for {n} held-out questions"
    )
    assert f"at least {MIN_CALIBRATION_QUESTIONS} weak-supervision questions" in note


# --- training ---------------------------------------------------------------------------


def test_tiny_training_learns_and_saves_a_versioned_folder(trained):
    result, events = trained
    assert result.steps >= TINY.min_steps
    assert result.evaluator.auc > 0.6, result.evaluator  # held-out pairs, no similarity prior
    assert result.evaluator.score_std > 1e-3  # not collapsed to a constant
    # Cosine on the same held-out pairs (all of them, or what the budget left time to score on a busy machine).
    assert result.cosine.auc > 0.5 and result.cosine.n_pairs == result.evaluator.n_pairs <= result.n_val_pairs
    t = result.thresholds
    assert -1.0 <= t.lower <= t.upper <= 1.0 and t.strip <= t.upper
    assert result.n_train_pairs > 0 and result.n_val_pairs > 0
    phases = {e["phase"] for e in events}
    assert {"data", "train", "calibrate", "save"} <= phases
    losses = [e["loss"] for e in events if e["phase"] == "train"]
    assert len(losses) == result.steps and all(np.isfinite(losses))
    folder = Path(result.folder)
    assert folder.name == result.version
    for name in ("config.json", "model.safetensors", "metadata.json", "tokenizer"):
        assert (folder / name).exists(), name
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["version"] == result.version
    assert metadata["thresholds"] == pytest.approx(t.to_dict())
    assert set(metadata["metrics"]) == {"evaluator", "cosine"}
    assert detect_format(folder) == "minilm_t5"


def test_loaded_trained_evaluator_carries_its_thresholds(trained):
    result, _ = trained
    evaluator = load_evaluator(result.folder, threads=1)
    assert evaluator.version == result.version
    assert evaluator.thresholds.upper == pytest.approx(result.thresholds.upper)
    assert evaluator.thresholds.strip == pytest.approx(result.thresholds.strip)
    scores = evaluator.score("How many sick days do I get?", [TOY[5][2], TOY[8][2]])
    assert all(-1.0 <= s <= 1.0 for s in scores)


def test_save_load_round_trip_gives_the_same_scores(tmp_path):
    torch.manual_seed(0)
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64))
    torch.manual_seed(0)
    with torch.no_grad():
        bundle.model.head.weight.normal_(0, 0.5)  # a non-trivial head, as after training
    before = evaluator_from_bundle(bundle, "v1")
    question = "How long do I have to submit my expense report?"
    passages = [t for _, _, t in TOY[:7]] + ["Short one.", TOY[0][2] * 5]  # mixed lengths: padding
    expected = before.score(question, passages)
    save_evaluator(bundle, tmp_path / "v1", {"version": "v1"})
    after = load_evaluator(tmp_path / "v1", threads=1)
    assert after.version == "v1" and after.thresholds is None
    assert after.score(question, passages) == pytest.approx(expected, abs=1e-5)
    # Batching and length sorting do not change a score.
    singles = [after.score(question, [p])[0] for p in passages]
    assert singles == pytest.approx(expected, abs=1e-5)
    assert len(set(np.round(expected, 4))) > 1


def test_separate_encoding_starts_exactly_at_the_retrievers_cosine(embed, tmp_path):
    """Question and passage read apart: before training, the score is the bi-encoder cosine
    that retrieval ranks by (through the prior), whatever the passages' lengths."""
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, separate_encoding=True))
    judge = evaluator_from_bundle(bundle, "late")
    question = "How long do I have to submit my expense report?"
    passages = [t for _, _, t in TOY[:6]] + ["Short one.", TOY[0][2] * 3]
    cosine = embed(passages) @ embed([question])[0]
    logits = 10.0 * (cosine - 0.45)  # the prior's starting scale and shift; the head starts at zero
    expected = 2.0 / (1.0 + np.exp(-logits)) - 1.0
    assert judge.score(question, passages) == pytest.approx(expected.tolist(), abs=1e-4)
    save_evaluator(bundle, tmp_path / "late", {"version": "late"})
    assert load_evaluator(tmp_path / "late", threads=1).score(question, passages) == pytest.approx(
        expected.tolist(), abs=1e-4
    )


@pytest.mark.parametrize("joint_layers", [0, 2])
def test_separate_encoding_reads_each_question_once_and_scores_as_pair_by_pair(joint_layers):
    """Rows that share a question share one reading of it; a mixed batch scores every row
    exactly as that row alone (T5 blocks switched on with a random head), with MiniLM's top
    layers reading the pair packed or not."""
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, joint_minilm_layers=joint_layers))
    model = bundle.model.eval()
    torch.nn.init.normal_(model.head.weight, std=0.5)
    questions = ["How long do I have to submit my expense report?", "What is the hotel cap in New York?"]
    rows = [
        row
        for passage in (TOY[0][2], TOY[1][2], "Short one.")
        for question in questions
        for row in encode_pairs(bundle.tokenizer, "minilm_t5", question, [passage], 128)
    ]
    calls: list[int] = []
    hook = model.minilm.embeddings.register_forward_hook(
        lambda _m, args, kwargs, _out: calls.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    with torch.inference_mode():
        together = model(**collate(rows, 0))
        alone = torch.cat([model(**collate([row], 0)) for row in rows])
    hook.remove()
    assert calls[:2] == [2, len(rows)]  # two distinct questions read once each, then every passage
    assert together.tolist() == pytest.approx(alone.tolist(), abs=1e-4)
    assert together.std() > 0.01  # the T5 part speaks, so the check is not only the prior


@pytest.mark.parametrize("joint_layers", [0, 2])
def test_passage_state_cache_scores_exactly_as_without_and_reads_each_passage_once(tmp_path, joint_layers):
    """The cache of passages' MiniLM states (read apart they do not depend on the question)
    changes no score, spares MiniLM the passages it has read, and stays within its bytes; with
    joint layers it keeps the states where they start too."""
    torch.manual_seed(0)
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, joint_minilm_layers=joint_layers))
    with torch.no_grad():
        bundle.model.head.weight.normal_(0, 0.5)  # the T5 part speaks too
    save_evaluator(bundle, tmp_path / "v", {"version": "v"})
    plain = load_evaluator(tmp_path / "v", threads=1)
    cached = load_evaluator(tmp_path / "v", threads=1, passage_cache_mb=4)  # joint layers keep two states a token
    cache = cached.model.passage_cache
    assert plain.model.passage_cache is None and cache is not None
    passages = [t for _, _, t in TOY[:6]] + ["Short one.", TOY[0][2] * 3]  # mixed lengths: padding
    rows_read: list[int] = []
    cached.model.minilm.embeddings.register_forward_hook(
        lambda _m, _args, kwargs, _out: rows_read.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    for question in ("How long do I have to submit my expense report?", "What is the hotel cap in New York?"):
        # A cold call, then a warm one with the passages in another order and one new passage.
        assert cached.score(question, passages) == pytest.approx(plain.score(question, passages), abs=1e-5)
        mixed = passages[::-1] + [TOY[7][2]]
        assert cached.score(question, mixed) == pytest.approx(plain.score(question, mixed), abs=1e-5)
    # MiniLM read: question + 8 passages, question + the 1 new passage, then each later question alone.
    assert rows_read == [1, 8, 1, 1, 1, 1]
    assert cache.hits == 8 + 8 + 9 and len(cache) == 9 and 0 < cache.bytes <= 4 * 2**20
    # Bounded: a small budget evicts the least recently used passages.
    small = PassageStateCache(max_bytes=cache.bytes // 2)
    cached.model.passage_cache = small
    cached.score("How many sick days do I get?", passages)
    assert 0 < len(small) < len(passages) and small.bytes <= small.max_bytes


def _frozen_part_rows(bundle) -> list[dict[str, list[int]]]:
    """Pairs of two questions and mixed-length passages, one passage twice (padding, a repeat)."""
    questions = ["How long do I have to submit my expense report?", "What is the hotel cap in New York?"]
    passages = [TOY[0][2], TOY[1][2], "Short one.", TOY[0][2] * 3]
    return [
        row
        for question in questions
        for passage in passages
        for row in encode_pairs(bundle.tokenizer, "minilm_t5", question, [passage], 128)
    ]


@pytest.mark.parametrize("joint_layers", [0, 2])
def test_frozen_state_cache_gives_the_same_logits_and_gradients(joint_layers):
    """The frozen part's states cached (embeddings and the lowest layers, read in eval mode):
    the same logits, cold and warm, and in training mode, with the frozen layers in eval mode as
    the cache reads them, the same dropout draws, logits and gradients, with MiniLM's top layers
    reading the pair packed or not. fp16 storage moves a logit by about 1e-3."""
    torch.manual_seed(0)
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, joint_minilm_layers=joint_layers))
    model = bundle.model
    torch.nn.init.normal_(model.head.weight, std=0.5)  # the T5 part speaks too
    assert model.frozen_layers == 4  # EvaluatorConfig.freeze_minilm_layers
    batch = collate(_frozen_part_rows(bundle), 0)
    model.eval()
    with torch.no_grad():
        plain = model(**batch)
        model.frozen_cache = FrozenStateCache(2**30, layers=4, dtype=torch.float32)
        cold, warm = model(**batch), model(**batch)
        assert model.frozen_cache.misses == 2 + 4 and model.frozen_cache.hits == 2 + 4  # distinct texts, once
        model.frozen_cache = FrozenStateCache(2**30, layers=4)  # fp16, the default
        half = model(**batch)
    assert cold.tolist() == pytest.approx(plain.tolist(), abs=1e-5) and warm.tolist() == cold.tolist()
    assert half.tolist() == pytest.approx(plain.tolist(), abs=2e-2) and plain.std() > 0.1

    def step(cache):
        model.frozen_cache = cache
        model.zero_grad()
        torch.manual_seed(1)  # the same dropout draws in the layers that learn
        logits = model(**batch)
        logits.sum().backward()
        return logits.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    model.train()
    for module in [model.minilm.embeddings, *model.minilm.encoder.layer[:4]]:
        module.eval()
    without, grads_without = step(None)
    with_cache, grads_with = step(FrozenStateCache(2**30, layers=4, dtype=torch.float32))
    assert with_cache.tolist() == pytest.approx(without.tolist(), abs=1e-5)
    assert grads_with.keys() == grads_without.keys() and not any(n.startswith("minilm.embeddings") for n in grads_with)
    for name, grad in grads_with.items():
        assert torch.allclose(grad, grads_without[name], atol=1e-5), name


def test_joint_layers_read_the_pair_start_at_the_prior_save_and_reload(embed, tmp_path):
    """MiniLM's top layers reading the packed pair: before training the score is still the
    retriever's cosine (the prior reads the texts apart), the T5 part then gets other states
    than read apart, and the shape saves and reloads; joint layers among the frozen ones, or
    without separate reading, are refused."""
    torch.manual_seed(0)
    joint = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, joint_minilm_layers=2))
    question = "How long do I have to submit my expense report?"
    passages = [t for _, _, t in TOY[:5]] + ["Short one."]
    cosine = embed(passages) @ embed([question])[0]
    expected = 2.0 / (1.0 + np.exp(-10.0 * (cosine - 0.45))) - 1.0
    assert evaluator_from_bundle(joint, "j").score(question, passages) == pytest.approx(expected.tolist(), abs=1e-4)
    apart = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64))
    apart.model.load_state_dict(joint.model.state_dict())
    for model in (joint.model, apart.model):
        torch.nn.init.constant_(model.head.weight, 0.5)
    rows = encode_pairs(joint.tokenizer, "minilm_t5", question, passages, 128)
    with torch.no_grad():
        joint_logits, apart_logits = joint.model.eval()(**collate(rows, 0)), apart.model.eval()(**collate(rows, 0))
    assert (joint_logits - apart_logits).abs().max() > 1e-3
    save_evaluator(joint, tmp_path / "j", {"version": "j"})
    reloaded = load_evaluator(tmp_path / "j", threads=1)
    assert reloaded.model.joint_from == 4
    assert reloaded.score(question, passages) == pytest.approx(
        evaluator_from_bundle(joint, "j").score(question, passages), abs=1e-5
    )
    with pytest.raises(ValueError, match="frozen"):
        cached = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, joint_minilm_layers=3))
        cached.model.frozen_cache = FrozenStateCache(2**20, layers=4)
        cached.model(**collate(rows, 0))
    with pytest.raises(ValueError, match="separate_encoding"):
        build_judge(
            EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, separate_encoding=False, joint_minilm_layers=2)
        )


def test_frozen_state_cache_filled_ahead_reads_nothing_more_and_keeps_to_its_bytes():
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, separate_encoding=True))
    model = bundle.model.eval()
    rows = _frozen_part_rows(bundle)
    texts = {tuple(text) for row in rows for text in read_apart(row)}
    assert len(texts) == 2 + 4
    cache = FrozenStateCache(2**30, layers=4)
    done: list[tuple[int, int]] = []
    assert model.fill_frozen_cache(list(texts), cache, batch_size=4, progress=lambda *p: done.append(p))
    assert done == [(0, 6), (4, 6), (6, 6)] and len(cache) == 6
    model.frozen_cache = cache
    with torch.no_grad():
        model(**collate(rows, 0))
    assert cache.misses == 0 and cache.hits == 6
    # Too small for them all: nothing is read ahead (steps then read what they lack, in an LRU).
    assert not model.fill_frozen_cache(list(texts), FrozenStateCache(cache.bytes // 2, layers=4))


def test_frozen_state_cache_applies_only_to_separate_encoding():
    separate = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64))
    cache = frozen_state_cache(separate.model, 64)
    assert cache is not None and cache.layers == 4 and cache.max_bytes == 64 * 2**20
    assert frozen_state_cache(separate.model, 0) is None  # off
    joint = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, separate_encoding=False))
    encoder = build_judge(EvaluatorConfig(kind="t5_encoder", t5_layers=1, t5_heads=2, t5_d_ff=64))
    assert frozen_state_cache(joint.model, 64) is None and frozen_state_cache(encoder.model, 64) is None


@pytest.mark.training
def test_fit_judge_with_the_frozen_cache_reads_each_text_once_learns_and_reloads(tmp_path):
    """fit_judge caches the frozen part by default: every distinct question and passage goes
    through the frozen layers once (read ahead, shown as the "cache" phase, when the plan reads
    every pair), the loss falls, and the judge saves and reloads as before."""
    rng = random.Random(0)
    pairs = []
    for i, (_, section, text) in enumerate(TOY[:12]):
        question = f"What does the policy say about {section.split(' > ')[1].lower()}?"
        pairs.append(Pair(question, text, 1, "positive", "template", str(i)))
        for j in rng.sample([k for k in range(12) if k != i], 2):
            pairs.append(Pair(question, TOY[j][2], 0, "random", "template", str(j)))
    config = EvaluatorConfig(
        t5_layers=1, t5_heads=2, t5_d_ff=64, train_max_length=96, train_batch_size=8, max_steps=30, min_steps=30
    )
    torch.manual_seed(0)
    bundle = build_judge(config)
    model = bundle.model
    rows = [encode_pairs(bundle.tokenizer, "minilm_t5", p.question, [p.passage], 96)[0] for p in pairs]
    texts = {tuple(text) for row in rows for text in read_apart(row)}
    read_by_frozen: list[int] = []
    model.minilm.encoder.layer[0].register_forward_hook(lambda _m, args, _out: read_by_frozen.append(args[0].shape[0]))
    events: list[tuple] = []
    question, passages = "How many sick days do I get?", [TOY[5][2], TOY[8][2]]
    after: list[int] = []
    midway: list[list[float]] = []

    def after_step(step: int, trained: JudgeBundle) -> None:  # as bench/learning_curve.py measures
        after.append(step)
        if step == 15:
            trained.model.eval()
            midway.append(evaluator_from_bundle(trained, "midway").score(question, passages))
            trained.model.train()

    fitted = fit_judge(
        bundle, pairs, config, 0, lambda: 600.0, lambda *event: events.append(event), after_step=after_step
    )
    assert fitted.steps == 30 and model.frozen_cache is None
    assert after == list(range(1, 31))
    # Each distinct text once, through steps 1-3 and the read-ahead; and the midway question,
    # new to the cache (its two passages were cached by then).
    assert sum(read_by_frozen) == len(texts) + 1
    phases = [event[0] for event in events]
    # Steps 1-3, then (the plan at step 3 reads every pair) the read-ahead, then training on.
    assert phases[:2] == ["train"] * 2 and phases[2] == "cache" and phases.count("train") == 30
    assert set(phases[phases.index("train", 2) :]) == {"train"}
    losses = [event[3] for event in events if event[0] == "train"]
    assert losses[-1] < losses[0]
    expected = evaluator_from_bundle(bundle, "c").score(question, passages)
    assert midway and midway[0] != pytest.approx(expected, abs=1e-4)  # measured midway, then trained on
    save_evaluator(bundle, tmp_path / "c", {"version": "c"})
    assert load_evaluator(tmp_path / "c", threads=1).score(question, passages) == pytest.approx(expected, abs=1e-5)


def test_rank_loss_asks_that_a_groups_answer_outrank_the_rest_of_its_group():
    """The listwise term: low when a group's answer has its highest logit, high when its lowest;
    a group without both an answer and a non-answer, and a pair of no group, play no part."""
    labels = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    groups = ["q1", "q1", "q1", "q2", "q2", ""]
    answer_first = rank_loss(torch.tensor([3.0, 0.0, -1.0, 5.0, 6.0, -9.0]), labels, groups)
    answer_last = rank_loss(torch.tensor([-1.0, 0.0, 3.0, 5.0, 6.0, -9.0]), labels, groups)
    assert answer_first is not None and answer_last is not None
    assert float(answer_first) < 0.2 < 3.0 < float(answer_last)
    expected = torch.logsumexp(torch.tensor([-1.0, 0.0, 3.0]), 0) - (-1.0)  # q2 (no answer) and "" left out
    assert float(answer_last) == pytest.approx(float(expected))
    assert rank_loss(torch.zeros(3), torch.tensor([0.0, 0.0, 1.0]), ["q2", "q2", ""]) is None


def test_batches_keep_a_rank_group_whole_and_read_every_pair_once():
    pairs = [Pair("q", f"p{i}", i % 2, "hard", "corpus", str(i), f"g{i // 5}" if i < 20 else "") for i in range(40)]
    lengths = [10 + (i * 7) % 50 for i in range(40)]
    grouped = _batches(_units(pairs, grouped=True), lengths, 8, random.Random(0))
    assert sorted(i for batch in grouped for i in batch) == list(range(40))
    assert all(len(batch) <= 8 for batch in grouped)
    for g in range(4):
        assert sum(1 for batch in grouped if any(pairs[i].rank_group == f"g{g}" for i in batch)) == 1
    # Without the ranking term every pair travels alone, as before the groups existed.
    assert _units(pairs, grouped=False) == [[i] for i in range(40)]


@pytest.mark.training
def test_fit_judge_with_a_rank_weight_ranks_each_group_whole_in_one_step(monkeypatch):
    """With `rank_weight`, each step's listwise term sees every pair of a rank group at once (a
    group is batched whole), and the loss still falls."""
    import crag.training.fitting as fitting

    pairs = []
    for i, (_, section, text) in enumerate(TOY[:8]):
        question = f"What does the policy say about {section.split(' > ')[1].lower()}?"
        pairs.append(Pair(question, text, 1, "positive", "corpus", str(i), f"q{i}"))
        pairs += [Pair(question, TOY[(i + k) % 12][2], 0, "hard", "corpus", str(k), f"q{i}") for k in (1, 2)]
    config = EvaluatorConfig(
        t5_layers=1, t5_heads=2, t5_d_ff=64, train_max_length=96, train_batch_size=7, max_steps=12, min_steps=12,
        rank_weight=1.0,
    )  # fmt: skip
    seen: list[list[str]] = []
    real = fitting.rank_loss

    def recording(logits, labels, groups):
        seen.append(list(groups))
        return real(logits, labels, groups)

    monkeypatch.setattr(fitting, "rank_loss", recording)
    torch.manual_seed(0)
    events: list[tuple] = []
    fitted = fit_judge(build_judge(config), pairs, config, 0, lambda: 600.0, lambda *event: events.append(event))
    assert fitted.steps == 12 and len(seen) == 12
    assert all(groups.count(g) == 3 for groups in seen for g in groups)  # every group whole
    losses = [event[3] for event in events if event[0] == "train"]
    assert losses[-1] < losses[0]


def test_a_general_evaluator_trained_before_the_rank_weight_keeps_its_fingerprint():
    """An install's general evaluator is found by its fingerprint: a new training knob at its
    default (`rank_weight`, `joint_minilm_layers`) must not change it, or `evaluator train` would
    no longer adapt it. The expected value is what the code before `rank_weight` computed for
    these pairs (commit 228bc69)."""
    pairs = [
        Pair("How many sick days?", "Staff get 12 sick days a year.", 1, "positive", "corpus", "c1"),
        Pair("How many sick days?", "Book leave in HandsHub.", 0, "hard", "corpus", "c2"),
    ]
    assert general_fingerprint(pairs, EvaluatorConfig(), 3) == "984dc9688440"
    assert general_fingerprint(pairs, replace(EvaluatorConfig(), rank_weight=1.0), 3) != "984dc9688440"
    assert general_fingerprint(pairs, replace(EvaluatorConfig(), joint_minilm_layers=2), 3) != "984dc9688440"


def test_fused_gelu_scores_as_transformers_python_gelu():
    """The T5 blocks' activation swapped for PyTorch's fused tanh GELU: the same scores."""
    from transformers.activations import GELUTanh, NewGELUActivation

    torch.manual_seed(0)
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, separate_encoding=True))
    model = bundle.model.eval()
    torch.nn.init.normal_(model.head.weight, std=0.5)
    assert any(isinstance(m, GELUTanh) for m in model.modules())
    assert not any(isinstance(m, NewGELUActivation) for m in model.modules())
    rows = encode_pairs(
        bundle.tokenizer,
        "minilm_t5",
        "How long do I have to submit my expense report?",
        [t for _, _, t in TOY[:6]],
        128,
    )
    with torch.inference_mode():
        fused = model(**collate(rows, 0))
        for layer in model.t5.encoder.block:
            layer.layer[-1].DenseReluDense.act = NewGELUActivation()
        python = model(**collate(rows, 0))
    assert fused.tolist() == pytest.approx(python.tolist(), abs=1e-5) and fused.std() > 0.01


@pytest.mark.training
def test_separate_encoding_trains_saves_and_reloads(chunks, embed, tmp_path, monkeypatch):
    import crag.training.train as train_module

    judges: list[tuple[torch.nn.Module, dict]] = []

    def spied(bundle, version, metadata=None, **kwargs):
        judges.append((bundle.model, kwargs))
        return evaluator_from_bundle(bundle, version, metadata, **kwargs)

    monkeypatch.setattr(train_module, "evaluator_from_bundle", spied)
    config = EvaluatorConfig(
        t5_layers=1,
        t5_heads=2,
        t5_d_ff=128,
        max_length=128,
        train_max_length=96,
        max_steps=20,
        min_steps=20,
        separate_encoding=True,
    )
    # A budget that scores every held-out question, so that the comparison below is on the same ones.
    result = train_evaluator(chunks, embed, tmp_path, budget_s=600, config=config, seed=0)
    assert result.steps == 20 and result.evaluator.score_std > 1e-3
    assert result.evaluator.auc > 0.6, result.evaluator  # it starts from the retriever's cosine
    saved = json.loads((Path(result.folder) / "config.json").read_text())["evaluator_config"]
    assert saved["separate_encoding"] is True
    scores = load_evaluator(result.folder, threads=1).score("How many sick days do I get?", [TOY[5][2], TOY[8][2]])
    assert all(-1.0 <= s <= 1.0 for s in scores) and scores[0] != scores[1]
    # Calibration read each passage's MiniLM states once, through a cache it dropped afterwards ...
    [(model, kwargs)] = judges
    assert kwargs["passage_cache_mb"] > 0 and model.passage_cache is None
    # ... and measured what the saved evaluator, reading every passage afresh, measures.
    ws = build_weak_supervision(chunks, embed, seed=0)
    again = measure(CachedEvaluator(load_evaluator(result.folder, threads=1)), ws, sentence_evidence=True)
    assert again.auc == pytest.approx(result.evaluator.auc, abs=1e-3)
    assert again.thresholds.upper == pytest.approx(result.thresholds.upper, abs=1e-3)


def test_configs_saved_before_separate_encoding_read_jointly():
    assert EvaluatorConfig.from_dict({"kind": "minilm_t5", "t5_layers": 2}).separate_encoding is False
    assert EvaluatorConfig.from_dict({"separate_encoding": True}).separate_encoding is True
    assert EvaluatorConfig().separate_encoding is True  # new evaluators read apart


def test_t5_encoder_kind_round_trips(tmp_path):
    torch.manual_seed(0)
    bundle = build_judge(EvaluatorConfig(kind="t5_encoder", t5_layers=1, t5_heads=2, t5_d_ff=64))
    with torch.no_grad():
        bundle.model.head.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(2))
    question, passages = "What is the hotel cap?", [t for _, _, t in TOY[:4]]
    expected = evaluator_from_bundle(bundle, "enc").score(question, passages)
    save_evaluator(bundle, tmp_path / "enc", {"version": "enc"})
    assert detect_format(tmp_path / "enc") == "t5_encoder"
    assert load_evaluator(tmp_path / "enc", threads=1).score(question, passages) == pytest.approx(expected, abs=1e-5)
    with pytest.raises(ValueError):
        build_judge(EvaluatorConfig(kind="t5_seq_cls"))  # brought, never trained here


def test_int8_path_runs_and_stays_close(tmp_path):
    # Without the similarity prior: it multiplies small int8 errors in MiniLM's states by its
    # scale, which is why int8 evaluators get thresholds of their own (checked below).
    torch.manual_seed(0)  # the T5 block starts random: fix it
    bundle = build_judge(
        EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, similarity_prior=False, separate_encoding=False)
    )
    with torch.no_grad():
        bundle.model.head.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
    thresholds = {"upper": 0.5, "lower": -0.5, "strip": 0.0}
    thresholds_int8 = {"upper": 0.4, "lower": -0.6, "strip": -0.1}
    save_evaluator(
        bundle, tmp_path / "v2", {"version": "v2", "thresholds": thresholds, "thresholds_int8": thresholds_int8}
    )
    fp32 = load_evaluator(tmp_path / "v2", threads=1)
    int8 = load_evaluator(tmp_path / "v2", threads=1, quantize_int8=True)
    assert int8.version == "v2+int8"  # its cache entries never mix with fp32 scores
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    assert any(isinstance(m, DynamicLinear) for m in int8.model.modules())
    question = "What is the hotel cap?"
    passages = [t for _, _, t in TOY[:8]]
    a, b = fp32.score(question, passages), int8.score(question, passages)
    assert all(np.isfinite(b)) and all(-1.0 <= s <= 1.0 for s in b)
    print("int8 vs fp32: corr", np.corrcoef(a, b)[0, 1], "mean abs diff", np.abs(np.subtract(a, b)).mean())
    assert np.corrcoef(a, b)[0, 1] > 0.7 and np.abs(np.subtract(a, b)).mean() < 0.1
    assert fp32.thresholds.upper == 0.5 and int8.thresholds.upper == 0.4 and int8.thresholds.strip == -0.1


def test_int8_keeps_the_ranking_of_a_separate_encoding_judge(tmp_path):
    # int8 shifts scores (hence its own thresholds); what must survive is the order.
    torch.manual_seed(0)
    bundle = build_judge(EvaluatorConfig(t5_layers=1, t5_heads=2, t5_d_ff=64, separate_encoding=True))
    with torch.no_grad():
        bundle.model.head.weight.normal_(0, 0.1, generator=torch.Generator().manual_seed(1))
    save_evaluator(bundle, tmp_path / "v3", {"version": "v3"})
    passages = [t for _, _, t in TOY[:8]]
    a = load_evaluator(tmp_path / "v3", threads=1).score("What is the hotel cap?", passages)
    b = load_evaluator(tmp_path / "v3", threads=1, quantize_int8=True).score("What is the hotel cap?", passages)
    assert np.corrcoef(a, b)[0, 1] > 0.9 and all(-1.0 <= s <= 1.0 for s in b)


# --- bring a checkpoint: the official CRAG format ------------------------------------------


def _tiny_official_checkpoint(folder: Path) -> tuple[object, object]:
    """A T5ForSequenceClassification (num_labels=1) with a small Unigram T5 tokenizer, no download."""
    from transformers import T5Config, T5ForSequenceClassification, T5Tokenizer

    words = sorted({w.lower() for _, _, t in TOY for w in re.findall(r"\w+|[^\w\s]", t)} | {"[", "]", "sep"})
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [("▁" + w, -5.0) for w in words] + [(w, -8.0) for w in words]
    vocab += [(c, -12.0) for c in "abcdefghijklmnopqrstuvwxyz0123456789$"]
    tokenizer = T5Tokenizer(vocab=vocab, extra_ids=0)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = T5ForSequenceClassification(config).eval()
    with torch.no_grad():
        model.classification_head.out_proj.bias.fill_(3.0)  # raw logits land outside [-1, 1]
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


def test_official_t5_seq_cls_checkpoint_returns_raw_logits(tmp_path):
    model, tokenizer = _tiny_official_checkpoint(tmp_path / "crag-t5")
    assert detect_format(tmp_path / "crag-t5") == "t5_seq_cls"
    evaluator = load_evaluator(tmp_path / "crag-t5", threads=1)
    question = "how many sick days do employees get"
    passages = [TOY[5][2], TOY[0][2], "short passage", TOY[1][2] + " " + TOY[2][2]]
    scores = evaluator.score(question, passages)
    expected = []
    with torch.inference_mode():
        for p in passages:  # one pair at a time, as the official scripts do
            enc = tokenizer(question + " [SEP] " + p, return_tensors="pt", truncation=True, max_length=512)
            expected.append(float(model(**enc).logits.reshape(-1)[0]))
    assert scores == pytest.approx(expected, abs=1e-4)
    assert max(scores) > 1.0  # raw logit, not squashed
    assert evaluator.thresholds is None  # brought checkpoints must be calibrated on this corpus


def test_unknown_checkpoint_formats_are_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError):
        load_evaluator(tmp_path)
    (tmp_path / "config.json").write_text(
        json.dumps({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]})
    )
    with pytest.raises(ValueError):
        load_evaluator(tmp_path)


# --- caching ----------------------------------------------------------------------------


class CountingEvaluator:
    version = "fake-1"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def score(self, question, passages):
        self.calls.append(list(passages))
        return [float(len(question) + len(p)) / 100.0 for p in passages]


def test_cache_returns_identical_scores_and_avoids_recomputation():
    inner = CountingEvaluator()
    cached = CachedEvaluator(inner, max_items=3)
    first = cached.score("q", ["a", "bb", "a"])
    assert inner.calls == [["a", "bb"]]  # a repeated passage is scored once
    assert cached.score("q", ["bb", "a"]) == [first[1], first[0]]
    assert len(inner.calls) == 1 and cached.hits == 2
    cached.score("q", ["a", "ccc"])
    assert inner.calls[-1] == ["ccc"]
    assert cached.score("other question", ["a"]) != first[:1] and inner.calls[-1] == ["a"]
    # Bounded: the least recently used entry ("bb") was evicted.
    cached.score("q", ["bb"])
    assert inner.calls[-1] == ["bb"]
    assert cached.version == "fake-1"
    # Keys include the version: another model never reads these scores.
    inner.version = "fake-2"
    cached.score("q", ["a"])
    assert inner.calls[-1] == ["a"]


QUICK = replace(TINY, max_steps=2, min_steps=2)


@pytest.fixture(scope="module")
def quick_plain(chunks, embed, tmp_path_factory):
    """Two steps on weak supervision alone: what added training data is compared with."""
    return train_evaluator(chunks, embed, tmp_path_factory.mktemp("quick"), budget_s=30, config=QUICK, seed=0)


def test_review_pairs_join_training_weighted(chunks, embed, quick_plain, tmp_path):
    from crag.training.weak_supervision import Pair

    extra = [
        Pair("Can I bring my dog to work?", chunks[4].text, 0, "review", "review", chunks[4].id),
        Pair("How many days roll over into next year?", chunks[4].text, 1, "review", "review", chunks[4].id),
    ]
    plain = quick_plain
    with_reviews = train_evaluator(
        chunks, embed, tmp_path, budget_s=30, config=QUICK, seed=0, extra_pairs=extra, extra_weight=3
    )
    assert with_reviews.n_train_pairs == plain.n_train_pairs + 6
    assert with_reviews.n_val_pairs == plain.n_val_pairs  # validation stays on the weak split
    assert "trained with 2 pairs from labelled real questions (each weighted x3)" in with_reviews.notes
    metadata = json.loads((Path(with_reviews.folder) / "metadata.json").read_text())
    assert metadata["training"]["n_review_pairs"] == 2


def test_labelled_data_joins_training_and_gates_and_calibrates(chunks, embed, quick_plain, tmp_path):
    from crag.training.metrics import HeldOut
    from crag.training.train import LabelledData
    from crag.training.weak_supervision import CandidateSet, Pair, StripExample

    pto, sick, passwords = chunks[4].text, chunks[5].text, chunks[8].text
    questions = [
        ("how many vacation days roll over?", True, [pto, sick, passwords]),
        ("do we get a gym allowance", False, [sick, pto, passwords]),
        ("how long must my password be", True, [passwords, pto, sick]),
        ("can my dog come to the office", False, [passwords, sick, pto]),
    ]
    held_out = HeldOut(
        val_pairs=[
            Pair(q, text, int(present and i == 0), "hard" if i else "positive", "corpus", "c")
            for q, present, texts in questions
            for i, text in enumerate(texts)
        ],
        calibration_sets=[
            CandidateSet(q, "corpus", present, ("a", "b", "c"), tuple(texts)) for q, present, texts in questions
        ],
        strip_examples=[
            StripExample(questions[0][0], "Unused days carry over up to a maximum of 5 days.", 1),
            StripExample(questions[0][0], "Request time off in Workday.", 0),
        ],
    )
    labelled = LabelledData(
        [
            Pair("pto rollover?", pto, 1, "positive", "corpus", chunks[4].id),
            Pair("pto rollover?", sick, 0, "hard", "corpus", chunks[5].id),
        ],
        held_out,
        embeddings={},
        description="four toy questions",
    )
    plain = quick_plain
    result = train_evaluator(chunks, embed, tmp_path, budget_s=30, config=QUICK, seed=0, labelled=labelled)
    assert result.n_train_pairs == plain.n_train_pairs + 2
    # The gate (evaluator against cosine) is measured on the labelled questions alone ...
    assert result.evaluator.n_sets == result.cosine.n_sets == 4
    assert result.evaluator.n_pairs == result.cosine.n_pairs == 12
    metadata = json.loads((Path(result.folder) / "metadata.json").read_text())
    assert metadata["gate"] == "four toy questions"
    assert metadata["training"]["n_labelled_pairs"] == 2
    # ... the weak supervision's metrics are kept beside them.
    assert metadata["metrics"]["weak"]["evaluator"]["n_sets"] == plain.evaluator.n_sets
    assert result.thresholds.to_dict() == metadata["thresholds"]
    # The thresholds are the labelled questions' own: the weak-supervision sets do not move them.
    assert metadata["thresholds"] == Thresholds(**metadata["metrics"]["evaluator"]["thresholds"]).to_dict()
    assert metadata["notes"][0] == "trained with 2 pairs and gated on 4 retrieval sets from four toy questions"


def _toy_labelled(chunks) -> LabelledData:
    from crag.training.metrics import HeldOut
    from crag.training.train import LabelledData
    from crag.training.weak_supervision import CandidateSet, Pair

    pto, sick = chunks[4].text, chunks[5].text
    held_out = HeldOut(
        [
            Pair("pto rollover?", pto, 1, "positive", "corpus", "a"),
            Pair("pto rollover?", sick, 0, "hard", "corpus", "b"),
        ],
        [CandidateSet("pto rollover?", "corpus", True, ("a", "b"), (pto, sick))],
        [],
    )
    train = [
        Pair(q, text, label, "positive" if label else "hard", "corpus", chunks[i].id)
        for q, (i, text, label) in [
            ("how many days carry over", (4, pto, 1)),
            ("how many days carry over", (5, sick, 0)),
            ("sick note after how long", (5, sick, 1)),
            ("sick note after how long", (4, pto, 0)),
        ]
    ]
    return LabelledData(train * 8, held_out, embeddings={}, description="toy corpus")


@pytest.mark.training
def test_general_evaluator_is_trained_once_and_adapted_from(chunks, embed, tmp_path):
    from crag.training.train import train_general

    labelled = _toy_labelled(chunks)
    folder = train_general(labelled, tmp_path / "general", budget_s=60, config=QUICK, seed=0)
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["general"] is True and metadata["training"]["steps"] == 2
    assert metadata["fingerprint"] == general_fingerprint(labelled.train_pairs, QUICK, 0)
    assert general_fingerprint(labelled.train_pairs, QUICK, 1) != metadata["fingerprint"]
    assert general_fingerprint(labelled.train_pairs[:-1], QUICK, 0) != metadata["fingerprint"]
    # Resumed, it trains further from its own weights and counts both runs.
    before = load_evaluator(folder).score("how many days carry over", [chunks[4].text])
    train_general(labelled, folder, budget_s=60, config=QUICK, seed=0, resume=True, version="general-v2")
    resumed = json.loads((folder / "metadata.json").read_text())["training"]
    # Trained under a temporary name (application/evaluators.py's ".partial"), it is known by its own.
    assert load_evaluator(folder).version == "general-v2"
    assert (resumed["runs"], resumed["steps"], resumed["pairs_seen"]) == (2, 4, 2 * metadata["training"]["pairs_seen"])
    assert load_evaluator(folder).score("how many days carry over", [chunks[4].text]) != pytest.approx(before, abs=1e-6)
    with pytest.raises(ValueError, match="another seed"):
        train_general(labelled, folder, budget_s=60, config=QUICK, seed=1, resume=True)

    # Adapting starts from the general weights: with no step taken, it scores exactly as the general one.
    still = replace(QUICK, max_steps=0, min_steps=0)
    question, passages = "how many days carry over", [chunks[4].text, chunks[5].text, chunks[8].text]
    general_scores = load_evaluator(folder).score(question, passages)
    adapted = train_evaluator(chunks, embed, tmp_path / "adapted", budget_s=30, config=still, seed=0, start_from=folder)
    assert load_evaluator(adapted.folder).score(question, passages) == pytest.approx(general_scores, abs=1e-5)
    assert adapted.notes[0] == "adapted from the general evaluator general"
    untrained = evaluator_from_bundle(build_judge(QUICK), "untrained")
    assert untrained.score(question, passages) != pytest.approx(general_scores, abs=1e-5)


def test_general_evaluator_of_another_shape_is_refused(chunks, tmp_path):
    from crag.training.train import train_general

    folder = train_general(_toy_labelled(chunks), tmp_path / "general", budget_s=60, config=QUICK, seed=0)
    with pytest.raises(ValueError, match="t5_layers"):
        load_weights(build_judge(replace(QUICK, t5_layers=2)), folder)
