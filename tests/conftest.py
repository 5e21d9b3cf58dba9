"""Shared fixtures: a real embedded PostgreSQL+pgvector and a real Redis for the whole run.

The suite gets its own POLICYBOT_HOME under pytest's temp folder, so it never touches
a developer's data; everything is started the same way `policybot services up` does.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.register_assert_rewrite("support")  # before support's first import: its asserts show their values

from support.environment import HR_PORTAL, SAMPLES, TEST_REDIS_PORT, TEST_SECRETS, known_secrets  # noqa: E402
from support.leak_check import SecretLeakCheck  # noqa: E402

pytest_plugins = ["support.slack", "support.console"]  # their fixtures: stack, seeded_log

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
# A background training run would occupy the single test worker for minutes.
os.environ["POLICYBOT_AUTO_TRAIN"] = "false"
# Training learns from the shipped policy-qa corpus by default; tests that train use tiny corpora
# of their own (tests/support/corpus.py) instead of ingesting it.
os.environ["POLICYBOT_CORPUS"] = "off"
# Console password hashes at scrypt's old cost (2^14, not 2^17): the suite signs in hundreds of times.
os.environ["POLICYBOT_CONSOLE_SCRYPT_N"] = str(2**14)
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")

for variable in (
    "DATABASE_URL",
    "REDIS_URL",
    "POLICYBOT_EMBEDDING_MODEL",
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "SLACK_API_URL",
    "POLICYBOT_ADMINS",
    "POLICYBOT_EVALUATOR_PATH",
    "POLICYBOT_GENERATOR_URL",
):
    os.environ.pop(variable, None)

os.environ.update(TEST_SECRETS)


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_any_log_line(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecretLeakCheck]:
    """Fails the run, at its end, when a secret appeared in a log line of this process (at any level)
    or in a log file the run left (worker and bot processes, the embedded Redis)."""
    check = SecretLeakCheck(known_secrets)
    root = logging.getLogger()
    level = root.level
    root.addHandler(check)
    root.setLevel(logging.DEBUG)
    yield check
    root.removeHandler(check)
    root.setLevel(level)
    check.check_files(tmp_path_factory.getbasetemp())
    if check.leaks:
        pytest.fail("secrets were logged:\n  " + "\n  ".join(check.leaks), pytrace=False)


@pytest.fixture(scope="session")
def policybot_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("policybot-home")
    os.environ["POLICYBOT_HOME"] = str(home)
    os.environ["POLICYBOT_REDIS_PORT"] = str(TEST_REDIS_PORT)
    from core.config import reset_settings

    reset_settings()
    yield home
    from core import db, services
    from core.config import get_settings

    db.dispose_engines()
    services.services_down(get_settings())


@pytest.fixture(scope="session")
def settings(policybot_home: Path):  # -> Settings
    from core import services
    from core.config import get_settings

    current = get_settings()
    services.services_up(current)
    return current


@pytest.fixture(scope="session")
def ingested_samples(settings):  # -> IngestReport
    from ingestion.ingest import ingest_paths

    report = ingest_paths(settings, [SAMPLES], collection="policies")
    assert not report.failed, report.failed
    return report


@pytest.fixture(scope="session")
def knowledge_base(settings, ingested_samples):  # -> Settings
    """Sample policies as the knowledge base plus the HR-portal export as an allow-listed fallback."""
    from sqlalchemy import select

    from core import db
    from core.models import FallbackSourceRow
    from ingestion.ingest import ingest_paths

    report = ingest_paths(settings, [HR_PORTAL], collection="hr-portal")
    assert not report.failed, report.failed
    with db.session(settings) as session:
        if not session.execute(
            select(FallbackSourceRow).where(FallbackSourceRow.name == "HR portal")
        ).scalar_one_or_none():
            session.add(FallbackSourceRow(name="HR portal", kind="collection", collection="hr-portal"))
    return settings


# Fixtures that start or need a service: the embedded PostgreSQL and Redis (every fixture that
# needs them asks for policybot_home, directly or through settings), the Slack fake and workers
# (stack, endpoint) and the browser. A test whose fixture closure holds none of them is a unit test.
SERVICE_FIXTURES = frozenset({"policybot_home", "stack", "endpoint", "browser", "page"})
# Need no service but train an evaluator first (tests/test_evaluator.py), seconds to minutes: too slow
# for the quick unit run, as are tests marked @pytest.mark.training (they train or evaluate one themselves).
TRAINING_FIXTURES = frozenset({"trained", "quick_plain"})
NOT_UNIT_MARKERS = ("services", "training")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every quick test that needs no service `unit`, so `pytest -m unit` runs them alone."""
    # fixturenames is the closure: a fixture that needs settings brings policybot_home with it.
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        # A test that starts services of its own, without those fixtures, says so: @pytest.mark.services.
        if fixtures & (SERVICE_FIXTURES | TRAINING_FIXTURES) or any(map(item.get_closest_marker, NOT_UNIT_MARKERS)):
            continue
        item.add_marker(pytest.mark.unit)
