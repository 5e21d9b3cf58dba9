"""The Celery app: Redis broker, an `answer` queue (latency-sensitive) and an `ingest` queue.

Start a worker with `policybot worker` (or `celery -A workers.celery_app worker -Q answer,ingest`).

- At-least-once delivery: `task_acks_late` + `task_reject_on_worker_lost`, prefetch 1, so a
  question whose worker dies is redelivered; the task itself is idempotent (workers/answer_tasks.py,
  ingest_tasks.py, train_tasks.py).
  A task whose worker died during MAX_DELIVERIES deliveries (an upload that gets it killed
  for memory, say) is not run again: it ends the way a failed one does (`delivered_too_often`).
- Redis redelivers an unacked message `visibility_timeout` seconds after a worker fetched it
  (POLICYBOT_CELERY_VISIBILITY_TIMEOUT, default 300: an answer whose worker died comes back
  within minutes; abandoned messages are swept at least every tenth of it). Kombu applies one
  timeout per connection, to every queue, so `hold_until_due` moves the start of that clock
  for the messages that legitimately stay unacked longer: a retry waiting for its countdown
  (up to 30 minutes) from when it is due, an ingest task (up to INGEST_HARD_LIMIT_S) from when
  its time limit ends it.
- Models load once per worker *process*, in `worker_process_init` (prefork children and the
  solo pool), never in the parent before fork: importing this module loads no model and
  creates no database engine, and every child drops engines inherited from its parent.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import lru_cache
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import redis  # noqa: E402
from celery import Celery  # noqa: E402
from celery.signals import task_received, worker_init, worker_process_init  # noqa: E402
from kombu import Queue  # noqa: E402

from core import db, services  # noqa: E402
from core.config import get_settings  # noqa: E402

log = logging.getLogger(__name__)

ANSWER_QUEUE = "answer"
INGEST_QUEUE = "ingest"
QUEUES = (ANSWER_QUEUE, INGEST_QUEUE)

# Answering is seconds; ingestion of one upload is minutes at most; evaluator training is
# bounded by POLICYBOT_TRAIN_MINUTES. Time limits are enforced by the prefork pool only.
ANSWER_SOFT_LIMIT_S, ANSWER_HARD_LIMIT_S = 120, 180
INGEST_SOFT_LIMIT_S, INGEST_HARD_LIMIT_S = 1500, 1800

# Deliveries of one attempt of a task (its ID and retry number) before it is given up: each
# delivery past the first means the worker running it died (task_reject_on_worker_lost, or
# the visibility timeout after a whole worker died).
MAX_DELIVERIES = 3
DELIVERY_COUNT_TTL_S = 2 * 24 * 3600  # far longer than MAX_DELIVERIES deliveries can take


def visibility_timeout() -> int:
    return get_settings().celery_visibility_timeout


def _configuration() -> dict:
    """Read lazily (first use), so importing the module neither reads settings nor starts Redis."""
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

    def _load_config(self):
        with self._conf_lock:
            if not self._conf_loaded:  # else another thread finished loading while this one waited
                super()._load_config()
                self._conf_loaded = True
            return self._conf

    @property
    def conf(self):
        if not self._conf_loaded:
            with self._conf_lock:  # wait for a load in progress in another thread
                pass
        return Celery.conf.fget(self)

    @conf.setter
    def conf(self, value):
        self._conf = value


celery_app = ThreadSafeCelery(
    "policybot", include=["workers.answer_tasks", "workers.ingest_tasks", "workers.train_tasks"]
)
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


@task_received.connect
def hold_until_due(request: Any, **_: object) -> None:
    """In the worker's main process, as it takes a message: start the message's visibility clock
    when its task is due (a retry's countdown) and, for the ingest queue, only once the task's
    hard time limit would have ended it. Redis would otherwise hand a retry waiting out its
    countdown, or a long ingestion, to a second worker after the (answer-sized) visibility
    timeout. The clock is the message's score in kombu's unacked index; XX: never re-add a
    message already acknowledged or restored."""
    message = request.message
    index = getattr(message.channel, "unacked_index_key", None)
    if index is None:  # not the Redis transport
        return
    now = time.time()
    due = max(now, request.eta.timestamp()) if request.eta else now
    if (request.delivery_info or {}).get("routing_key") == INGEST_QUEUE:
        due += INGEST_HARD_LIMIT_S
    if due <= now:
        return  # an answer due now: the plain timeout is the right one
    try:
        with message.channel.conn_or_acquire() as client:
            client.zadd(index, {message.delivery_tag: due}, xx=True)
    except redis.RedisError as error:  # a second delivery then comes early; tasks are idempotent
        log.warning("could not hold task %s[%s] until it is due: %s", request.name, request.id, error)


@lru_cache(maxsize=4)
def _broker_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)


def delivered_too_often(task: Any) -> bool:
    """Count this delivery of the running task's current attempt; True past MAX_DELIVERIES.

    Redis keeps no delivery count, and Celery's `task_retry_on_worker_lost` counts only a pool
    process lost while its worker lives (not a whole worker killed, whose message Redis restores
    after the visibility timeout), spends the task's own retries, and ends without telling the
    asker. So deliveries are counted here, in the broker's Redis, per task ID and retry (a retry
    is a new attempt). If Redis cannot count, the task runs, as it would have."""
    request = task.request
    if request.called_directly or request.is_eager or not request.id:
        return False  # not delivered by a broker
    key = f"policybot:deliveries:{request.id}:{request.retries}"
    try:
        pipe = _broker_client(task.app.conf.broker_url).pipeline()
        pipe.incr(key)
        pipe.expire(key, DELIVERY_COUNT_TTL_S)
        count, _ = pipe.execute()
    except redis.RedisError as error:
        log.warning("could not count the deliveries of task %s[%s]: %s", task.name, request.id, error)
        return False
    return int(count) > MAX_DELIVERIES


class DeliveredTooOften(RuntimeError):
    """The task's worker died during each of its first MAX_DELIVERIES deliveries."""

    def __init__(self) -> None:
        super().__init__(
            f"its worker stopped during each of {MAX_DELIVERIES} tries (killed, perhaps for memory); not tried again"
        )


def log_given_up(task: Any, what: str) -> None:
    """The one error line of a task given up after MAX_DELIVERIES deliveries (`what`: whose task)."""
    log.error(
        "%s: the worker running task %s[%s] stopped during each of its %s deliveries; not running it again",
        what,
        task.name,
        task.request.id,
        MAX_DELIVERIES,
    )


@worker_init.connect
def leave_postgres_alone(**_: object) -> None:
    """A worker never starts the embedded PostgreSQL (its pool processes inherit this): one that is
    stopping, starting or down is waited out like any outage; `services up` and the CLI start it."""
    services.leave_postgres_alone()


@worker_process_init.connect
def load_models(**_: object) -> None:
    """In each worker process: fresh DB connections, torch threads from settings, models loaded once."""
    services.leave_postgres_alone()  # as in its parent (leave_postgres_alone above), whatever the pool
    db.dispose_engines()  # never reuse connections opened before fork
    settings = get_settings()
    try:
        # torch (seconds): in each worker process, not in those that import this module to queue tasks (serve, the console)
        import torch

        torch.set_num_threads(settings.evaluator_threads)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    from application.runtime import get_runtime  # torch, LlamaIndex and the models: as torch above

    runtime = get_runtime(settings)
    try:
        runtime.warm_up()
    except Exception:  # a cold first question is better than a worker that never starts
        log.warning("warm-up failed; the first question will load what is missing", exc_info=True)
    log.info("worker process %s ready: %s", os.getpid(), runtime.loaded.description)
