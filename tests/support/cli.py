"""The `policybot` command line run as users run it: a subprocess against the test stack."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.environment import cli_env


def policybot(
    home: Path,
    *args: str,
    env_extra: dict[str, str] | None = None,
    input_text: str | None = None,
    drop: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """Runs `policybot ARGS` with the test stack's environment, plus env_extra, less the variables in drop."""
    env = {key: value for key, value in (cli_env(home) | (env_extra or {})).items() if key not in drop}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        env=env,
        input=input_text,
        timeout=600,
    )
