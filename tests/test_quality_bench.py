"""bench/quality.py's arithmetic: what counts as right, wrong and abstained per category, and the
worst seed taken column by column (the issue's targets are judged on it)."""

from __future__ import annotations

from bench.quality import CORPUS_CATEGORIES, Outcome, SystemResult, table


def _result(name: str, kb_right: int, kb_wrong: int, kb_abstained: int, off_topic_answered: int) -> SystemResult:
    result = SystemResult(name, CORPUS_CATEGORIES)
    result.outcomes["kb"] = (
        [Outcome(True, True, "correct", 0.1, True, 30)] * kb_right
        + [Outcome(True, False, "correct", 0.1, False, 90)] * kb_wrong
        + [Outcome(False, False, "incorrect", 0.1)] * kb_abstained
    )
    result.outcomes["none-off-topic"] = [Outcome(True, False, "correct", 0.1, False, 40)] * off_topic_answered + [
        Outcome(False, False, "incorrect", 0.1)
    ] * (4 - off_topic_answered)
    return result


def test_rates_per_category() -> None:
    result = _result("x", kb_right=6, kb_wrong=2, kb_abstained=2, off_topic_answered=1)

    assert result.rate("kb", "right") == 0.6
    assert result.rate("kb", "wrong") == 0.2
    assert result.rate("kb", "abstained") == 0.2
    assert result.rate("none-off-topic", "right") == 0.75  # abstaining is right when nothing answers it
    assert result.rate("none-off-topic", "wrong") == 0.25
    # 6 + 2 kb routed Correct, 3 off-topic not: (8 + 3) / 14
    assert result.routing_accuracy() == 11 / 14
    assert result.median_kb_words() == 30


def test_the_worst_seed_is_the_worst_value_of_each_column() -> None:
    seeds = {
        "seed 0": _result("seed 0", kb_right=8, kb_wrong=2, kb_abstained=0, off_topic_answered=0),
        "seed 1": _result("seed 1", kb_right=7, kb_wrong=0, kb_abstained=3, off_topic_answered=2),
    }

    lines = table(seeds, list(seeds), CORPUS_CATEGORIES)

    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    worst = dict(zip(header, (cell.strip() for cell in lines[-1].strip("|").split("|")), strict=True))
    mean = dict(zip(header, (cell.strip() for cell in lines[-2].strip("|").split("|")), strict=True))
    assert worst["KB: right + citation"] == "70%"  # the lower of 80% and 70%
    assert worst["KB: wrong"] == "20%"  # the higher of 20% and 0%
    assert worst["off-topic: abstained"] == "50%"
    assert mean["KB: right + citation"] == "75%"
