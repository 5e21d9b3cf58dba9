"""Errors a user can fix: the CLI prints their message as one line instead of a traceback."""


class UserError(RuntimeError):
    """Something the operator can act on; the message says what and how."""
