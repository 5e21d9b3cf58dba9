"""The seed's travel example (seed 001): a scope sentence far from the rule it conditions."""

QUESTION = "How many days do I have to submit travel expenses?"
SCOPE = "This rule covers domestic travel in 2026."
DEADLINE = "Submit your expense report within 30 calendar days after the trip."
NEGATION = "Receipts are not required for amounts under $25."

TRAVEL_TEXT = " ".join(
    [
        SCOPE,
        "The travel desk is open Monday to Friday.",
        "Book flights through the booking portal.",
        "Hotel stays are arranged by the desk.",
        "The booking system is down for maintenance every Sunday.",
        DEADLINE,
        NEGATION,
        "Approved reports are paid within 5 business days.",
    ]
)


def travel_passage(**overrides: object):  # -> crag.types.Passage
    """The example as a retrieved knowledge-base chunk; fields can be overridden."""
    from crag.types import Passage

    fields: dict[str, object] = dict(
        id="travel-1",
        text=TRAVEL_TEXT,
        origin="kb",
        source="policies",
        document="travel.md",
        title="Travel policy",
        section="Travel > Domestic travel",
    )
    fields.update(overrides)
    return Passage(**fields)  # type: ignore[arg-type]
