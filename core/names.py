"""Names people type: Slack channel IDs, collection names and questions' references.

Checked here, with nothing heavier than `re` imported, so the CLI refuses a bad one at once;
the retriever accepts exactly these too (PGVectorStore pastes filter values into SQL).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence

from core.errors import UserError

CHANNEL_ID = re.compile(r"[A-Z0-9]{1,24}")
COLLECTION_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
CHANNEL_ID_HINT = "IDs look like C012ABC3DE; a channel's ID is at the bottom of its About tab in Slack"


class InvalidName(UserError):
    """A channel ID or collection name that cannot be one; the message says what they look like."""


def parse_channels(text: str | Sequence[str] | None) -> list[str]:
    """Slack channel IDs from "C1, C2" (or a list); refuses anything that is not an ID."""
    parts = text.split(",") if isinstance(text, str) else list(text or [])
    channels = [part.strip() for part in parts if part.strip()]
    bad = [channel for channel in channels if not CHANNEL_ID.fullmatch(channel)]
    if bad:
        raise InvalidName(f"not a Slack channel ID: {', '.join(bad)} ({CHANNEL_ID_HINT})")
    return list(dict.fromkeys(channels))


def validate_collection(name: str) -> str:
    if not COLLECTION_NAME.fullmatch(name):
        raise InvalidName(f"invalid collection name {name!r}: use lowercase letters, digits, '-' and '_'")
    return name


REFERENCE_ALPHABET, REFERENCE_LENGTH = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789", 6


def new_reference() -> str:
    """A short ID people can quote to an admin ("ref Q7K2M9")."""
    return "".join(secrets.choice(REFERENCE_ALPHABET) for _ in range(REFERENCE_LENGTH))


def could_be_reference(text: str) -> bool:
    """Whether `text` has the shape of a reference (about 1 in 4,096 is all digits, like "482759")."""
    return len(text) == REFERENCE_LENGTH and all(character in REFERENCE_ALPHABET for character in text.upper())
