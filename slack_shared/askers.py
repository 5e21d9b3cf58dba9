"""Who asks, from Slack (`users.info`), cached per process.

- Their names, so that fallback queries are sent without them: redaction before a fallback
  query removes the asker's own names (people introduce themselves: "Hi, I'm Priya
  Raghunathan, how many vacation days..."). Names are rare words, so the keyword rewrite
  would otherwise rank them first.
- Whether they are a guest of the workspace, and which workspace or Enterprise Grid
  organisation they belong to (bot/who_may_ask.py: policies are for members).

Needs the `users:read` scope; without it the lookup fails, the process logs why (every five
minutes, not per question), and the other redactions still apply.
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

USER_TTL_S = 3600  # profiles change rarely; an hour keeps users.info far under its rate limit
FAILURE_TTL_S = 300  # a missing scope fails every time: ask again (and warn) every 5 minutes, not per question


def names_in_profile(user: dict[str, Any]) -> tuple[str, ...]:
    """Every name Slack holds for a user: real and display names, first and last name, handle."""
    profile = user.get("profile") or {}
    candidates = (
        user.get("real_name"),
        profile.get("real_name"),
        profile.get("display_name"),
        profile.get("first_name"),
        profile.get("last_name"),
        user.get("name"),
    )
    names: list[str] = []
    for name in candidates:
        name = str(name or "").strip()
        if name and name not in names:
            names.append(name)
    return tuple(names)


def teams_of(user: dict[str, Any]) -> tuple[str, ...]:
    """The workspace a user belongs to, or on Enterprise Grid their organisation and its
    workspaces (users.info may name those instead of one workspace)."""
    grid = user.get("enterprise_user") or {}
    return tuple(
        str(team) for team in (user.get("team_id"), grid.get("enterprise_id"), *(grid.get("teams") or ())) if team
    )


def is_guest(user: dict[str, Any]) -> bool:
    """A multi-channel or single-channel guest of the workspace."""
    return bool(user.get("is_restricted") or user.get("is_ultra_restricted"))


# users.info errors that say Slack will not describe this user to us (the app lacks the
# scope, no such user): the asker is taken as a member without a profile. Any other error
# (an outage, a rate limit, a timeout) is SlackUnavailable: nothing can be said for now.
_CANNOT_SAY = frozenset(
    {"missing_scope", "not_allowed_token_type", "user_not_found", "user_not_visible", "no_permission"}
)


class SlackUnavailable(RuntimeError):
    """Slack did not answer users.info just now; asking again later may work."""


class SlackUsers:
    """A per-process cache of users.info answers; None for a user Slack will not describe."""

    def __init__(self, capacity: int = 4096) -> None:
        self._cache: OrderedDict[str, tuple[float, dict[str, Any] | None]] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def get(self, client: WebClient, user_id: str | None) -> dict[str, Any] | None:
        """The user's users.info record, or None when Slack will not describe them (cached,
        and warned about, every five minutes); raises SlackUnavailable when Slack did not
        answer (not cached: the next question asks again)."""
        if not user_id:
            return None
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(user_id)
            if cached is not None and cached[0] > now:
                return cached[1]
        user: dict[str, Any] | None
        try:
            user = client.users_info(user=user_id).get("user") or {}
            expires = now + USER_TTL_S
        except Exception as error:
            reason = error.response.get("error") if isinstance(error, SlackApiError) else type(error).__name__
            if reason not in _CANNOT_SAY:
                raise SlackUnavailable(f"users.info for {user_id} failed: {reason}") from None
            hint = "; add the users:read scope" if reason == "missing_scope" else ""
            log.warning(
                "Slack will not describe user %s (%s): taking them as a member, and fallback queries "
                "are redacted without their names%s",
                user_id,
                reason,
                hint,
            )
            user, expires = None, now + FAILURE_TTL_S
        with self._lock:
            self._cache[user_id] = (expires, user)
            self._cache.move_to_end(user_id)
            while len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        return user

    def names(self, client: WebClient, user_id: str | None) -> tuple[str, ...]:
        """The user's names, or none when Slack cannot give them: a lookup never fails an answer."""
        try:
            return names_in_profile(self.get(client, user_id) or {})
        except SlackUnavailable as error:
            log.warning("%s: fallback queries are redacted without the asker's names", error)
            return ()


SLACK_USERS = SlackUsers()  # one per process
