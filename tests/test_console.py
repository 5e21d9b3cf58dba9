"""The admin console's views and auth, through Starlette's TestClient against the real test database.

Nothing of ours is mocked: sessions, CSRF, queries, reviews, documents, sources and jobs all
hit the embedded PostgreSQL (and Redis, for queued jobs).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC

import pytest
from pydantic import SecretStr

from support.calibration import ABSENT, PRESENT, seed_reviewed_version, stored_thresholds
from support.console import ADMIN_PASSWORD, ADMIN_USER, CHANNEL, DOG, PARENTAL, console_settings, csrf_of
from support.environment import cli_env

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def csettings(settings):
    return console_settings(settings)


@pytest.fixture(autouse=True)
def fresh_sign_in_throttle(settings) -> Iterator[None]:
    """The throttle lives in the run's Redis: one test's failed sign-ins must not lock out the next's."""
    import redis

    from console.auth import THROTTLE_PREFIX
    from core import services

    yield
    client = redis.Redis.from_url(services.redis_url(settings))
    for key in client.scan_iter(THROTTLE_PREFIX + "*"):
        client.delete(key)


def _client(csettings):
    from starlette.testclient import TestClient

    from console.app import create_standalone_app

    return TestClient(create_standalone_app(csettings))


def _sign_in(client, password: str = ADMIN_PASSWORD):
    page = client.get("/admin/login")
    return client.post(
        "/admin/login",
        data={"username": ADMIN_USER, "password": password, "csrf_token": csrf_of(page.text)},
        follow_redirects=False,
    )


@pytest.fixture()
def admin(csettings):
    client = _client(csettings)
    response = _sign_in(client)
    assert response.status_code == 303 and response.headers["location"] == "/admin/activity"
    return client


def _csrf(client, path: str = "/admin/activity") -> str:
    return csrf_of(client.get(path).text)


# ------------------------------------------------------------------ auth


def test_hash_password_command_makes_a_hash_that_signs_in(policybot_home) -> None:
    from console.auth import verify_password

    result = subprocess.run(
        [sys.executable, "-m", "cli", "console", "hash-password", "--user", "grace"],
        input="s3cret-enough\n",
        capture_output=True,
        text=True,
        env=cli_env(policybot_home),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    user, _, hashed = result.stdout.strip().partition(":")
    assert user == "grace" and hashed.startswith("scrypt$") and "s3cret" not in result.stdout
    assert verify_password("s3cret-enough", hashed) and not verify_password("s3cret-enougH", hashed)
    short = subprocess.run(
        [sys.executable, "-m", "cli", "console", "hash-password"],
        input="short\n",
        capture_output=True,
        text=True,
        env=cli_env(policybot_home),
        timeout=120,
    )
    assert short.returncode == 1 and "at least 8" in short.stderr


def _concrete(path: str) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: {"kind": "csv", "ref": "1"}.get(m.group(1), "1"), path)


def test_every_route_refuses_the_signed_out(csettings) -> None:
    from starlette.routing import Mount, Route

    from console.app import create_console_app

    client = _client(csettings)
    checked = 0
    for route in create_console_app(csettings).routes:
        if isinstance(route, Mount) or route.path == "/login":
            continue  # static CSS/JS, and the sign-in page itself
        assert isinstance(route, Route)
        path = "/admin" + _concrete(route.path)
        for method in sorted(route.methods - {"HEAD"}):
            response = client.request(method, path, follow_redirects=False)
            if method == "GET" and not (path.startswith("/admin/api/") or path.startswith("/admin/activity.")):
                assert response.status_code == 303, (method, path)
                assert response.headers["location"].startswith("/admin/login?next=")
            else:
                assert response.status_code == 401, (method, path)
                assert response.json() == {"error": "sign in first"}
            assert "Primary caregivers" not in response.text
            checked += 1
    assert checked >= 20
    client.cookies.set("policybot_console", "eyJ1IjoiYWRhIn0.forged")
    assert client.get("/admin/api/stats").status_code == 401


