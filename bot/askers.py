"""The asker's names from Slack (`users.info`), so that fallback queries are sent without them.

Redaction before a fallback query removes the asker's own names (people introduce
themselves: "Hi, I'm Priya Raghunathan, how many vacation days..."). Names are rare words,
so the keyword rewrite would otherwise rank them first. Needs the `users:read` scope;
without it the lookup fails, the worker logs why, and the other redactions still apply.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)

NAMES_TTL_S = 3600  # names change rarely; an hour keeps users.info far under its rate limit
FAILURE_TTL_S = 300  # a missing scope fails every time: ask again (and warn) every 5 minutes, not per question


def names_in_profile(user: dict[str, Any]) -> tuple[str, ...]:
    """Every name Slack holds for a user: real and display names, first and last name, handle."""
    profile = user.get("profile") or {}
    candidates = (
        user.get("real_name"), profile.get("real_name"), profile.get("display_name"),
        profile.get("first_name"), profile.get("last_name"), user.get("name"),
    )
    names: list[str] = []
    for name in candidates:
        name = str(name or "").strip()
        if name and name not in names:
            names.append(name)
    return tuple(names)


class AskerNames:
    """A per-process cache of users' names, looked up with `users.info`."""

    def __init__(self, capacity: int = 4096) -> None:
        self._cache: OrderedDict[str, tuple[float, tuple[str, ...]]] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def get(self, client: WebClient, user_id: str | None) -> tuple[str, ...]:
        if not user_id:
            return ()
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(user_id)
            if cached is not None and cached[0] > now:
                return cached[1]
        try:
            names = names_in_profile(client.users_info(user=user_id).get("user") or {})
            expires = now + NAMES_TTL_S
        except Exception as error:  # a lookup never fails the answer: the other redactions still apply
            reason = error.response.get("error") if isinstance(error, SlackApiError) else type(error).__name__
            hint = "; add the users:read scope" if reason == "missing_scope" else ""
            log.warning("could not look up the names of %s (%s): fallback queries are redacted without them%s",
                        user_id, reason, hint)
            names, expires = (), now + FAILURE_TTL_S
        with self._lock:
            self._cache[user_id] = (expires, names)
            self._cache.move_to_end(user_id)
            while len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        return names


ASKER_NAMES = AskerNames()  # one per worker process
