"""`policybot serve | worker | logs | stats`, run as users run them (subprocesses against the test stack)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from devtools.ports import free_port

from support.cli import policybot
from support.environment import cli_env
from support.question_log import question_row as _question

SECRET_TOKEN = "xoxb-1111-2222-thisisasecretvalue"


@pytest.fixture(scope="module")
def log_rows(settings):  # -> dict[str, int]: label -> question id
    from core import db
    from core.models import Feedback

    rows = {
        "correct": _question(
            question="How many weeks of parental leave?",
            action="correct",
            latency_ms=1000.0,
            answer="Primary caregivers receive 16 weeks. [1]",
            citations=[
                {
                    "n": 1,
                    "origin": "kb",
                    "source": "policies",
                    "document": "leave-policy.md",
                    "title": "Leave Policy",
                    "section": "4.2 Duration and pay",
                    "url": None,
                    "score": 0.7,
                }
            ],
            scores=[
                {
                    "document": "leave-policy.md",
                    "section": "4.2 Duration and pay",
                    "origin": "kb",
                    "source": "policies",
                    "chunk_id": "n1",
                    "score": 0.71,
                }
            ],
        ),
        "abstained": _question(
            question="What is the capital of France?",
            action="incorrect",
            found=False,
            latency_ms=500.0,
            sources_used=[],
            answer="I couldn't find this in the approved policy sources.",
            fallback_queries=[{"source": "HR portal", "query": "capital france"}],
        ),
        "ambiguous": _question(
            question="Can I expense a standing desk?",
            action="ambiguous",
            latency_ms=3000.0,
            sources_used=["knowledge base", "HR portal"],
            answer="Ask IT first. [1]",
        ),
        "failed": _question(
            question="Something that broke",
            status="failed",
            action=None,
            found=None,
            latency_ms=None,
            error="RuntimeError: boom",
        ),
    }
    with db.session(settings) as session:
        session.add_all(rows.values())
        session.flush()
        session.add(Feedback(question_id=rows["correct"].id, user_id="UVOTE1", vote=1))
        session.add(Feedback(question_id=rows["abstained"].id, user_id="UVOTE1", vote=-1))
        session.add(Feedback(question_id=rows["abstained"].id, user_id="UVOTE2", vote=-1))
        return {label: row.id for label, row in rows.items()}


def _ids(result) -> set[int]:
    assert result.returncode == 0, result.stderr
    return {record["id"] for record in json.loads(result.stdout)}


def test_logs_filters(policybot_home, log_rows) -> None:
    ours = set(log_rows.values())
    every = _ids(policybot(policybot_home, "logs", "--json", "--since", "1h", "-n", "1000"))
    assert ours <= every
    assert _ids(policybot(policybot_home, "logs", "--json", "-n", "1000", "--action", "incorrect")) & ours == {
        log_rows["abstained"]
    }
    assert _ids(policybot(policybot_home, "logs", "--json", "-n", "1000", "--found", "false")) & ours == {
        log_rows["abstained"]
    }
    assert _ids(policybot(policybot_home, "logs", "--json", "-n", "1000", "--feedback", "down")) & ours == {
        log_rows["abstained"]
    }
    assert _ids(policybot(policybot_home, "logs", "--json", "-n", "1000", "--feedback", "up")) & ours == {
        log_rows["correct"]
    }
    assert _ids(policybot(policybot_home, "logs", "--json", "-n", "1000", "--status", "failed")) & ours == {
        log_rows["failed"]
    }
    old = policybot(
        policybot_home, "logs", "--json", "--since", (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    )
    assert _ids(old) & ours == set()

    bad = policybot(policybot_home, "logs", "--action", "sideways")
    assert bad.returncode == 1 and "--action" in bad.stderr and "Traceback" not in bad.stderr
    bad_since = policybot(policybot_home, "logs", "--since", "last tuesday")
    assert bad_since.returncode == 1 and "--since" in bad_since.stderr


def test_logs_json_record_has_everything_admins_review(policybot_home, log_rows) -> None:
    result = policybot(policybot_home, "logs", "--json", "-n", "1000")
    record = next(r for r in json.loads(result.stdout) if r["id"] == log_rows["abstained"])
    assert record["question"] == "What is the capital of France?"
    assert record["action"] == "incorrect" and record["found"] is False
    assert record["action_text"] == "Not found in approved sources"
    assert record["fallback_queries"] == [{"source": "HR portal", "query": "capital france"}]
    assert record["feedback"] == {"up": 0, "down": 2}
    assert record["latency_ms"] == 500.0 and record["answer"].startswith("I couldn't find")
    assert {"scores", "citations", "sources_used", "evaluator_version", "reference", "error"} <= set(record)


def test_logs_csv_and_table(policybot_home, log_rows) -> None:
    result = policybot(policybot_home, "logs", "--csv", "-n", "1000")
    assert result.returncode == 0, result.stderr
    rows = {int(r["id"]): r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert rows[log_rows["correct"]]["feedback_up"] == "1"
    assert json.loads(rows[log_rows["correct"]]["citations"])[0]["document"] == "leave-policy.md"
    table = policybot(policybot_home, "logs", "-n", "1000")
    assert table.returncode == 0 and "logs show ID" in table.stdout
    reference = json.loads(policybot(policybot_home, "logs", "show", str(log_rows["abstained"]), "--json").stdout)[
        "reference"
    ]
    assert reference in table.stdout and "incorrect" in table.stdout
    both = policybot(policybot_home, "logs", "--csv", "--json")
    assert both.returncode == 1


def test_logs_show_by_id_and_by_reference(settings, policybot_home, log_rows) -> None:
    from application.answering import get_question

    shown = policybot(policybot_home, "logs", "show", str(log_rows["correct"]))
    assert shown.returncode == 0, shown.stderr
    for expected in (
        "How many weeks of parental leave?",
        "Primary caregivers receive 16 weeks",
        "leave-policy.md",
        "Answered from the policy knowledge base",
        "0.710",
        "👍 1",
    ):
        assert expected in shown.stdout, expected
    reference = get_question(settings, log_rows["failed"]).reference
    failed = policybot(policybot_home, "logs", "show", reference.lower(), "--json")
    assert failed.returncode == 0 and json.loads(failed.stdout)["error"] == "RuntimeError: boom"
    failed_shown = policybot(policybot_home, "logs", "show", reference)
    assert failed_shown.returncode == 0 and "RuntimeError: boom" in failed_shown.stdout
    assert "latency None" not in failed_shown.stdout and "no latency (never answered)" in failed_shown.stdout
    missing = policybot(policybot_home, "logs", "show", "999999")
    assert missing.returncode == 1 and "no logged question" in missing.stderr


def test_logs_show_rounds_thresholds_and_shows_where_sections_differ(settings, policybot_home) -> None:
    from core import db

    title = "Devices and Information Security Policy"
    byod = f"{title} > 3. Bring Your Own Device (BYOD) and personal equipment at work"
    sections = [f"{byod} > 3.1 Enrolling a personal phone", f"{byod} > 3.2 Leaving the company"]
    row = _question(
        question="Can I read work email on my own phone?",
        action="correct",
        upper=0.3292999225290789,
        lower=-0.508929048070236,
        answer="Yes, once the phone is enrolled. [1]",
        scores=[
            {"document": "devices.md", "section": section, "origin": "kb", "source": "policies", "score": score}
            for section, score in zip(sections, (0.61, 0.12), strict=True)
        ],
        citations=[
            {
                "n": 1,
                "origin": "kb",
                "source": "policies",
                "document": "devices.md",
                "title": title,
                "section": sections[0],
                "url": None,
                "score": 0.61,
            }
        ],
    )
    with db.session(settings) as session:
        session.add(row)
        session.flush()
        row_id = row.id
    shown = policybot(policybot_home, "logs", "show", str(row_id))
    assert shown.returncode == 0, shown.stderr
    assert "upper 0.329, lower -0.509" in shown.stdout and "0.3292999" not in shown.stdout, shown.stdout
    assert "3.1 Enrolling a personal phone" in shown.stdout and "3.2 Leaving the company" in shown.stdout, shown.stdout
    [citation] = [line for line in shown.stdout.splitlines() if line.strip().startswith("[1]")]
    assert f"{title} — 3.1 Enrolling a personal phone" in citation and citation.count(title) == 1, citation


def test_logs_status_says_what_happened_to_the_asker(settings, policybot_home) -> None:
    """The status is the asker's outcome, derived from what the answering code stores; where the Slack
    reply is (posted, owed, not posted) is a field of its own."""
    from application import outbox
    from application.answering import mark_failed
    from core import db

    def slack_question(**values):  # recorded with its outbox row, as the listener does
        with db.session(settings) as session:
            row = _question(channel="CSTATUS01", **values)
            session.add(row)
            session.flush()
            outbox.add(session, row.id, 60)
            return row.id

    answered = slack_question(question="How many weeks of parental leave?", action="correct")
    outbox.mark_posted(settings, answered, "1700000001.000100")
    abstained = slack_question(question="Can I bring my dog?", action="incorrect", found=False, sources_used=[])
    outbox.mark_posted(settings, abstained, "1700000001.000200")
    apologised = slack_question(question="What broke?", status="pending", action=None, found=None)
    mark_failed(settings, apologised, RuntimeError("boom"), apology_due=True)
    outbox.mark_posted(settings, apologised, "1700000001.000300")  # the apology, as slack_shared/apology.py posts it
    apology_owed = slack_question(question="What broke while Slack was down?", status="pending", found=None)
    mark_failed(settings, apology_owed, RuntimeError("boom"), apology_due=True)
    apology_refused = slack_question(question="What broke in a gone channel?", status="pending", found=None)
    mark_failed(settings, apology_refused, RuntimeError("channel_not_found"), apology_due=True)
    outbox.close_now(settings, apology_refused)
    retry_due = slack_question(question="What failed for now?", status="pending", found=None)
    mark_failed(settings, retry_due, RuntimeError("timeout"))  # a retry is due: the answer is still owed
    waiting = slack_question(question="What is queued?", status="pending", action=None, found=None)
    with db.session(settings) as session:
        cli = _question(question="What broke here?", surface="cli", channel=None, status="failed", found=None)
        session.add(cli)
        session.flush()
        cli_failed = cli.id

    expected = {
        answered: ("answered", "posted"),
        abstained: ("abstained", "posted"),
        apologised: ("apologised", "posted"),
        apology_owed: ("apologised", "owed"),
        apology_refused: ("failed", "not posted"),
        retry_due: ("pending", "owed"),
        waiting: ("pending", "owed"),
        cli_failed: ("failed", None),
    }
    result = policybot(policybot_home, "logs", "--json", "-n", "1000")
    assert result.returncode == 0, result.stderr
    records = {r["id"]: r for r in json.loads(result.stdout) if r["id"] in expected}
    assert {qid: (r["status"], r["delivery"]) for qid, r in records.items()} == expected
    for status in ("answered", "abstained", "apologised", "failed", "pending"):
        shown = _ids(policybot(policybot_home, "logs", "--json", "-n", "1000", "--status", status)) & set(expected)
        assert shown == {qid for qid, (outcome, _) in expected.items() if outcome == status}, status

    exported = policybot(policybot_home, "logs", "--csv", "-n", "1000")
    rows = {int(r["id"]): r for r in csv.DictReader(io.StringIO(exported.stdout))}
    assert (rows[abstained]["status"], rows[abstained]["delivery"]) == ("abstained", "posted")
    assert (rows[cli_failed]["status"], rows[cli_failed]["delivery"]) == ("failed", "")
    shown = policybot(policybot_home, "logs", "show", str(abstained))
    assert shown.returncode == 0 and "abstained (reply posted)" in shown.stdout, shown.stdout
    bad = policybot(policybot_home, "logs", "--status", "delivered")
    assert bad.returncode == 1 and "abstained, apologised" in bad.stderr


def test_stats_per_day_rates_feedback_and_latency(settings) -> None:
    from application.review import daily_stats
    from core import db
    from core.models import Feedback

    day1 = datetime(2021, 6, 1, 9, tzinfo=UTC)
    day2 = day1 + timedelta(days=1)
    rows = [
        _question(question="a", action="correct", latency_ms=100.0, created_at=day1),
        _question(question="b", action="correct", latency_ms=200.0, created_at=day1),
        _question(question="c", action="incorrect", found=False, latency_ms=300.0, created_at=day1),
        _question(question="d", action="ambiguous", latency_ms=1000.0, created_at=day2),
        _question(question="e", status="failed", action=None, found=None, latency_ms=None, created_at=day2),
    ]
    with db.session(settings) as session:
        session.add_all(rows)
        session.flush()
        session.add_all(
            [
                Feedback(question_id=rows[0].id, user_id="U1", vote=1),
                Feedback(question_id=rows[0].id, user_id="U2", vote=1),
                Feedback(question_id=rows[2].id, user_id="U1", vote=-1),
            ]
        )

    report = daily_stats(settings, days=2, now=day2)
    assert [d["day"] for d in report["per_day"]] == ["2021-06-01", "2021-06-02"]
    first, second = report["per_day"]
    assert first["questions"] == 3 and first["actions"] == {"correct": 2, "ambiguous": 0, "incorrect": 1}
    assert first["action_rates"]["correct"] == pytest.approx(2 / 3) and first["abstention_rate"] == pytest.approx(1 / 3)
    assert first["feedback_up"] == 2 and first["feedback_down"] == 1
    assert first["latency_p50_ms"] == 200.0 and first["latency_p95_ms"] == pytest.approx(290.0)
    assert second["failed"] == 1 and second["answered"] == 1
    total = report["total"]
    assert total["questions"] == 5 and total["answered"] == 4 and total["abstention_rate"] == 0.25
    assert daily_stats(settings, days=1, now=day1 - timedelta(days=1))["total"]["questions"] == 0


def test_stats_command(policybot_home, log_rows) -> None:
    result = policybot(policybot_home, "stats", "--json", "--days", "3")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["days"] == 3 and len(report["per_day"]) >= 1 and report["total"]["questions"] >= 4
    table = policybot(policybot_home, "stats")
    assert table.returncode == 0 and "p95 ms" in table.stdout and "total" in table.stdout


def test_parse_since() -> None:
    from application.action_log import parse_since

    now = datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("12h", now) == now - timedelta(hours=12)
    assert parse_since("2w", now) == now - timedelta(weeks=2)
    assert parse_since("2026-01-01", now) == datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_since("soon", now)


# ----------------------------------------------------------------- serve / worker


def test_missing_slack_settings_are_named_never_shown(policybot_home) -> None:
    slack = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN")
    http = policybot(
        policybot_home,
        "serve",
        "--http",
        env_extra={"SLACK_BOT_TOKEN": SECRET_TOKEN},
        drop=("SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"),
    )
    assert http.returncode == 2 and "SLACK_SIGNING_SECRET" in http.stderr
    socket_mode = policybot(
        policybot_home,
        "serve",
        "--socket",
        env_extra={"SLACK_BOT_TOKEN": SECRET_TOKEN},
        drop=("SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"),
    )
    assert socket_mode.returncode == 2 and "SLACK_APP_TOKEN" in socket_mode.stderr
    worker = policybot(policybot_home, "worker", drop=slack)
    assert worker.returncode == 2 and "SLACK_BOT_TOKEN" in worker.stderr
    for result in (http, socket_mode, worker):
        assert SECRET_TOKEN not in result.stdout + result.stderr and "Traceback" not in result.stderr
    neither = policybot(policybot_home, "serve")
    assert neither.returncode == 1 and "--http or --socket" in neither.stderr
    queues = policybot(
        policybot_home, "worker", "--queues", "answer,bogus", env_extra={"SLACK_BOT_TOKEN": SECRET_TOKEN}
    )
    assert queues.returncode == 1 and "bogus" in queues.stderr


def test_serve_http_binds_the_port_and_verifies_signatures(settings, policybot_home) -> None:
    from devtools.fake_slack import FakeSlack

    with FakeSlack() as fake:
        port = free_port()
        env = cli_env(policybot_home) | {
            "SLACK_BOT_TOKEN": fake.bot_token,
            "SLACK_SIGNING_SECRET": fake.signing_secret,
            "SLACK_API_URL": fake.api_url,
        }
        process = subprocess.Popen(
            [sys.executable, "-m", "cli", "serve", "--http", "--port", str(port)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                assert time.monotonic() < deadline, "serve --http did not come up"
                time.sleep(0.2)
            assert fake.calls_to("auth.test")  # the token is checked at startup, against SLACK_API_URL
            body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"})
            signed = httpx.post(url + "/slack/events", content=body, headers=fake.signed_headers(body))
            assert signed.status_code == 200 and "c-123" in signed.text
            forged = httpx.post(
                url + "/slack/events", content=body, headers=fake.signed_headers(body, secret="wrong-secret")
            )
            assert forged.status_code == 401
        finally:
            process.terminate()
            output = process.communicate(timeout=30)[0]
        assert fake.signing_secret not in output and fake.bot_token not in output

        wrong = policybot(
            policybot_home,
            "serve",
            "--http",
            "--port",
            str(free_port()),
            env_extra={
                "SLACK_BOT_TOKEN": SECRET_TOKEN,
                "SLACK_SIGNING_SECRET": "s3cr3t-value",
                "SLACK_API_URL": fake.api_url,
            },
        )
        assert wrong.returncode == 2 and "Slack refused" in wrong.stderr and "invalid_auth" in wrong.stderr
        assert SECRET_TOKEN not in wrong.stderr + wrong.stdout and "Traceback" not in wrong.stderr
