"""When a failed task tries again: an answer Slack did not take, after how long and how often
(plan_retry); a database that went away, waited for in turn (wait_for_database)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from psycopg import OperationalError as PsycopgOperationalError
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from application.outbox import UnsavedPost
from core.services import DatabaseUnavailable
from slack_shared.client import (
    MAX_RETRY_AFTER_S,
    SLACK_PERMANENT_ERRORS,
    describe_error,
    is_rate_limited,
    retry_after_s,
    slack_error_of,
    slack_failed_for_now,
)

log = logging.getLogger(__name__)

ANSWER_RETRIES = 2  # three attempts in all
# Slack rate-limits a busy channel for seconds, not for good: a rate-limited answer is posted
# again after each Retry-After, up to this many times.
RATE_LIMITED_RETRIES = 10
# A reply Slack would not take for now (an apology, or a logged answer) is tried again after
# these waits (about 40 minutes in all; the worker holds each retry's message until it is due).
LATER_COUNTDOWNS_S = (5, 30, 120, 600, 1800)
RETRY_COUNTDOWNS_S = (1, 3, 6)


@dataclass(frozen=True)
class Retry:
    countdown: int  # seconds before the next attempt
    waited_later: int  # how many of LATER_COUNTDOWNS_S the next attempt will have waited


def plan_retry(error: BaseException, retries: int, waited_later: int, *, answered: bool) -> Retry | None:
    """When to try a failed answer again after `retries` retries, or None to give up (the
    apology). A failure gets RETRY_COUNTDOWNS_S, a rate limit Slack's Retry-After up to
    RATE_LIMITED_RETRIES times; then a ready answer that Slack surely did not take waits
    LATER_COUNTDOWNS_S in turn, whatever fails in between, rather than be traded for an apology."""
    if slack_error_of(error) in SLACK_PERMANENT_ERRORS:
        return None  # Slack's answer will not change
    if waited_later == 0:
        if is_rate_limited(error):
            if retries < RATE_LIMITED_RETRIES:  # as long as Slack asks; without a Retry-After (a proxy's 429), back off
                return Retry(retry_after_s(error) or min(MAX_RETRY_AFTER_S, 2 ** (retries + 1)), 0)
        elif retries < ANSWER_RETRIES:
            return Retry(RETRY_COUNTDOWNS_S[min(retries, len(RETRY_COUNTDOWNS_S) - 1)], 0)
    if answered and slack_failed_for_now(error) and waited_later < len(LATER_COUNTDOWNS_S):
        return Retry(max(LATER_COUNTDOWNS_S[waited_later], retry_after_s(error)), waited_later + 1)
    return None


# A database that went away (a restart, a failover) is waited for like any passing failure:
# about 4 minutes in all, then the outbox's due time brings the question back through the sweep.
DATABASE_WAITS_S = (2, 4, 8, 15, 30, 60, 60, 60)


# What PostgreSQL and libpq say when the server, not the statement, is the trouble: stopping
# (a smart shutdown refuses new connections for as long as old ones stay), starting, in
# recovery, gone from under a session, or not there at all. Read from any error in the chain,
# whatever its class (a library may wrap the driver's error in one of its own).
_DATABASE_AWAY = re.compile(
    r"the database system is (?:shutting down|starting up|in recovery mode|not (?:yet )?accepting connections)"
    r"|terminating connection due to administrator command|server closed the connection unexpectedly"
    r"|connection to server (?:on socket|at) .* failed|could not connect to server|the embedded PostgreSQL",
    re.IGNORECASE | re.DOTALL,
)


def is_database_error(error: BaseException) -> bool:
    """Whether the database (not the statement) failed: a lost or refused connection, a server
    that is stopping, starting or down (DatabaseUnavailable: the embedded one, which a worker
    never starts), anywhere in the error's chain (LlamaIndex and our own helpers may wrap it)."""
    if in_chain(error, DatabaseUnavailable) is not None or any(
        _DATABASE_AWAY.search(str(link)) for link in _chain(error)
    ):
        return True
    found = in_chain(error, (UnsavedPost, OperationalError, InterfaceError, PsycopgOperationalError, DBAPIError))
    return found is not None and (
        not isinstance(found, DBAPIError)
        or found.connection_invalidated
        or isinstance(found, (OperationalError, InterfaceError))
    )


def _chain(error: BaseException) -> list[BaseException]:
    """An error and the errors it was raised from or during (at most 10: a cycle is not followed)."""
    links: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and len(links) < 10:
        links.append(seen)
        seen = seen.__cause__ or seen.__context__
    return links


def in_chain(
    error: BaseException, types: type[BaseException] | tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first of `types` among an error and the errors it was raised from or during."""
    return next((link for link in _chain(error) if isinstance(link, types)), None)


def wait_for_database(task, what: str, error: BaseException, db_waits: int, kwargs: dict[str, Any]) -> str:
    """Retry a task after a database failure (with `kwargs`, its question ID staying in its
    arguments), or leave it to the sweep once the waits are spent."""
    if db_waits >= len(DATABASE_WAITS_S):
        log.error(
            "%s: the database is still unreachable (%s); the bot's sweep queues it again once it is back",
            what,
            describe_error(error),
        )
        return "database down"
    countdown = DATABASE_WAITS_S[db_waits]
    log.warning("%s: the database is unreachable (%s); trying again in %ss", what, describe_error(error), countdown)
    raise task.retry(
        exc=error,
        countdown=countdown,
        max_retries=task.request.retries + 1,
        kwargs={**kwargs, "db_waits": db_waits + 1},
    ) from None
