"""Services: the embedded PostgreSQL and Redis, Celery configuration, the Compose file's Redis."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from core import services

from support.environment import REPO


@pytest.mark.services
def test_embedded_stack_survives_down_and_up(tmp_path, monkeypatch):
    from core.config import Settings

    own = Settings(POLICYBOT_HOME=tmp_path / "home", POLICYBOT_REDIS_PORT=6392)
    try:
        services.services_up(own)
        url = services.database_url(own).replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("CREATE TABLE keepsake (note text)")
            connection.execute("INSERT INTO keepsake VALUES ('still here')")
        import redis

        redis.Redis.from_url(services.redis_url(own)).set("keepsake", "queued")
        assert set(services.services_down(own)) == {"postgres", "redis"}
        assert not any(status.running for status in services.services_status(own))
        services.services_up(own)
        assert all(status.running for status in services.services_status(own))
        with psycopg.connect(
            services.database_url(own).replace("postgresql+psycopg://", "postgresql://")
        ) as connection:
            assert connection.execute("SELECT note FROM keepsake").fetchone() == ("still here",)
        assert redis.Redis.from_url(services.redis_url(own)).get("keepsake") == b"queued"
    finally:
        services.services_down(own)


def test_celery_configuration_loads_once_for_threads_that_enqueue_at_once() -> None:
    """Plain Celery lets a second thread read its half-built configuration (no broker_url,
    so a task goes to the default broker and is lost); ours makes it wait for the load."""
    import threading
    import time

    from celery import Celery

    from workers.celery_app import ThreadSafeCelery

    def brokers_seen(app_class: type[Celery]) -> list[str | None]:
        app = app_class("race")
        app.add_defaults(lambda: time.sleep(0.5) or {"broker_url": "memory://"})  # like starting Redis
        seen: list[str | None] = []
        threads = [threading.Thread(target=lambda: seen.append(app.conf.broker_url)) for _ in range(4)]
        for thread in threads:
            thread.start()
            time.sleep(0.05)
        for thread in threads:
            thread.join()
        return seen

    assert None in brokers_seen(Celery)  # the race this guards against, still in Celery
    assert brokers_seen(ThreadSafeCelery) == ["memory://"] * 4


@pytest.mark.services
def test_the_embedded_redis_takes_only_its_homes_password_on_loopback(tmp_path, monkeypatch) -> None:
    import stat
    import subprocess

    import redis

    from core.config import Settings

    from support.slack import wait_until

    monkeypatch.delenv("POLICYBOT_REDIS_PORT", raising=False)
    own = Settings(POLICYBOT_HOME=tmp_path / "home")
    folder = own.home / "redis"
    # A Redis of this home started by an older policybot, without a password, on the home's port.
    folder.mkdir(parents=True)
    port = services._free_port()
    (folder / "port").write_text(f"{port}\n")
    subprocess.run(
        [
            services.find_redis_server(),
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--dir",
            str(folder),
            "--daemonize",
            "yes",
            "--pidfile",
            str(folder / "redis.pid"),
            "--logfile",
            str(folder / "redis.log"),
        ],
        check=True,
    )
    unprotected = f"redis://127.0.0.1:{port}/0"
    try:
        wait_until(lambda: services._redis_alive(unprotected), timeout=10, what="the old Redis", step=0.05)
        old_pid = (folder / "redis.pid").read_text().strip()

        url = services.redis_url(own)
        password_file = folder / "password"
        password = password_file.read_text().strip()
        assert len(password) >= 32 and stat.S_IMODE(password_file.stat().st_mode) == 0o600
        assert url == f"redis://:{password}@127.0.0.1:{port}/0" == services.configured_redis_url(own)
        assert (folder / "redis.pid").read_text().strip() == old_pid  # given the password, not doubled
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(unprotected).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(f"redis://:wrong-{password}@127.0.0.1:{port}/0").ping()

        # Started afresh, it is bound to loopback and persists append-only in the home, its password
        # out of the process list; `services status` shows the URL without it.
        assert services.stop_redis(own)
        url = services.redis_url(own)
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        assert client.config_get("appendonly")["appendonly"] == "yes"
        assert Path(client.config_get("dir")["dir"]).resolve() == folder.resolve()
        pid = (folder / "redis.pid").read_text().strip()
        assert password not in Path(f"/proc/{pid}/cmdline").read_text()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(unprotected).ping()
        shown = [status.url for status in services.services_status(own) if status.name == "redis"]
        assert shown == [f"redis://:***@127.0.0.1:{port}/0"]
    finally:
        services.stop_redis(own)
        try:  # the old one, had the test failed before giving it a password
            redis.Redis.from_url(unprotected).shutdown(nosave=True)
        except redis.RedisError:
            pass


def test_docker_composes_redis_wants_the_password_its_clients_use_and_persists_append_only() -> None:
    import yaml

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    redis_service = compose["services"]["redis"]
    command = redis_service["command"]
    password = command[command.index("--requirepass") + 1]
    assert password.startswith("${REDIS_PASSWORD:?")  # Compose refuses to start without one
    assert command[command.index("--appendonly") + 1] == "yes"
    assert redis_service["environment"]["REDISCLI_AUTH"] == password  # the health check signs in
    for client in ("migrate", "bot", "worker"):
        assert compose["services"][client]["environment"]["REDIS_URL"] == f"redis://:{password}@redis:6379/0"
    # A Redis restart can end a Celery worker (docs/operations.md): the bot and workers come back by themselves.
    assert {compose["services"][name].get("restart") for name in ("bot", "worker")} == {"unless-stopped"}
