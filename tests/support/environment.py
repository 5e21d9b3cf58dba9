"""The test run's environment: repository paths, the embedded Redis's port, the test secrets, the CLI's environment.

tests/conftest.py puts the secrets into os.environ before any test runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from secrets import token_hex

from devtools.ports import free_port

from support.console import ADMIN_PASSWORD, CONSOLE_SECRET

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples" / "policies"
HR_PORTAL = REPO / "samples" / "hr-portal"

# A port of its own per run: a Redis left over from another run must never be reused.
TEST_REDIS_PORT = free_port()

# Secrets of the test configuration, all set, so that the leak check (tests/conftest.py) has values to find.
# The local Slack of the Slack tests (tests/support/slack.py) uses the Slack ones.
TEST_SLACK_BOT_TOKEN = "xoxb-test-" + token_hex(12)
TEST_SLACK_SIGNING_SECRET = "signing-test-" + token_hex(12)
TEST_SECRETS = {
    "SLACK_APP_TOKEN": "xapp-test-" + token_hex(12),
    "POLICYBOT_GENERATOR_API_KEY": "sk-test-" + token_hex(12),
    "POLICYBOT_CONSOLE_SECRET": "console-test-" + token_hex(16),
}

_KNOWN_SECRETS = TEST_SECRETS | {
    "SLACK_BOT_TOKEN": TEST_SLACK_BOT_TOKEN,
    "SLACK_SIGNING_SECRET": TEST_SLACK_SIGNING_SECRET,
    "the console test password": ADMIN_PASSWORD,
    "the console test secret": CONSOLE_SECRET,
}


def known_secrets() -> dict[str, str]:
    """Every secret value the run knows of, by name; the embedded Redis's password once it is made."""
    if "the embedded Redis password" not in _KNOWN_SECRETS and "POLICYBOT_HOME" in os.environ:
        password_file = Path(os.environ["POLICYBOT_HOME"]) / "redis" / "password"
        if password_file.exists():
            _KNOWN_SECRETS["the embedded Redis password"] = password_file.read_text().strip()
    return _KNOWN_SECRETS


def cli_env(home: Path) -> dict[str, str]:
    """Environment for running the `policybot` CLI as a subprocess against the test stack."""
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL")}
    env["POLICYBOT_HOME"] = str(home)
    env["POLICYBOT_REDIS_PORT"] = str(TEST_REDIS_PORT)
    return env