def test_sign_in_sets_a_hardened_cookie_and_logout_ends_it(csettings) -> None:
    client = _client(csettings)
    wrong = _sign_in(client, "not the password")
    assert wrong.status_code == 401 and "wrong user name or password" in wrong.text
    assert client.get("/admin/api/stats").status_code == 401
    response = _sign_in(client)
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie  # plain http test server
    assert ADMIN_PASSWORD not in cookie
    assert client.get("/admin/api/stats").status_code == 200
    page = client.get("/admin/activity")
    assert page.headers["x-frame-options"] == "DENY" and "script-src 'self'" in page.headers["content-security-policy"]
    out = client.post("/admin/logout", data={"csrf_token": csrf_of(page.text)}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/admin/login"
    assert client.get("/admin/api/stats").status_code == 401

    secure = _client(console_settings(csettings, console_secure_cookie="true"))
    assert "Secure" in _sign_in(secure).headers["set-cookie"]


def test_a_user_removed_from_config_is_signed_out(csettings, admin) -> None:
    from starlette.testclient import TestClient

    from console.app import create_standalone_app

    other = TestClient(create_standalone_app(csettings.model_copy(update={"console_users": SecretStr("")})))
    other.cookies = admin.cookies
    assert other.get("/admin/api/stats").status_code == 401


def test_post_without_csrf_token_is_refused(csettings, admin, seeded_log) -> None:
    from application.review import reviews_for

    qid = seeded_log["dog"]
    for data in ({"verdict": "wrong"}, {"verdict": "wrong", "csrf_token": "forged-token"}):
        response = admin.post(f"/admin/activity/{qid}/review", data=data, follow_redirects=False)
        assert response.status_code == 403 and "CSRF" in response.text
    assert reviews_for(csettings, qid) == []
    login = _client(csettings).post("/admin/login", data={"username": ADMIN_USER, "password": ADMIN_PASSWORD})
    assert login.status_code == 403  # the sign-in form carries a token too


# ------------------------------------------------------------------ activity


def _ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr class="row-link" data-id="(\d+)"', html)]


def test_activity_filters_paginates_and_refuses_bad_filters(admin, seeded_log) -> None:
    ours = set(seeded_log.values())
    page = admin.get("/admin/activity", params={"channel": CHANNEL})
    assert page.status_code == 200
    total = int(re.search(r'id="result-count">(\d+)<', page.text).group(1))
    assert total == len(seeded_log)
    assert '<option value="t5-console-test"' in page.text  # the evaluator filter offers the logged versions
    first = _ids(page.text)
    assert len(first) == 50 and first == sorted(first, reverse=True)  # newest first, one page
    second = _ids(admin.get("/admin/activity", params={"channel": CHANNEL, "page": 2}).text)
    assert set(first) | set(second) == ours and not set(first) & set(second)

    def ids(**params: str) -> set[int]:
        return set(_ids(admin.get("/admin/activity", params={"channel": CHANNEL} | params).text))

    assert ids(q="bring my DOG") == {seeded_log["dog"]}
    assert ids(found="false", range="24h") == {seeded_log["dog"]}
    assert ids(feedback="up") == {seeded_log["parental"]}
    assert ids(evaluator="t5-console-test") == {seeded_log["parental"]}
    assert ids(action="incorrect", range="7d") == {
        v for k, v in seeded_log.items() if k.startswith("recent") or k == "dog"
    }
    assert ids(q="100%_") == set()  # LIKE wildcards are literal
    # The status says what happened to the asker: the dog question was abstained on, not "answered".
    assert ids(status="abstained") == {seeded_log["dog"]} | {
        v for k, v in seeded_log.items() if k.startswith("recent") and k.endswith("-0")
    }
    assert seeded_log["dog"] not in ids(status="answered") and seeded_log["parental"] in ids(status="answered")
    dog_page = admin.get("/admin/activity", params={"channel": CHANNEL, "q": "bring my DOG"}).text
    dog_row = re.search(rf'data-id="{seeded_log["dog"]}">.*?</tr>', dog_page, re.S)
    assert dog_row is not None and '<span class="pill abstained">abstained</span>' in dog_row.group(0)
    for bad in ({"action": "sideways"}, {"since": "last tuesday"}, {"range": "forever"}, {"page": "0"}):
        response = admin.get("/admin/activity", params=bad)
        assert response.status_code == 400, bad
        assert "error-message" in response.text


def test_activity_date_placeholders_are_examples_from_today(admin) -> None:
    """From/To show dates near today (a week back, today), not fixed ones that age; whether they fit
    their boxes is measured in the browser (tests/test_console_e2e.py)."""
    from datetime import datetime, timedelta

    before = datetime.now(UTC).date()
    page = admin.get("/admin/activity").text
    after = datetime.now(UTC).date()
    shown = {name: re.search(rf'name="{name}"[^>]*placeholder="([^"]*)"', page).group(1) for name in ("since", "until")}
    assert any(
        shown == {"since": (day - timedelta(days=7)).isoformat(), "until": day.isoformat()} for day in {before, after}
    ), shown


def test_exports_carry_the_filtered_rows(admin, seeded_log) -> None:
    params = {"channel": CHANNEL, "action": "incorrect", "range": "24h"}
    exported = admin.get("/admin/activity.csv", params=params)
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    assert "attachment" in exported.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [int(r["id"]) for r in rows] == [seeded_log["dog"]] and rows[0]["question"] == DOG
    lines = admin.get("/admin/activity.jsonl", params={"channel": CHANNEL, "q": "parental"}).text.splitlines()
    [record] = [json.loads(line) for line in lines]
    assert record["id"] == seeded_log["parental"] and record["citations"][0]["document"] == "leave-policy.md"
    assert admin.get("/admin/activity.xml").status_code == 404


def test_record_view_shows_the_whole_decision(admin, seeded_log) -> None:
    page = admin.get(f"/admin/activity/{seeded_log['parental']}")
    assert page.status_code == 200
    html = page.text
    for expected in (
        PARENTAL,
        "Primary caregivers receive 16 weeks of paid leave.",
        "t5-console-test",
        "upper 0.500",
        "lower -0.100",
        "leave-policy.md",
        "4.2 Duration and pay",
        "👍 1",
        "Answered from the policy knowledge base",
        "evaluate",
        "300 ms",
        "slack.com/app_redirect?channel=",
    ):
        assert expected in html, expected
    svg = html[html.index('<svg class="chart"') : html.index("</svg>")]
    assert svg.count('class="score ') == 3 and 'class="threshold threshold-upper"' in svg and "threshold-lower" in svg
    dog = admin.get(f"/admin/activity/{seeded_log['dog']}").text
    assert "dog office" in dog and "HR portal" in dog and "Not found in approved sources" in dog
    assert admin.get("/admin/activity/987654").status_code == 404
    assert admin.get("/admin/activity/99999999999").status_code == 404
    assert admin.get("/admin/api/records/987654").status_code == 404
    api = admin.get(f"/admin/api/records/{seeded_log['dog']}")
    assert api.status_code == 200 and api.json()["fallback_queries"] == [{"source": "HR portal", "query": "dog office"}]


def test_an_all_digit_reference_is_never_taken_for_a_row_id(csettings, admin) -> None:
    """About 1 in 4,096 references is all digits; a row whose id is those digits is another question."""
    from sqlalchemy import delete

    from application.action_log import record_id
    from application.review import find_record
    from core import db
    from core.models import Question

    from support.question_log import question_row

    quoted = question_row(question="Whose reference is all digits?", reference="482759", channel="CDIGITREF1")
    other = question_row(id=482759, question="Whose id is those digits?", reference="QQQQQQ", channel="CDIGITREF1")
    with db.session(csettings) as session:
        session.add_all([quoted, other])
        session.flush()
        quoted_id = quoted.id
    try:
        for ref in ("482759", " 482759 "):
            assert find_record(csettings, ref)["question"] == "Whose reference is all digits?"  # type: ignore[index]
        for ref in ("#482759", "id:482759", "ID: 482759"):
            assert find_record(csettings, ref)["question"] == "Whose id is those digits?"  # type: ignore[index]
        assert find_record(csettings, str(quoted_id))["reference"] == "482759"  # type: ignore[index]
        assert [record_id(ref) for ref in ("1234", "#77", "Q7K2M9", "482759", "#x", "²", "99999999999")] == [
            1234,
            77,
            None,
            None,
            None,
            None,
            None,
        ]
        page = admin.get("/admin/activity/482759")
        assert page.status_code == 200 and "Whose reference is all digits?" in page.text
        by_id = admin.get("/admin/activity/id:482759")
        assert by_id.status_code == 200 and "Whose id is those digits?" in by_id.text
        listed = admin.get("/admin/activity", params={"channel": "CDIGITREF1"}).text
        assert f'href="/admin/activity/id:{quoted_id}"' in listed and 'href="/admin/activity/id:482759"' in listed
    finally:
        with db.session(csettings) as session:
            session.execute(delete(Question).where(Question.channel == "CDIGITREF1"))


def test_review_is_stored_and_filterable(csettings, admin, seeded_log, ingested_samples) -> None:
    from application.manage import list_documents
    from application.review import reviews_for

    qid = seeded_log["dog"]
    leave = next(d for d in list_documents(csettings) if d.name == "leave-policy.md")
    token = _csrf(admin)
    response = admin.post(
        f"/admin/activity/{qid}/review",
        data={
            "csrf_token": token,
            "verdict": "wrong",
            "expected_document": str(leave.id),
            "note": "pets are in the leave doc?",
        },
        follow_redirects=False,
    )
    assert response.status_code == 303
    [label] = reviews_for(csettings, qid)
    assert label["verdict"] == "wrong" and label["reviewer"] == ADMIN_USER
    assert label["expected_document_id"] == leave.id and label["expected_document"] == "leave-policy.md"
    page = admin.get(response.headers["location"]).text
    assert "review saved: wrong" in page and "should have answered: leave-policy.md" in page
    assert set(_ids(admin.get("/admin/activity", params={"channel": CHANNEL, "reviewed": "wrong"}).text)) == {qid}
    # relabelling replaces this reviewer's label instead of adding one
    admin.post(f"/admin/activity/{qid}/review", data={"csrf_token": token, "verdict": "right"})
    assert [r["verdict"] for r in reviews_for(csettings, qid)] == ["right"]
    for bad, status in (
        ({"verdict": "maybe"}, 400),
        ({"verdict": "right", "expected_document": "999999"}, 400),
        ({"verdict": "right", "expected_document": "leave"}, 400),
    ):
        assert admin.post(f"/admin/activity/{qid}/review", data={"csrf_token": token} | bad).status_code == status
    unknown = admin.post(
        "/admin/activity/987654/review",
        data={"csrf_token": token, "verdict": "right"},
        headers={"accept": "application/json"},
    )
    assert unknown.status_code == 404 and unknown.json() == {"error": "no logged question 987654"}


def test_review_errors_carry_their_console_status(csettings, seeded_log) -> None:
    """The console answers with the error's `status`: 404 for a question that is not there, 400 for bad input."""
    from application.review import ReviewError, set_review
    from core.errors import NotFound, UserError

    with pytest.raises(NotFound, match="no logged question 987654") as missing:
        set_review(csettings, 987654, ADMIN_USER, "right")
    assert isinstance(missing.value, ReviewError) and missing.value.status == 404
    for bad in ({"verdict": "maybe"}, {"verdict": "right", "expected_document_id": 999999}):
        with pytest.raises(ReviewError) as refused:
            set_review(csettings, seeded_log["dog"], ADMIN_USER, **bad)
        assert isinstance(refused.value, UserError) and not isinstance(refused.value, NotFound)
        assert refused.value.status == 400


# ------------------------------------------------------------------ dashboard


def test_dashboard_charts_alert_and_misses(csettings, admin, seeded_log, ingested_samples) -> None:
    # The miss topics are the fallback's keywords, read against the ingested documents' own
    # vocabulary ("minibar" is in samples/policies/travel-expenses.md): hence ingested_samples.
    from application.review import incorrect_alert

    alert = incorrect_alert(csettings, csettings.alert_margin)
    assert alert["alert"] and alert["recent_share"] > alert["prior_share"] + csettings.alert_margin
    page = admin.get("/admin/dashboard")
    assert page.status_code == 200
    html = page.text
    assert 'id="incorrect-alert"' in html
    assert html.count('<svg class="chart"') == 4
    assert html.count('class="bar bar-incorrect"') >= 6 and 'class="bar bar-correct"' in html
    misses = html[html.index('id="miss-documents"') :]
    assert "travel-expenses.md" in misses[: misses.index("</table>")]
    topics = html[html.index('id="miss-topics"') :]
    assert "minibar" in topics[: topics.index("</table>")]
    quiet = admin.get("/admin/dashboard", params={"days": "7"})
    assert quiet.status_code == 200 and admin.get("/admin/dashboard", params={"days": "0"}).status_code == 400
    no_alert = _client(console_settings(csettings, alert_margin=1.0))
    _sign_in(no_alert)
    assert 'id="incorrect-alert"' not in no_alert.get("/admin/dashboard").text
    stats = admin.get("/admin/api/stats", params={"days": "30"}).json()
    assert stats["total"]["questions"] >= len(seeded_log) and stats["alert"]["alert"] is True


# ------------------------------------------------------------------ documents


def test_documents_access_remove_and_upload_errors(csettings, admin, ingested_samples, tmp_path) -> None:
    from sqlalchemy import text

    from application.manage import get_document, list_documents
    from core import db
    from ingestion.ingest import ingest_paths

    scratch = tmp_path / "console-scratch.md"
    scratch.write_text("# Scratch Policy\n\nThe scratch rule says visitors sign in at reception before 9 am.\n")
    report = ingest_paths(csettings, [scratch], collection="console-scratch")
    assert not report.failed
    doc = next(d for d in list_documents(csettings, "console-scratch"))
    page = admin.get("/admin/documents").text
    assert "console-scratch.md" in page and "leave-policy.md" in page and 'data-collection="policies"' in page
    token = csrf_of(page)

    ok = admin.post(f"/admin/documents/{doc.id}/access", data={"csrf_token": token, "channels": "CSAFE01, CSAFE02"})
    assert ok.status_code == 200 and "visible to CSAFE01, CSAFE02" in ok.text
    assert get_document(csettings, doc.id).access_channels == ["CSAFE01", "CSAFE02"]
    with db.session(csettings) as session:
        acl = (
            session.execute(
                text("SELECT DISTINCT metadata_->'acl' FROM data_chunks WHERE metadata_->>'doc_id' = :d"),
                {"d": str(doc.id)},
            )
            .scalars()
            .all()
        )
    assert acl == [["CSAFE01", "CSAFE02"]]  # the chunks searched carry the new access list at once
    bad = admin.post(f"/admin/documents/{doc.id}/access", data={"csrf_token": token, "channels": "C1' OR 1=1"})
    assert bad.status_code == 400 and "not a Slack channel ID" in bad.text
    assert get_document(csettings, doc.id).access_channels == ["CSAFE01", "CSAFE02"]

    unsupported = admin.post(
        "/admin/documents/upload",
        data={"csrf_token": token},
        files={"files": ("payload.exe", b"MZ\x90", "application/octet-stream")},
    )
    assert unsupported.status_code == 415 and "unsupported file type" in unsupported.text
    empty = admin.post(
        "/admin/documents/upload", data={"csrf_token": token}, files={"files": ("empty.md", b"", "text/markdown")}
    )
    assert empty.status_code == 400 and "empty" in empty.text
    none = admin.post("/admin/documents/upload", data={"csrf_token": token})
    assert none.status_code == 400 and "choose at least one file" in none.text
    bad_collection = admin.post(
        "/admin/documents/upload",
        data={"csrf_token": token, "collection": "Bad Name!"},
        files={"files": ("a.md", b"# A\n\ntext", "text/markdown")},
    )
    assert bad_collection.status_code == 400 and "invalid collection name" in bad_collection.text
    small = _client(console_settings(csettings, max_file_mb=0.001))
    _sign_in(small)
    big = small.post(
        "/admin/documents/upload",
        data={"csrf_token": _csrf(small, "/admin/documents")},
        files={"files": ("big.md", b"# Big\n\n" + b"word " * 400, "text/markdown")},
    )
    assert big.status_code == 413 and "larger than" in big.text

    scratch.unlink()
    gone = admin.post(f"/admin/documents/{doc.id}/reingest", data={"csrf_token": token})
    assert gone.status_code == 409 and "is gone" in gone.text
    removed = admin.post(f"/admin/documents/{doc.id}/remove", data={"csrf_token": token})
    assert removed.status_code == 200 and "removed console-scratch.md" in removed.text
    assert get_document(csettings, doc.id) is None
    assert admin.post(f"/admin/documents/{doc.id}/remove", data={"csrf_token": token}).status_code == 404
    assert admin.get("/admin/api/jobs/987654").status_code == 404


# ------------------------------------------------------------------ sources and evaluators


def test_sources_add_test_query_and_remove(csettings, admin, knowledge_base) -> None:
    from application.manage import list_fallback_sources

    token = _csrf(admin, "/admin/sources")
    added = admin.post(
        "/admin/sources/add",
        data={
            "csrf_token": token,
            "name": "Console wiki",
            "kind": "http",
            "url": "https://wiki.example.com/api/search",
            "timeout": "2",
            "max_bytes": "50000",
        },
    )
    assert added.status_code == 200 and "allow-listed &#39;Console wiki&#39;" in added.text
    assert any(s.name == "Console wiki" and s.kind == "http" for s in list_fallback_sources(csettings))
    duplicate = admin.post(
        "/admin/sources/add",
        data={"csrf_token": token, "name": "Console wiki", "kind": "collection", "collection": "hr-portal"},
    )
    assert duplicate.status_code == 400 and "exists" in duplicate.text
    bad_url = admin.post(
        "/admin/sources/add", data={"csrf_token": token, "name": "Bad", "kind": "http", "url": "ftp://x"}
    )
    assert bad_url.status_code == 400 and "http(s)" in bad_url.text

    tested = admin.post(
        "/admin/sources/test",
        data={
            "csrf_token": token,
            "question": "Jane Roe here (jane.roe@example.com, EMP-12345): how do I claim dental insurance?",
            "asker_names": "Jane Roe",
        },
    )
    assert tested.status_code == 200
    html = tested.text
    redacted = re.search(r'id="redacted">([^<]*)<', html).group(1)
    keywords = re.search(r'id="keywords">([^<]*)<', html).group(1)
    assert "jane" not in redacted.lower() and "example.com" not in redacted and "12345" not in redacted
    from crag.redaction import keyword_query, redact

    question = "Jane Roe here (jane.roe@example.com, EMP-12345): how do I claim dental insurance?"
    assert keywords == keyword_query(redact(question, ["Jane Roe"]))
    assert "GET https://wiki.example.com/api/search?q=" + keywords.replace(" ", "+") in html
    assert "HR portal" in html  # the collection source is permitted too

    removed = admin.post("/admin/sources/remove", data={"csrf_token": token, "name": "Console wiki"})
    assert removed.status_code == 200 and not any(s.name == "Console wiki" for s in list_fallback_sources(csettings))
    assert admin.post("/admin/sources/remove", data={"csrf_token": token, "name": "Console wiki"}).status_code == 404


def test_evaluators_page_activation_errors_and_queued_training(csettings, admin, ingested_samples) -> None:
    from application import jobs
    from workers.celery_app import INGEST_QUEUE, celery_app

    page = admin.get("/admin/evaluators")
    assert page.status_code == 200 and 'id="versions"' in page.text
    token = csrf_of(page.text)
    missing = admin.post("/admin/evaluators/activate", data={"csrf_token": token, "version": "no-such-version"})
    assert missing.status_code == 404 and "no evaluator version" in missing.text
    for bad in ({"minutes": "-1"}, {"minutes": "lots"}, {"activate": "sometimes"}):
        assert admin.post("/admin/evaluators/train", data={"csrf_token": token} | bad).status_code == 400
    queued = admin.post(
        "/admin/evaluators/train",
        data={"csrf_token": token, "minutes": "0.2", "activate": "never"},
        follow_redirects=False,
    )
    try:
        assert queued.status_code == 303
        job_id = int(queued.headers["location"].rsplit("=", 1)[1])
        job = admin.get(f"/admin/api/jobs/{job_id}").json()
        assert job["kind"] == "train" and job["status"] == "queued"
        assert job["params"] == {"minutes": 0.2, "activate": "never", "with_reviews": False, "with_feedback": False}
        assert job["created_by"] == ADMIN_USER
        assert any(j["id"] == job_id for j in jobs.recent_jobs(csettings, "train"))
    finally:  # no worker here: drop the message so a later test's worker does not train
        with celery_app.connection_for_write() as connection:
            connection.default_channel.queue_purge(INGEST_QUEUE)


def test_training_on_reviews_and_votes_from_the_console(csettings, admin, ingested_samples) -> None:
    """The two checkboxes are recorded on the job and reach the training task's arguments."""
    from workers.celery_app import INGEST_QUEUE, celery_app

    page = admin.get("/admin/evaluators")
    assert 'name="with_reviews"' in page.text and 'name="with_feedback"' in page.text
    data = {
        "csrf_token": csrf_of(page.text),
        "minutes": "0.2",
        "activate": "never",
        "with_reviews": "on",
        "with_feedback": "on",
    }
    queued = admin.post("/admin/evaluators/train", data=data, follow_redirects=False)
    job_id = int(queued.headers["location"].rsplit("=", 1)[1])
    try:
        params = admin.get(f"/admin/api/jobs/{job_id}").json()["params"]
        assert params == {"minutes": 0.2, "activate": "never", "with_reviews": True, "with_feedback": True}
        with celery_app.connection_for_write() as connection:
            message = connection.SimpleQueue(INGEST_QUEUE).get(timeout=5)
            assert message.headers["task"] == "policybot.train_evaluator"
            assert message.decode()[0] == [0.2, "never", job_id, True, True]  # minutes, activate, job, reviews, votes
            message.ack()
    finally:
        with celery_app.connection_for_write() as connection:
            connection.default_channel.queue_purge(INGEST_QUEUE)


def test_recalibrate_from_reviews_previews_then_stores(csettings, admin, tmp_path) -> None:
    from crag.training.metrics import calibrate

    version, _ = seed_reviewed_version(csettings, tmp_path, 12, 12)
    page = admin.get("/admin/evaluators")
    assert 'id="recalibrate-form"' in page.text
    form = {"csrf_token": csrf_of(page.text), "version": version, "from_reviews": "on"}

    preview = admin.post("/admin/evaluators/recalibrate", data=form | {"apply": "no"})
    expected = calibrate(PRESENT, ABSENT)
    assert preview.status_code == 200 and f"upper 0.500 → {expected.upper:.3f}" in preview.text
    assert "Preview only: nothing changed" in preview.text and "12 answer-present and 12 answer-absent" in preview.text
    assert stored_thresholds(csettings, version) == (0.5, 0.1, 0.2)

    stored = admin.post("/admin/evaluators/recalibrate", data=form | {"apply": "yes"})
    assert stored.status_code == 200 and "stored" in stored.text and "Restart the answer workers" in stored.text
    upper, lower, strip = stored_thresholds(csettings, version)
    assert (upper, lower, strip) == (pytest.approx(expected.upper), pytest.approx(expected.lower), 0.2)

    few, _ = seed_reviewed_version(csettings, tmp_path, 9, 12)
    too_few = admin.post("/admin/evaluators/recalibrate", data=form | {"version": few, "apply": "yes"})
    assert too_few.status_code == 400 and "at least 10 of each" in too_few.text
    nothing = admin.post("/admin/evaluators/recalibrate", data={"csrf_token": form["csrf_token"], "version": version})
    assert nothing.status_code == 400 and "tick reviews" in nothing.text


# ------------------------------------------------------------------ security fixes


def test_csv_export_neutralises_spreadsheet_formulas() -> None:
    from application.action_log import records_csv

    record = {
        "id": 1,
        "question": '=HYPERLINK("http://evil.example","x")',
        "answer": "+1+1",
        "asker": "@SUM(A1)",
        "channel": "-2",
        "error": "\tcmd",
        "evaluator_version": "\rx",
        "status": "answered",
        "top_score": -0.5,
        "feedback": {"up": 0, "down": 0},
        "sources_used": [],
        "citations": [],
        "fallback_queries": [],
    }
    [row] = list(csv.DictReader(io.StringIO(records_csv([record]))))
    for key in ("question", "answer", "asker", "channel", "error", "evaluator_version"):
        assert row[key].startswith("'"), (key, row[key])
    assert row["question"] == "'" + record["question"] and row["status"] == "answered" and row["top_score"] == "-0.5"


def test_request_bodies_are_capped_before_the_form_is_read(csettings) -> None:
    import asyncio
    import time

    from console.app import create_standalone_app

    client = _client(csettings)
    form = {"content-type": "application/x-www-form-urlencoded"}
    started = time.monotonic()
    huge = client.post("/admin/login", content=b"username=" + b"a" * 2_000_000, headers=form)
    assert huge.status_code == 413 and time.monotonic() - started < 5
    assert client.post("/admin/login", content=b"a=" + b"b" * 20_000, headers=form).status_code == 413  # > 16 KB

    def chunks():  # no Content-Length: sent chunked
        yield b"username=ada&"
        yield b"password=x"

    assert client.post("/admin/login", content=chunks(), headers=form).status_code == 411

    # A Content-Length that understates the body does not get past the counted limit.
    app = create_standalone_app(csettings)
    sent: list[dict] = []
    body = [b"a=" + b"b" * 10_000] * 5

    async def receive():
        return (
            {"type": "http.request", "body": body.pop(0), "more_body": bool(body)}
            if body
            else {"type": "http.disconnect"}
        )

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/admin/login",
        "raw_path": b"/admin/login",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"testserver"),
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", b"100"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 413


