"""Who reads a conversation, and so where an answer may be posted.

Policies are internal. A question asked where people outside the organisation read (a Slack
Connect conversation, `is_ext_shared`; with POLICYBOT_PRIVATE_WITH_GUESTS, a channel with
guests of the workspace) is answered to the asker alone. The listener decides once, when the
question arrives, and records the decision with the question (`questions.private_reply`):
the worker never posts policy text into such a channel, whatever a later event says.

A private answer goes to the asker by direct message, with a short note in the thread that
says so (no policy text). Not `chat.postEphemeral`: an ephemeral message reaches only a client
open at that moment, is gone after a reload, cannot be updated, and its buttons come back
without the message; in a DM the answer keeps its citations and feedback buttons and stays
readable, and the 👀 on the question is cleared as for any answer.

When Slack cannot say who reads a conversation (an outage, a missing scope), it counts as
shared: a private answer is the safe mistake.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from core.config import Settings
from slack_shared import blocks
from slack_shared.askers import SLACK_USERS, is_guest

log = logging.getLogger(__name__)

# A conversation rarely stops being shared, and a private answer is the safe mistake: a
# shared one is remembered for an hour. One that is not may be shared any minute: asked again
# after a minute (conversations.info is rate-limited per app, about 50 calls a minute).
SHARED_TTL_S = 3600
UNSHARED_TTL_S = 60
FAILURE_TTL_S = 300  # a missing scope fails every time: ask again (and warn) every 5 minutes
WORKSPACE_USERS_TTL_S = 3600  # users.list, for which members are guests; newer users are looked up one by one


class ChannelAudience:
    """Per-process cache of whether answers in a conversation must go to the asker privately."""

    def __init__(self, capacity: int = 4096) -> None:
        self._cache: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self._capacity = capacity
        self._guests: tuple[float, dict[str, bool]] | None = None  # users.list: user id -> is a guest
        self._lock = threading.Lock()

    def private_reason(
        self, client: WebClient, settings: Settings, channel: str, *, shared_externally: bool
    ) -> str | None:
        """Why an answer in `channel` must go to the asker alone (None: it may be posted there).
        `shared_externally`: the event said so itself (`is_ext_shared_channel`)."""
        now = time.monotonic()
        if shared_externally:
            reason: str | None = "shared with another organisation"
            self._remember(channel, reason, now + SHARED_TTL_S)
            return reason
        with self._lock:
            cached = self._cache.get(channel)
            if cached is not None and cached[0] > now:
                return cached[1]
        try:
            reason = self._look_up(client, settings, channel)
            expires = now + (SHARED_TTL_S if reason else UNSHARED_TTL_S)
        except Exception as error:  # whatever failed, nobody can say who reads the channel
            why = error.response.get("error") if isinstance(error, SlackApiError) else type(error).__name__
            hint = "; add the channels:read, groups:read and mpim:read scopes" if why == "missing_scope" else ""
            log.warning("could not tell who reads %s (%s): answering there privately%s", channel, why, hint)
            reason, expires = f"could not tell who reads it ({why})", now + FAILURE_TTL_S
        self._remember(channel, reason, expires)
        return reason

    def _remember(self, channel: str, reason: str | None, expires: float) -> None:
        with self._lock:
            self._cache[channel] = (expires, reason)
            self._cache.move_to_end(channel)
            while len(self._cache) > self._capacity:
                self._cache.popitem(last=False)

    def _look_up(self, client: WebClient, settings: Settings, channel: str) -> str | None:
        info: dict[str, Any] = client.conversations_info(channel=channel).get("channel") or {}
        if info.get("is_ext_shared") or info.get("is_pending_ext_shared"):
            return "shared with another organisation"
        if settings.private_with_guests and not info.get("is_im") and self._has_guests(client, channel):
            return "has guests (POLICYBOT_PRIVATE_WITH_GUESTS)"
        return None

    def _has_guests(self, client: WebClient, channel: str) -> bool:
        guests = self._workspace_guests(client)
        for page in client.conversations_members(channel=channel, limit=1000):
            for member in page.get("members") or ():
                guest = guests.get(member)
                if guest is None:  # joined the workspace since users.list: look them up alone
                    guest = is_guest(SLACK_USERS.get(client, member) or {})
                if guest:
                    return True
        return False

    def _workspace_guests(self, client: WebClient) -> dict[str, bool]:
        now = time.monotonic()
        with self._lock:
            if self._guests is not None and self._guests[0] > now:
                return self._guests[1]
        guests = {
            str(user["id"]): is_guest(user)
            for page in client.users_list(limit=200)
            for user in page.get("members") or ()
            if user.get("id")
        }
        with self._lock:
            self._guests = (now + WORKSPACE_USERS_TTL_S, guests)
        return guests


def answer_place(row: Any) -> dict[str, Any]:
    """Where a question's answer is posted: its thread, or for a private reply the asker's DM
    with the bot (chat.postMessage to a user ID posts there)."""
    if row.private_reply:
        return {"channel": str(row.asker)}
    return {"channel": row.channel, "thread_ts": row.thread_ts}


def note_private_answer(client: WebClient, row: Any) -> None:
    """Say in the question's thread that the answer went by DM; never fatal (the asker has it)."""
    try:
        client.chat_postMessage(channel=row.channel, thread_ts=row.thread_ts, **blocks.answered_privately_message())
    except SlackApiError as error:
        log.warning(
            "could not note the private answer to question %s in %s: %s",
            row.id,
            row.channel,
            error.response.get("error"),
        )
