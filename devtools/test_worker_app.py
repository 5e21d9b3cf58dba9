"""The Celery app with test hooks, for the end-to-end tests and benchmarks only.

`python -m celery -A devtools.test_worker_app worker ...` runs the production app
(workers.celery_app) with every answer attempt going through `_test_hooks` first, so a test can
make a worker slow or failing deterministically. devtools/worker_process.py starts workers
with it when their environment sets one of its TEST_HOOK_ENVS; production workers never load it.

- POLICYBOT_TEST_TASK_DELAY_S: sleep this long at the start of every answer attempt;
- POLICYBOT_TEST_FAIL_MARKER: an answer attempt raises when the question contains this text;
- POLICYBOT_TEST_SLOW_MARKER: an answer attempt sleeps TEST_SLOW_S first when the question
  contains this text (a fault can then be injected while that one question is being answered).
"""

from __future__ import annotations

import functools
import logging
import os
import time

import application.answering
from core.config import Settings
from crag.types import Answer
from devtools.worker_process import TEST_DELAY_ENV, TEST_FAIL_ENV, TEST_SLOW_ENV
from workers.celery_app import app, celery_app

__all__ = ["app", "celery_app"]

log = logging.getLogger(__name__)

TEST_SLOW_S = 4.0


def _test_hooks(question: str) -> None:
    delay = os.environ.get(TEST_DELAY_ENV)
    if delay:
        log.warning("%s=%s: sleeping before answering (test hook)", TEST_DELAY_ENV, delay)
        time.sleep(float(delay))
    slow = os.environ.get(TEST_SLOW_ENV)
    if slow and slow in question:
        log.warning("%s: sleeping %ss before answering (test hook)", TEST_SLOW_ENV, TEST_SLOW_S)
        time.sleep(TEST_SLOW_S)
    marker = os.environ.get(TEST_FAIL_ENV)
    if marker and marker in question:
        raise RuntimeError(f"{TEST_FAIL_ENV}: failing on purpose (test hook)")


_answer_question = application.answering.answer_question


@functools.wraps(_answer_question)
def _answer_question_with_hooks(
    settings: Settings, question_id: int, pipeline_question: str | None = None, asker_names: tuple[str, ...] = ()
) -> Answer:
    row = application.answering.get_question(settings, question_id)
    if row is not None:
        _test_hooks(row.question)
    return _answer_question(settings, question_id, pipeline_question=pipeline_question, asker_names=asker_names)


# workers/answer_tasks.py imports answer_question when each attempt runs, so it gets this wrapper.
application.answering.answer_question = _answer_question_with_hooks
