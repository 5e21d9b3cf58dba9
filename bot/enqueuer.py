"""What the listeners (bot/listeners/) and the sweep (bot/recovery.py) send work with: workers/enqueuer.py's
CeleryEnqueuer, handed over by cli/serve.py (bot/ never imports workers/), or a test's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Enqueuer(Protocol):
    def enqueue_answer(self, question_id: int) -> None: ...

    def ingest(
        self, claim_id: int, file_ids: Sequence[str], channel: str, thread_ts: str, user: str, collection: str
    ) -> None: ...
