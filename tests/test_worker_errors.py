"""Which Slack failures the worker waits out, and how long: an answer Slack surely did not take
is tried again later; one that Slack may have posted, or refused as such, is not. Also that the
Slack client never sends a request twice once it reached the other side."""

from __future__ import annotations

import socket
import threading
from http.client import RemoteDisconnected
from urllib.error import URLError

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from core.config import Settings
from slack_shared.client import MAX_RETRY_AFTER_S, slack_failed_for_now, web_client
from workers.retries import LATER_COUNTDOWNS_S, plan_retry


def _slack_error(error: str, status: int = 200) -> SlackApiError:
    """A failed call as slack_sdk reports it (a body that is not JSON becomes such an error too)."""
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.test/api/chat.postMessage",
        req_args={},
        data={"ok": False, "error": error},
        headers={},
        status_code=status,
    )
    return SlackApiError(error, response)


NOT_JSON = "Received a response in a non-JSON format: <html>"


@pytest.mark.parametrize(
    "error, for_now",
    [
        (_slack_error("service_unavailable"), True),  # Slack says it is down
        (_slack_error("ratelimited", 429), True),
        (_slack_error(NOT_JSON, 429), True),  # a proxy's rate limit in plain text
        (_slack_error(NOT_JSON, 503), True),  # an outage page
        (URLError(ConnectionRefusedError()), True),  # never reached
        (_slack_error(NOT_JSON, 504), False),  # a gateway gave up waiting: Slack may have posted it
        (_slack_error("fatal_error"), False),  # "some aspect of the operation" may have succeeded
        (_slack_error(NOT_JSON, 500), False),
        (TimeoutError("The read operation timed out"), False),  # likewise
        (RemoteDisconnected("Remote end closed connection without response"), False),
        (_slack_error("msg_too_long"), False),  # the message itself: it fails the same way later
        (_slack_error("invalid_blocks"), False),
        (_slack_error("not_in_channel"), False),
        (_slack_error("token_revoked"), False),
        (KeyError("ts"), False),  # a fault of ours
        (OSError("No space left on device"), False),
    ],
)
def test_what_counts_as_slack_failing_for_now(error: BaseException, for_now: bool) -> None:
    assert slack_failed_for_now(error) is for_now


ANSWERED, PENDING = True, False
LIMITED = _slack_error("ratelimited", 429)
DOWN = _slack_error("service_unavailable")


def _schedule(errors: list[BaseException], answered: bool) -> list[tuple[int, int] | None]:
    """The (countdown, waited_later) of each retry the worker would make, failing with `errors` in turn."""
    plans: list[tuple[int, int] | None] = []
    waited_later = 0
    for retries, error in enumerate(errors):
        retry = plan_retry(error, retries, waited_later, answered=answered)
        plans.append(None if retry is None else (retry.countdown, retry.waited_later))
        if retry is None:
            break
        waited_later = retry.waited_later
    return plans


def test_a_ready_answer_waits_out_an_outage_then_the_apology() -> None:
    assert _schedule([DOWN] * 9, ANSWERED) == [
        (1, 0),
        (3, 0),
        *((s, n + 1) for n, s in enumerate(LATER_COUNTDOWNS_S)),
        None,
    ]
    # The pipeline never answered: nothing to wait with, the apology after three attempts.
    assert _schedule([DOWN] * 4, PENDING) == [(1, 0), (3, 0), None]
    # Slack may have posted it: no long waits.
    assert _schedule([TimeoutError()] * 4, ANSWERED) == [(1, 0), (3, 0), None]
    assert _schedule([_slack_error("not_in_channel")], ANSWERED) == [None]


def test_the_later_waits_are_kept_whatever_fails_in_between() -> None:
    """Rate limits first, then an outage, then rate limits again: the ten Retry-After waits,
    then every later wait in turn (none skipped, the rate-limit count not started over)."""
    errors = [LIMITED] * 10 + [DOWN, LIMITED, DOWN, LIMITED, DOWN, DOWN]
    plans = _schedule(errors, ANSWERED)
    assert plans[:10] == [(min(MAX_RETRY_AFTER_S, 2 ** (n + 1)), 0) for n in range(10)]  # no Retry-After: backoff
    assert plans[10:] == [*((s, n + 1) for n, s in enumerate(LATER_COUNTDOWNS_S)), None]
    # An outage after nine rate limits still gets every later wait.
    assert _schedule([LIMITED] * 9 + [DOWN] * 6, ANSWERED)[9:] == [
        *((s, n + 1) for n, s in enumerate(LATER_COUNTDOWNS_S)),
        None,
    ]


