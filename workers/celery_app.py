"""The Celery app: Redis broker, an `answer` queue (latency-sensitive) and an `ingest` queue.

Start a worker with `policybot worker` (or `celery -A workers.celery_app worker -Q answer,ingest`).

- At-least-once delivery: `task_acks_late` + `task_reject_on_worker_lost`, prefetch 1, so a
  question whose worker dies is redelivered; the task itself is idempotent (workers/tasks.py).
- Redis redelivers an unacked message after `visibility_timeout`, which must exceed the
  longest task: default 3600 s (POLICYBOT_CELERY_VISIBILITY_TIMEOUT to change it; abandoned
  messages are swept at least every tenth of it).
- Models load once per worker *process*, in `worker_process_init` (prefork children and the
  solo pool), never in the parent before fork: importing this module loads no model and
  creates no database engine, and every child drops engines inherited from its parent.
"""

from __future__ import annotations

import logging
import os
import threading

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from celery import Celery  # noqa: E402
from celery.signals import worker_process_init  # noqa: E402
from kombu import Queue  # noqa: E402

log = logging.getLogger(__name__)

ANSWER_QUEUE = "answer"
INGEST_QUEUE = "ingest"
QUEUES = (ANSWER_QUEUE, INGEST_QUEUE)

# Answering is seconds; ingestion of one upload is minutes at most; evaluator training is
# bounded by POLICYBOT_TRAIN_MINUTES. Time limits are enforced by the prefork pool only.
ANSWER_SOFT_LIMIT_S, ANSWER_HARD_LIMIT_S = 120, 180
INGEST_SOFT_LIMIT_S, INGEST_HARD_LIMIT_S = 1500, 1800


def visibility_timeout() -> int:
    from policybot.config import get_settings

    return get_settings().celery_visibility_timeout


def _configuration() -> dict:
    """Read lazily (first use), so importing the module neither reads settings nor starts Redis."""
    from policybot import services
    from policybot.config import get_settings

    timeout = visibility_timeout()
    # Sweep for abandoned messages often enough that one is redelivered soon after it expires.
    sweep = max(1, min(10, timeout // 10))
    return {
        "broker_url": services.redis_url(get_settings()),
        "broker_transport_options": {
            "visibility_timeout": timeout,
            "unacked_restore_interval": sweep,
            "unacked_restore_throttle": 1,
        },
    }


class ThreadSafeCelery(Celery):
    """Celery whose lazy configuration loads once, under a lock.

    Celery publishes its half-built configuration before it applies the lazy defaults
    (`_configuration`, which may start the embedded Redis and so takes a while). A second
    thread reading `conf` in that window (Bolt's listener threads or the console's request
    threads, enqueuing the first questions at once) found no broker_url and sent its task to
    Celery's default broker, amqp://localhost, without any error: the question was lost.
    """

    _conf_lock = threading.RLock()  # re-entrant: loading reads conf itself
    _conf_loaded = False

    def _load_config(self):  # type: ignore[no-untyped-def]
        with self._conf_lock:
            if not self._conf_loaded:  # else another thread finished loading while this one waited
                super()._load_config()
                self._conf_loaded = True
            return self._conf

    @property
    def conf(self):  # type: ignore[no-untyped-def, override]
        if not self._conf_loaded:
            with self._conf_lock:  # wait for a load in progress in another thread
                pass
        return Celery.conf.fget(self)  # type: ignore[attr-defined]

    @conf.setter
    def conf(self, value):  # type: ignore[no-untyped-def]
        self._conf = value


celery_app = ThreadSafeCelery("policybot", include=["workers.tasks"])
celery_app.add_defaults(_configuration)
celery_app.conf.update(
    task_queues=[Queue(ANSWER_QUEUE), Queue(INGEST_QUEUE)],
    task_default_queue=ANSWER_QUEUE,
    task_routes={
        "policybot.answer_question": {"queue": ANSWER_QUEUE},
        "policybot.apologise": {"queue": ANSWER_QUEUE},
        "policybot.ingest_files": {"queue": INGEST_QUEUE},
        "policybot.ingest_job": {"queue": INGEST_QUEUE},
        "policybot.train_evaluator": {"queue": INGEST_QUEUE},
    },
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    result_backend=None,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    worker_proc_alive_timeout=180.0,  # children load the embedder and evaluator before they report ready
    worker_max_tasks_per_child=None,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=True,
    worker_redirect_stdouts=False,
    worker_send_task_events=False,
    task_send_sent_event=False,
)
app = celery_app  # `celery -A workers.celery_app` finds either name


@worker_process_init.connect
def load_models(**_: object) -> None:
    """In each worker process: fresh DB connections, torch threads from settings, models loaded once."""
    from policybot import db
    from policybot.config import get_settings

    db.dispose_engines()  # never reuse connections opened before fork
    settings = get_settings()
    try:
        import torch

        torch.set_num_threads(settings.evaluator_threads)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    from policybot.runtime import get_runtime

    runtime = get_runtime(settings)
    try:
        runtime.warm_up()
    except Exception:  # a cold first question is better than a worker that never starts
        log.warning("warm-up failed; the first question will load what is missing", exc_info=True)
    # What the answer task imports on its first run (Slack client, Block Kit, the action log).
    import bot.app  # noqa: F401
    import bot.blocks  # noqa: F401
    import bot.listeners  # noqa: F401
    import policybot.answering  # noqa: F401
    log.info("worker process %s ready: %s", os.getpid(), runtime.loaded.description)
