"""The `policybot` command line as users run it: a real subprocess against the test stack."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from support.cli import policybot
from support.environment import REPO, SAMPLES


def test_ingest_json_contract_and_docs_list(settings, policybot_home, ingested_samples):
    result = policybot(policybot_home, "ingest", str(SAMPLES), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {"added", "updated", "unchanged", "skipped", "removed", "failed", "files"}
    assert report["failed"] == [] and report["unchanged"] == len(report["files"]) >= 12
    assert all(set(item) == {"path", "document", "status", "chunks"} and item["chunks"] > 0 for item in report["files"])

    listed = policybot(policybot_home, "docs", "list", "--json", "--collection", "policies")
    assert listed.returncode == 0, listed.stderr
    names = {doc["document"]: doc for doc in json.loads(listed.stdout)}
    assert {Path(item["path"]).name for item in report["files"]} <= set(names)
    assert names["travel-expenses.md"]["chunks"] > 0

    table = policybot(policybot_home, "docs", "list")
    assert "travel-expenses.md" in table.stdout and "chunks" in table.stdout


def test_ingest_exit_code_says_some_failed(settings, policybot_home, tmp_path):
    (tmp_path / "ok.md").write_text("# Ok\n\n## Rule\n\nDesks are cleaned every Friday.\n")
    (tmp_path / "bad.pdf").write_bytes(b"not a pdf at all")
    result = policybot(policybot_home, "ingest", str(tmp_path), "--collection", "cli-batch", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["added"] == 1 and [Path(f["path"]).name for f in report["failed"]] == ["bad.pdf"]


def test_bad_configuration_is_one_clear_line(policybot_home):
    result = policybot(
        policybot_home, "docs", "list", env_extra={"POLICYBOT_TOP_K": "lots", "DATABASE_URL": "mysql://x"}
    )
    assert result.returncode == 2
    assert (
        "invalid configuration" in result.stderr
        and "POLICYBOT_TOP_K" in result.stderr
        and "DATABASE_URL" in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_unreachable_external_database_is_reported(policybot_home):
    result = policybot(
        policybot_home, "docs", "list", env_extra={"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    )
    assert result.returncode == 2
    assert "cannot reach the database" in result.stderr and "Traceback" not in result.stderr


def test_docker_compose_names_the_services():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "bot", "worker"} <= set(services)
    assert services["postgres"]["image"].startswith("pgvector/pgvector:pg16")
    assert services["redis"]["image"].startswith("redis:7")
    for built in ("migrate", "bot", "worker"):
        assert "build" in services[built] or services[built].get("image", "").startswith("policybot")
    assert (REPO / "Dockerfile").exists()


def test_ask_by_channel_name_is_one_line_and_writes_no_row(settings, policybot_home, ingested_samples):
    from sqlalchemy import func, select

    from core import db
    from core.models import Question

    def questions() -> int:
        with db.session(settings) as session:
            return session.execute(select(func.count()).select_from(Question)).scalar_one()

    before = questions()
    result = policybot(policybot_home, "ask", "How many PTO days carry over?", "--channel", "general")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: --channel takes a Slack channel ID, not 'general' (IDs look like C012ABC3DE; a channel's ID is at "
        "the bottom of its About tab in Slack)"
    ]
    assert questions() == before


def test_activate_cosine_goes_back_from_a_trained_evaluator(settings, policybot_home):
    from sqlalchemy import delete

    from application import evaluators
    from application.runtime import load_active_evaluator
    from core import db
    from core.models import EvaluatorVersion

    previous = evaluators.active_version(settings)
    with db.session(settings) as session:
        session.add(
            EvaluatorVersion(
                version="cli-cosine-test",
                kind="minilm_t5",
                path="/nonexistent/cli-cosine-test",
                upper=0.5,
                lower=0.1,
                strip_threshold=0.0,
                active=False,
            )
        )
    try:
        assert policybot(policybot_home, "evaluator", "activate", "cli-cosine-test").returncode == 0
        assert evaluators.active_version(settings).version == "cli-cosine-test"

        result = policybot(policybot_home, "evaluator", "activate", "cosine")
        assert result.returncode == 0, result.stderr
        assert "active: cosine similarity" in result.stdout
        assert evaluators.active_version(settings) is None
        assert [v.version for v in evaluators.list_versions(settings) if v.version == "cli-cosine-test"]  # still stored
        loaded = load_active_evaluator(settings)
        assert (
            loaded.is_cosine
            and "none is active" in loaded.description
            and "no trained evaluator" not in loaded.description
        )
        listed = policybot(policybot_home, "evaluator", "list")
        assert "none is active: answers use cosine similarity" in listed.stdout
    finally:
        with db.session(settings) as session:
            session.execute(delete(EvaluatorVersion).where(EvaluatorVersion.version == "cli-cosine-test"))
        if previous is not None:
            evaluators.activate_version(settings, previous.version)


def test_demo_says_its_services_keep_running_and_how_to_stop_them(settings, capsys):
    from cli.demo import _say_services_still_run
    from core import services

    _say_services_still_run(services.services_status(settings))
    said = " ".join(capsys.readouterr().out.split())
    assert (
        "still running: the embedded postgres" in said
        and "redis" in said
        and "`policybot services down` stops them" in said
    )


def test_demo_says_why_its_short_training_is_not_activated_and_how_to_get_the_real_one(settings, capsys):
    """The demo trains for 2 minutes, on weak supervision alone; such an evaluator is stored, not
    activated: the demo says so under the table, and how to train the real one."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import delete, update

    from application import evaluators
    from cli.demo import _say_why_answers_use_cosine
    from core import db
    from core.models import EvaluatorVersion

    previous = evaluators.active_version(settings)
    routing = {"auc": 0.61, "routing_accuracy": 0.493}
    with db.session(settings) as session:  # as train_and_register stores a 2-minute training
        session.add(
            EvaluatorVersion(
                version="demo-short-test",
                kind="minilm_t5",
                path="/nonexistent/demo-short-test",
                upper=0.33,
                lower=-0.51,
                strip_threshold=0.0,
                metrics={"evaluator": routing, "cosine": routing, "gate": "weak supervision's held-out pseudo-queries"},
                beats_cosine=False,
                active=False,
                created_at=datetime.now(UTC) + timedelta(days=1),  # the newest, as the one just trained is
            )
        )
    try:
        _say_why_answers_use_cosine(settings, 2.0)
        said = " ".join(capsys.readouterr().out.split())
        assert "the demo's 2-minute budget trains on weak supervision alone" in said, said
        assert "not activated" in said and "`policybot evaluator pretrain`" in said, said
        assert said.index("evaluator pretrain") < said.index("then `policybot evaluator train`"), said

        with db.session(settings) as session:  # had it beaten cosine, it would be active: nothing to explain
            session.execute(update(EvaluatorVersion).values(active=False))
            session.execute(
                update(EvaluatorVersion).where(EvaluatorVersion.version == "demo-short-test").values(active=True)
            )
        _say_why_answers_use_cosine(settings, 2.0)
        assert capsys.readouterr().out == ""
    finally:
        with db.session(settings) as session:
            session.execute(delete(EvaluatorVersion).where(EvaluatorVersion.version == "demo-short-test"))
        if previous is not None:
            evaluators.activate_version(settings, previous.version)


