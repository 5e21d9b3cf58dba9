"""Telling a Slack message seen before when the database cannot: which messages were already told
"can't take this right now" (OutageReplies, in Redis), and a bounded memory of them in this
process (RecentMessages) for when Redis is down too."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)


class RecentMessages:
    """A bounded, thread-safe memory of Slack messages, for when Redis cannot dedupe either."""

    def __init__(self, capacity: int = 4096) -> None:
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def first_time(self, channel: str, ts: str) -> bool:
        """True the first time a (channel, ts) is seen; remembers it."""
        key = (channel, ts)
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return False
            self._seen[key] = None
            if len(self._seen) > self._capacity:
                self._seen.popitem(last=False)
            return True


OUTAGE_REPLY_TTL_S = 3600  # far past Slack's last retry (about 5 min) and a DM's twin event (seconds)


class OutageReplies:
    """Which messages were already told "can't take this right now", across bot processes.

    With the database down, the claim that makes one message get one reply is gone; a DM
    that mentions the bot still arrives twice (`message.im` and `app_mention`), possibly at
    two bot processes behind a load balancer. A Redis key (SET NX) dedupes the outage reply
    across them; when Redis is down too, each process remembers on its own.
    """

    def __init__(self, redis_url: Callable[[], str], local: RecentMessages | None = None) -> None:
        self._redis_url = redis_url
        self._local = local or RecentMessages()
        self._client: redis.Redis | None = None
        self._lock = threading.Lock()

    def first_time(self, channel: str, ts: str) -> bool:
        first_here = self._local.first_time(channel, ts)
        try:
            return bool(self._redis().set(f"policybot:outage-reply:{channel}:{ts}", 1, nx=True, ex=OUTAGE_REPLY_TTL_S))
        except redis.RedisError as error:
            log.info("outage replies deduped in this process only (Redis: %s)", type(error).__name__)
            return first_here

    def _redis(self) -> redis.Redis:
        with self._lock:
            if self._client is None:  # only on the failure path: the bot never needs it otherwise
                # One quick try: the user is waiting for the outage reply, not for Redis.
                self._client = redis.Redis.from_url(
                    self._redis_url(), socket_connect_timeout=0.5, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)
                )
            return self._client