def test_non_ascii_tokens_are_refused_not_crashed(csettings, admin) -> None:
    response = admin.post("/admin/logout", data={"csrf_token": "jeton-é-✓"}, follow_redirects=False)
    assert response.status_code == 403 and "CSRF" in response.text
    forged = _client(csettings).get(
        "/admin/api/stats", headers={"cookie": "policybot_console=eyJ1IjoiYWRhIn0.sïgnature".encode()}
    )
    assert forged.status_code == 401


def test_session_secret_is_never_empty_or_short_and_made_once(csettings, tmp_path) -> None:
    import os
    import threading

    from pydantic import ValidationError

    from console.auth import session_secret
    from core.config import ConfigError, Settings

    with pytest.raises(ConfigError, match="at least 32 bytes"):
        session_secret(csettings.model_copy(update={"console_secret": SecretStr("too-short")}))
    with pytest.raises(ValidationError, match="at least 32 bytes"):
        Settings(**{"POLICYBOT_CONSOLE_SECRET": "too-short"})
    home = csettings.model_copy(update={"console_secret": None, "policybot_home": tmp_path / "home"})
    keys: list[bytes] = []
    errors: list[BaseException] = []

    def make() -> None:
        try:
            keys.append(session_secret(home))
        except BaseException as error:  # noqa: BLE001 - collected for the assert
            errors.append(error)

    threads = [threading.Thread(target=make) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(keys) == 16 and len(set(keys)) == 1 and len(keys[0]) >= 32
    secret_file = tmp_path / "home" / "console-secret"
    assert secret_file.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in secret_file.parent.iterdir()] == ["console-secret"]  # no temporary files left
    secret_file.write_text("")
    with pytest.raises(ConfigError, match="delete the file"):
        session_secret(home)
    os.unlink(secret_file)


