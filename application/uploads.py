"""The checks an uploaded file passes before it is stored: one set for a file sent to the bot in
Slack (workers/ingest_tasks.py) and one uploaded in the admin console (console/app.py)."""

from __future__ import annotations

import re
from pathlib import Path

from core.config import Settings
from core.errors import UserError
from ingestion.loaders import SUPPORTED_SUFFIXES


class UploadRefused(UserError):
    """An uploaded file that is not stored; the message names the file and says why."""


class UnsupportedType(UploadRefused):
    status = 415


class TooLarge(UploadRefused):
    status = 413


def safe_name(name: str) -> str:
    """The file's own name, without folders and without characters a file system or a shell minds."""
    name = Path(name).name.strip() or "upload"
    return re.sub(r"[^A-Za-z0-9._ -]+", "_", name)[:200].lstrip(".") or "upload"


def checked_name(filename: str) -> str:
    """The safe name of an uploaded file, refused (UnsupportedType) unless a loader reads its type."""
    name = safe_name(filename)
    if Path(name).suffix.lower() not in SUPPORTED_SUFFIXES:
        raise UnsupportedType(f"{name}: unsupported file type (supported: {', '.join(sorted(SUPPORTED_SUFFIXES))})")
    return name


def size_limit(settings: Settings) -> int:
    """POLICYBOT_MAX_FILE_MB in bytes."""
    return int(settings.max_file_mb * 1024 * 1024)


def check_size(settings: Settings, name: str, size: int) -> None:
    """Refuse (TooLarge) a file over POLICYBOT_MAX_FILE_MB."""
    if size > size_limit(settings):
        raise TooLarge(f"{name}: larger than {settings.max_file_mb:g} MB (POLICYBOT_MAX_FILE_MB)")