def test_a_request_that_reached_slack_is_not_sent_again(tmp_path) -> None:
    """The server reads the post and hangs up without answering: Slack may have posted it, so
    the client does not send it again (it would show twice); the worker's plan gives up."""
    received: list[bytes] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(10)

        def hang_up_on_everyone() -> None:
            while True:
                try:
                    connection, _ = server.accept()
                except OSError:
                    return
                with connection:
                    received.append(connection.recv(65536))

        threading.Thread(target=hang_up_on_everyone, daemon=True).start()
        settings = Settings(
            SLACK_BOT_TOKEN="xoxb-test", SLACK_API_URL=f"http://127.0.0.1:{server.getsockname()[1]}/api/"
        )
        with pytest.raises(Exception) as raised:
            web_client(settings, wait_out_rate_limits=False).chat_postMessage(channel="C1", text="the answer")
    assert len(received) == 1
    assert not slack_failed_for_now(raised.value)


# ------------------------------------------------------------ a database that is away


def _postmaster_status(home) -> str:
    lines = (home / "postgres" / "postmaster.pid").read_text().splitlines()
    return lines[7].strip() if len(lines) > 7 else ""


@pytest.mark.services
def test_a_database_stopping_or_down_is_an_outage_and_a_worker_never_starts_it(tmp_path, monkeypatch) -> None:
    """Issue 34: during a smart shutdown (SIGTERM; the server stays "stopping" while sessions
    last) the answer path asked for the URL by starting the embedded server, which failed with
    an assertion surfacing as ServiceError, and that counted as an ordinary error: two quick
    retries, then the apology. A real PostgreSQL, stopping and then down: whatever comes back
    is a database outage, and a process that leaves PostgreSQL alone reads its URL without
    starting anything."""
    import signal
    import time

    import psutil
    import psycopg

    from core import services
    from workers.retries import is_database_error

    own = Settings(POLICYBOT_HOME=tmp_path / "home")
    monkeypatch.setattr(services, "_START_POSTGRES_ON_DEMAND", True)  # restored after the test
    url = services.start_postgres(own)
    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    held = psycopg.connect(conninfo)  # a session the smart shutdown waits for, as the bot's and the worker's
    postmaster = psutil.Process(int((own.home / "postgres" / "postmaster.pid").read_text().split()[0]))
    try:
        postmaster.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _postmaster_status(own.home) != "stopping":
            assert time.monotonic() < deadline, _postmaster_status(own.home)
            time.sleep(0.1)

        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(conninfo, connect_timeout=5)
        assert "shutting down" in str(refused.value) and is_database_error(refused.value)
        assert is_database_error(RuntimeError(f"query failed: {refused.value}"))  # a library's wrapping
        with pytest.raises(services.DatabaseUnavailable) as not_started:  # what the answer path met
            services.start_postgres(own)
        assert is_database_error(not_started.value)

        services.leave_postgres_alone()
        assert services.database_url(own) == url  # read from the stopping server, nothing started

        postmaster.send_signal(signal.SIGINT)  # then a fast shutdown
        postmaster.wait(timeout=30)
        with pytest.raises(services.DatabaseUnavailable, match="is not running") as down:
            services.database_url(own)
        assert is_database_error(down.value)
        assert not (own.home / "postgres" / "postmaster.pid").exists()  # and still nothing started it
        with pytest.raises(psycopg.OperationalError) as gone:
            psycopg.connect(conninfo, connect_timeout=5)
        assert is_database_error(gone.value)
    finally:
        held.close()
        monkeypatch.setattr(services, "_START_POSTGRES_ON_DEMAND", True)
        services.stop_postgres(own)

    assert not is_database_error(ValueError("no passages"))
    assert not is_database_error(services.ServiceError("redis-server failed to start: port in use"))
