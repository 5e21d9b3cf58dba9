"""Addresses as they may be shown: passwords and query values (API keys, tokens) hidden."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def mask_query(address: str | None, keep: tuple[str, ...] = ()) -> str | None:
    """The URL with its query values shown as *** (they may hold API keys), except the values in `keep`."""
    if not address:
        return address
    parts = urlsplit(address)
    if not parts.query:
        return address
    masked = [
        f"{name}={value if value in keep else '***'}" if sep else name
        for name, sep, value in (pair.partition("=") for pair in parts.query.split("&"))
    ]
    return urlunsplit(parts._replace(query="&".join(masked)))


def mask_url(address: str) -> str:
    """A service URL with its password and query values hidden. A lone secret before "@" in a
    Redis URL ("redis://s3cret@host") is Redis's password form, so it is hidden too."""
    try:
        parts = urlsplit(address)
        host = parts.netloc.rpartition("@")[2]
        if "@" in parts.netloc:
            user, has_password, _ = parts.netloc.rpartition("@")[0].partition(":")
            if has_password:
                host = f"{user}:***@{host}"
            else:
                host = f"***@{host}" if parts.scheme.startswith(("redis", "rediss")) else f"{user}@{host}"
        return mask_query(urlunsplit(parts._replace(netloc=host))) or ""
    except ValueError:
        return "<url>"
