"""Errors a user can fix (the CLI prints their message as one line instead of a traceback), and
how other errors are described in logs."""


class UserError(RuntimeError):
    """Something the operator can act on; the message says what and how.

    `status` is the HTTP status the admin console answers with (400: the request was wrong).
    """

    status = 400


class NotFound(UserError):
    """What was named does not exist (the console answers 404). Domain errors subclass both, e.g.
    `class ManageNotFound(ManageError, NotFound)`, so that `except ManageError` still catches it."""

    status = 404


def describe_error(error: BaseException) -> str:
    """One line for a log: a Slack API error by its code only (the request holds the token)."""
    from slack_sdk.errors import SlackApiError

    if isinstance(error, SlackApiError):
        return f"Slack API error {error.response.get('error')}"
    return f"{type(error).__name__}: {error}"
