"""The run's secret-leak check (tests/conftest.py): no secret of the test configuration in any log line.

Every log record of the test process is checked as it is emitted (the secrets it looks for may
only exist once the embedded services are up), and the log files the run leaves behind (worker
and bot processes, the embedded Redis) are read at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path


class SecretLeakCheck(logging.Handler):
    """Collects where a secret appeared, by the secret's name: the report never repeats a value."""

    def __init__(self, secrets: Callable[[], Mapping[str, str]]) -> None:
        super().__init__(logging.NOTSET)
        self._secrets = secrets
        self.leaks: list[str] = []
        # The whole line as a log file would hold it: message, arguments and traceback.
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # a record that cannot be formatted is logging's to report
            self.handleError(record)
            return
        self.check(line, f"a log record of {record.name!r}")

    def check(self, text: str, where: str) -> None:
        for name, value in self._secrets().items():
            if value and value in text:
                self.leaks.append(f"{name} in {where}")

    def check_files(self, folder: Path) -> None:
        for path in sorted(folder.rglob("*.log")):
            if path.is_file():
                self.check(path.read_text(errors="replace"), str(path))