def test_demo_output_shortens_with_an_ellipsis_and_keeps_the_delivery_together(settings):
    """The demo's action-log table shortens questions as `policybot logs` does (with "…"), and a
    delivery's "(HTTP 200 in 22 ms)" never wraps inside the parenthesis, whatever the terminal's width."""
    import io

    from rich.console import Console

    from core import db
    from devtools.demo import delivered_line, print_log_rows

    from support.question_log import question_row

    question = "How long do I have to submit my expense report after a domestic business trip?"
    with db.session(settings) as session:
        row = question_row(question=question, channel="CDEMOTABLE", action="correct", latency_ms=900.0)
        session.add(row)
        session.flush()
        row_id = row.id
    out = io.StringIO()
    print_log_rows(Console(file=out, width=220), settings, [row_id])
    assert "How long do I have to submit my expense report after a domestic busin…" in out.getvalue(), out.getvalue()

    for width in range(60, 141):
        out = io.StringIO()
        Console(file=out, width=width).print(delivered_line("1712345678.000100", question, 200, 0.022))
        lines = [line.strip() for line in out.getvalue().splitlines()]
        assert "(HTTP 200 in 22 ms)" in lines[0], (width, lines)
        words = " ".join(" ".join(lines).replace("(HTTP 200 in 22 ms)", " ").split())
        assert words == f"→ delivered app_mention 1712345678.000100: {question}", (width, lines)