def test_logout_and_a_new_password_end_copied_sessions(csettings) -> None:
    from starlette.testclient import TestClient

    from console.app import create_standalone_app
    from console.auth import COOKIE_NAME, hash_password

    client = _client(csettings)
    _sign_in(client)
    copied = client.cookies.get(COOKIE_NAME)
    stolen = _client(csettings)
    stolen.cookies.set(COOKIE_NAME, copied)
    assert stolen.get("/admin/api/stats").status_code == 200
    changed = TestClient(
        create_standalone_app(
            csettings.model_copy(
                update={
                    "console_users": SecretStr(
                        f"{ADMIN_USER}:{hash_password('a brand new password', csettings.console_scrypt_n)}"
                    )
                }
            )
        )
    )
    changed.cookies.set(COOKIE_NAME, copied)
    assert changed.get("/admin/api/stats").status_code == 401  # the password changed since the sign-in

    out = client.post("/admin/logout", data={"csrf_token": _csrf(client)}, follow_redirects=False)
    assert out.status_code == 303
    assert stolen.get("/admin/api/stats").status_code == 401  # the copy made before logout is refused
    again = _client(csettings)
    _sign_in(again)
    assert again.get("/admin/api/stats").status_code == 200  # signing in again works


def test_login_throttle_counts_before_checking_per_address_and_per_name(csettings, monkeypatch) -> None:
    import asyncio
    import threading
    import time

    import redis

    from console import auth
    from core import services

    throttle = auth.LoginThrottle(csettings)
    stamps: list[str | None] = []
    barrier = threading.Barrier(30)

    def guess() -> None:
        barrier.wait()
        stamps.append(throttle.attempt("10.0.0.1", "ada"))

    threads = [threading.Thread(target=guess) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(s is not None for s in stamps) == auth.LOGIN_MAX_FAILURES  # parallel guesses do not all pass
    assert throttle.attempt("10.0.0.2", "ada") is None  # the name is throttled from any address
    assert throttle.attempt("10.0.0.1", "grace") is None  # and the address for any name
    stamp = throttle.attempt("10.0.0.3", "grace")
    assert stamp is not None
    throttle.succeeded("10.0.0.3", "grace", stamp)
    counters = redis.Redis.from_url(services.redis_url(csettings), decode_responses=True)
    assert sorted(counters.scan_iter(auth.THROTTLE_PREFIX + "*")) == sorted(  # a success is not counted
        auth.THROTTLE_PREFIX + key for key in ("address:10.0.0.1", "user:" + auth.user_tag("ada"))
    )
    assert all(
        0 < counters.ttl(key) <= auth.LOGIN_WINDOW_S + 1 for key in counters.scan_iter(auth.THROTTLE_PREFIX + "*")
    )
    monkeypatch.setattr(auth, "LOGIN_WINDOW_S", 0)
    assert throttle.attempt("10.0.0.1", "ada") is not None  # the window passed

    running, peak = [0], [0]

    def slow_check(settings, user, password) -> bool:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        running[0] -= 1
        return False

    monkeypatch.setattr(auth, "check_credentials", slow_check)

    async def many() -> list[bool]:
        return await asyncio.gather(*(throttle.check(None, "ada", "x") for _ in range(8)))  # type: ignore[arg-type]

    assert asyncio.run(many()) == [False] * 8 and peak[0] <= auth.VERIFY_SLOTS


def test_the_sign_in_throttle_holds_across_app_instances(csettings) -> None:
    """Ten wrong passwords spread over two console processes (here two app instances: the
    throttle is in Redis, not in either) lock the name for a third."""
    from starlette.testclient import TestClient

    from console.app import create_standalone_app
    from console.auth import LOGIN_MAX_FAILURES

    first, second = create_standalone_app(csettings), create_standalone_app(csettings)
    for attempt in range(LOGIN_MAX_FAILURES):
        guesser = TestClient(first if attempt % 2 else second, client=(f"203.0.113.{attempt}", 50000))
        assert _sign_in(guesser, password="guess").status_code == 401
    third = TestClient(create_standalone_app(csettings), client=("198.51.100.9", 50000))
    assert _sign_in(third).status_code == 429


def test_sign_in_is_refused_not_unthrottled_when_redis_is_unreachable(csettings) -> None:
    from devtools.ports import free_port

    nowhere = csettings.model_copy(update={"redis_url": SecretStr(f"redis://127.0.0.1:{free_port()}/0")})
    response = _sign_in(_client(nowhere))
    assert response.status_code == 503 and "sign-in is unavailable" in response.text


def test_new_password_hashes_cost_scrypt_n_2_17_and_old_ones_still_sign_in(csettings, caplog) -> None:
    from console.auth import SCRYPT_MAXMEM, hash_password, is_outdated, verify_password
    from core.config import Settings, parse_scrypt_hash

    assert Settings.model_fields["console_scrypt_n"].default == 2**17
    produced = hash_password("a long enough password")
    n, r, p, salt, digest = parse_scrypt_hash(produced)
    assert (n, r, p, len(salt), len(digest)) == (2**17, 8, 1, 16, 32) and 128 * r * (n + p + 2) <= SCRYPT_MAXMEM
    assert verify_password("a long enough password", produced) and not verify_password(
        "a long enough passworD", produced
    )

    # The test run's hashes cost 2^14, the old default: against the default cost they are outdated,
    # still sign in, and the user is told to make a new one.
    default_cost = csettings.model_copy(update={"console_scrypt_n": 2**17})
    old_hash = default_cost.console_accounts[ADMIN_USER]
    assert parse_scrypt_hash(old_hash)[0] == 2**14 and is_outdated(old_hash, default_cost)
    client = _client(default_cost)
    with caplog.at_level("WARNING", logger="console.pages.login"):
        assert _sign_in(client).status_code == 303
    assert "password hash cheaper than new ones" in caplog.text
    assert "policybot console hash-password" in client.get("/admin/activity").text
    assert not is_outdated(produced, default_cost)


def test_failed_sign_ins_are_throttled_and_not_logged_by_name(csettings, caplog) -> None:
    from console.auth import LOGIN_MAX_FAILURES

    client = _client(csettings)
    token = csrf_of(client.get("/admin/login").text)
    with caplog.at_level("WARNING", logger="console.pages.login"):
        for _ in range(LOGIN_MAX_FAILURES):
            wrong = client.post(
                "/admin/login", data={"username": "mallory-the-name", "password": "guess", "csrf_token": token}
            )
            assert wrong.status_code == 401
    assert "mallory-the-name" not in caplog.text and "sign-in failed" in caplog.text
    blocked = client.post(
        "/admin/login", data={"username": ADMIN_USER, "password": ADMIN_PASSWORD, "csrf_token": token}
    )
    assert blocked.status_code == 429


def test_guessing_at_a_name_does_not_lock_out_a_browser_that_signed_in_before(csettings) -> None:
    """Ten wrong passwords for the admin's name from other addresses lock the name for
    strangers, but not for the admin's own browser (its device cookie from an earlier sign-in).
    A forged cookie, one from before a password change, or one after logging out is no help."""
    from starlette.testclient import TestClient

    from console.app import create_standalone_app
    from console.auth import DEVICE_COOKIE_NAME, LOGIN_MAX_FAILURES, hash_password

    app = create_standalone_app(csettings)
    own_browser = TestClient(app, client=("10.0.0.5", 50000))
    assert _sign_in(own_browser).status_code == 303
    device = own_browser.cookies.get(DEVICE_COOKIE_NAME)
    assert device and ADMIN_USER not in base64.urlsafe_b64decode(device.split(".")[0] + "==").decode()
    for address in range(LOGIN_MAX_FAILURES):
        guesser = TestClient(app, client=(f"203.0.113.{address}", 50000))
        assert _sign_in(guesser, password="guess").status_code == 401
    stranger = TestClient(app, client=("198.51.100.7", 50000))
    assert _sign_in(stranger).status_code == 429  # the name stays locked for anyone else
    forged = TestClient(app, client=("198.51.100.8", 50000))
    forged.cookies.set(DEVICE_COOKIE_NAME, device[:-4] + "AAAA")
    assert _sign_in(forged).status_code == 429
    assert _sign_in(own_browser).status_code == 303  # the admin's browser still gets in

    own_browser.post("/admin/logout", data={"csrf_token": _csrf(own_browser)})
    assert own_browser.cookies.get(DEVICE_COOKIE_NAME) is None  # logging out forgets the device
    changed = create_standalone_app(
        csettings.model_copy(
            update={
                "console_users": SecretStr(
                    f"{ADMIN_USER}:{hash_password(ADMIN_PASSWORD + ' changed', csettings.console_scrypt_n)}"
                )
            }
        )
    )
    # The name is still locked by the guesses above: the throttle is shared by every app instance.
    assert _sign_in(TestClient(changed, client=("198.51.100.7", 50000)), password="guess").status_code == 429
    after_change = TestClient(changed, client=("10.0.0.5", 50000), cookies={DEVICE_COOKIE_NAME: device})
    assert _sign_in(after_change, password=ADMIN_PASSWORD + " changed").status_code == 429  # revoked


def test_an_upload_batch_is_checked_whole_before_any_file_is_written(csettings, admin) -> None:
    folder = csettings.home / "uploads" / "console-batch"
    token = _csrf(admin, "/admin/documents")
    good = ("good.md", b"# Good\n\nA fine policy.", "text/markdown")
    for second, status, message in (
        (("bad.exe", b"MZ", "application/octet-stream"), 415, "unsupported file type"),
        (("empty.md", b"", "text/markdown"), 400, "empty"),
        (good, 400, "chosen twice"),
    ):
        response = admin.post(
            "/admin/documents/upload",
            data={"csrf_token": token, "collection": "console-batch"},
            files=[("files", good), ("files", second)],
        )
        assert response.status_code == status and message in response.text
        assert not folder.exists() or not any(folder.iterdir()), "a file was written before the batch was refused"


def test_small_guards_job_page_id_order_minutes_cookie_path(csettings, admin, seeded_log) -> None:
    from core.models import Job

    assert "Path=/admin" in _sign_in(_client(csettings)).headers["set-cookie"]
    for path in ("/admin/documents", "/admin/evaluators"):
        assert admin.get(path, params={"job": "12"}).status_code == 200
        assert admin.get(path, params={"job": '1"><script>'}).status_code == 400
    last = admin.get("/admin/activity", params={"channel": CHANNEL, "page": "999999999"})
    assert last.status_code == 200 and len(_ids(last.text)) == len(seeded_log) - 50  # clamped to the last page
    assert admin.get("/admin/activity", params={"page": "9" * 40}).status_code == 400
    signed_out = _client(csettings)
    assert signed_out.post("/admin/documents/99999999999/remove", follow_redirects=False).status_code == 401
    assert signed_out.get("/admin/api/jobs/99999999999").status_code == 401
    token = _csrf(admin, "/admin/evaluators")
    too_long = admin.post("/admin/evaluators/train", data={"csrf_token": token, "minutes": "30"})
    assert too_long.status_code == 400 and "at most 24" in too_long.text
    assert Job.__table__.c.created_at.index  # as migration 0003 made it


def test_incorrect_alert_needs_a_prior_baseline(csettings) -> None:
    from datetime import datetime, timedelta

    from sqlalchemy import delete

    from application.review import ALERT_MIN_PRIOR, incorrect_alert
    from core import db
    from core.models import Question

    from support.question_log import question_row

    now = datetime(2001, 1, 1, tzinfo=UTC)  # a quiet stretch of the log
    rows = [
        question_row(
            question="Is this a quiet week?",
            channel="CALERT01",
            action="incorrect",
            created_at=now - timedelta(days=1, hours=n),
        )
        for n in range(6)
    ]
    rows += [
        question_row(
            question="Is this a quiet week?",
            channel="CALERT01",
            action="correct",
            created_at=now - timedelta(days=10, hours=n),
        )
        for n in range(2)
    ]
    with db.session(csettings) as session:
        session.add_all(rows)
    try:
        thin = incorrect_alert(csettings, 0.1, now=now)
        assert thin["recent_share"] == 1.0 and thin["prior_answered"] == 2 and not thin["alert"]
        with db.session(csettings) as session:
            session.add_all(
                [
                    question_row(
                        question="Is this a quiet week?",
                        channel="CALERT01",
                        action="correct",
                        created_at=now - timedelta(days=12, hours=n),
                    )
                    for n in range(ALERT_MIN_PRIOR)
                ]
            )
        assert incorrect_alert(csettings, 0.1, now=now)["alert"]
    finally:
        with db.session(csettings) as session:
            session.execute(delete(Question).where(Question.channel == "CALERT01"))


def test_sources_page_masks_url_query_values(csettings, admin) -> None:
    from core.urls import mask_query

    assert (
        mask_query("https://x.example/s?api_key=SECRET&q=dog", keep=("dog",)) == "https://x.example/s?api_key=***&q=dog"
    )
    assert mask_query("https://x.example/s") == "https://x.example/s"

    token = _csrf(admin, "/admin/sources")
    added = admin.post(
        "/admin/sources/add",
        data={
            "csrf_token": token,
            "name": "Keyed wiki",
            "kind": "http",
            "url": "https://keyed.example.com/search?token=SECRET123",
        },
    )
    try:
        assert added.status_code == 200
        page = admin.get("/admin/sources").text
        assert "keyed.example.com/search?token=***" in page and "SECRET123" not in page
        tested = admin.post(
            "/admin/sources/test", data={"csrf_token": token, "question": "how do I claim dental insurance?"}
        )
        assert tested.status_code == 200 and "SECRET123" not in tested.text
    finally:
        admin.post("/admin/sources/remove", data={"csrf_token": token, "name": "Keyed wiki"})


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://policybot:pw@db:5432/p", "postgresql+psycopg://policybot:***@db:5432/p"),
        ("postgresql://u@db/p?password=s3cret", "postgresql://u@db/p?password=***"),
        ("redis://s3cret@redis:6379/0", "redis://***@redis:6379/0"),  # Redis's password-only form
        ("redis://127.0.0.1:6390/0", "redis://127.0.0.1:6390/0"),
    ],
)
def test_service_urls_are_shown_without_secrets(url: str, shown: str) -> None:
    from core.urls import mask_url

    assert mask_url(url) == shown


def test_console_users_hashes_are_parsed_whole() -> None:
    from pydantic import ValidationError

    from console.auth import hash_password
    from core.config import Settings

    good = hash_password("long enough password", 2**14)
    assert Settings(**{"POLICYBOT_CONSOLE_USERS": f"ada:{good}"}).console_accounts == {"ada": good}
    salt_and_hash = good.split("$", 4)[4]
    for bad, why in (
        ("ada:scrypt", "6 $-separated parts"),  # what Compose leaves of an unquoted hash
        (f"ada:scrypt$abc$8$1${salt_and_hash}", "whole numbers"),
        (f"ada:scrypt$1000$8$1${salt_and_hash}", "power of 2"),
        ("ada:scrypt$16384$8$1$!!$!!", "base64"),
    ):
        with pytest.raises(ValidationError, match=re.escape(why)) as raised:
            Settings(**{"POLICYBOT_CONSOLE_USERS": bad})
        assert "single-quote" in str(raised.value)
