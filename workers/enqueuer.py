"""The Celery enqueuer: what the Slack listeners and the sweep (bot/recovery.py) send work with
(bot/enqueuer.py's Enqueuer). The CLI hands it to them (cli/serve.py): bot/ never imports workers/."""

from __future__ import annotations

from collections.abc import Sequence

from workers.answer_tasks import answer_question_task
from workers.ingest_tasks import ingest_file_task


class CeleryEnqueuer:
    """Sends plain IDs to the Celery queues."""

    def enqueue_answer(self, question_id: int) -> None:
        answer_question_task.delay(question_id)

    def ingest(
        self, claim_id: int, file_ids: Sequence[str], channel: str, thread_ts: str, user: str, collection: str
    ) -> None:
        ingest_file_task.delay(claim_id, list(file_ids), channel, thread_ts, user, collection=collection)
