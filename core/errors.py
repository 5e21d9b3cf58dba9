"""Errors a user can fix: the CLI prints their message as one line instead of a traceback."""


class UserError(RuntimeError):
    """Something the operator can act on; the message says what and how.

    `status` is the HTTP status the admin console answers with (400: the request was wrong).
    """

    status = 400


class NotFound(UserError):
    """What was named does not exist (the console answers 404). Domain errors subclass both, e.g.
    `class ManageNotFound(ManageError, NotFound)`, so that `except ManageError` still catches it."""

    status = 404


class ServiceError(UserError):
    """A service (PostgreSQL, Redis) could not be started or reached; the message says what to do."""
