"""Secrets: never shown by settings, and found by the leak check in log lines and files."""

from __future__ import annotations


def test_settings_never_show_a_secret_in_repr_str_or_dumps(tmp_path) -> None:
    from core.config import Settings

    values = {
        "DATABASE_URL": "postgresql://policybot:db-pass-4s3cr3t@db:5432/policybot",
        "REDIS_URL": "redis://:redis-pass-4s3cr3t@redis:6379/0",
        "POLICYBOT_CORPUS_DATABASE_URL": "postgresql://policybot:corpus-pass-4s3cr3t@db:5432/corpus",
        "POLICYBOT_GENERATOR_API_KEY": "sk-generator-4s3cr3t",
        "SLACK_BOT_TOKEN": "xoxb-bot-4s3cr3t",
        "SLACK_SIGNING_SECRET": "signing-4s3cr3t",
        "SLACK_APP_TOKEN": "xapp-app-4s3cr3t",
        "POLICYBOT_CONSOLE_SECRET": "console-4s3cr3t-" + "x" * 32,
        "POLICYBOT_CONSOLE_USERS": "ada:" + _PASSWORD_HASH,
    }
    settings = Settings(POLICYBOT_HOME=tmp_path, **values)
    for shown in (repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())):
        assert "4s3cr3t" not in shown and _PASSWORD_HASH not in shown, shown
    # The values are still there for the calls that need them.
    assert settings.redis_url is not None and settings.redis_url.get_secret_value() == values["REDIS_URL"]
    assert settings.console_accounts == {"ada": _PASSWORD_HASH}
    # An empty value is unset, as before.
    assert Settings(POLICYBOT_HOME=tmp_path, SLACK_BOT_TOKEN="", DATABASE_URL="").slack_bot_token is None


# A valid scrypt hash (N=2, the smallest the parser takes): only its shape matters here.
_PASSWORD_HASH = "scrypt$2$8$1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2g"


def test_the_leak_check_names_a_logged_secret_and_one_in_a_log_file(tmp_path) -> None:
    import logging

    from support.leak_check import SecretLeakCheck

    check = SecretLeakCheck(lambda: {"SLACK_BOT_TOKEN": "xoxb-leaked-value"})
    logger = logging.getLogger("policybot.leak_check_test")
    logger.addHandler(check)
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("calling Slack with %s", "a masked token ***")
        assert check.leaks == []
        logger.debug("calling Slack with %s", "xoxb-leaked-value")
        try:
            raise RuntimeError("token xoxb-leaked-value refused")
        except RuntimeError:
            logger.exception("Slack failed")  # only the traceback holds it
    finally:
        logger.removeHandler(check)
    (tmp_path / "worker.log").write_text("INFO connected with xoxb-leaked-value\n")
    (tmp_path / "notes.txt").write_text("xoxb-leaked-value")  # not a log file
    check.check_files(tmp_path)
    assert check.leaks == ["SLACK_BOT_TOKEN in a log record of 'policybot.leak_check_test'"] * 2 + [
        f"SLACK_BOT_TOKEN in {tmp_path / 'worker.log'}"
    ]
    assert all("xoxb-leaked-value" not in leak for leak in check.leaks)
