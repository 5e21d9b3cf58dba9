"""Services: the embedded PostgreSQL and Redis, Celery configuration, the Compose file's Redis."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from core import embedded_redis, services

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
    port = embedded_redis.free_port()
    (folder / "port").write_text(f"{port}\n")
    subprocess.run(
        [
            embedded_redis.find_redis_server(),
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
        wait_until(lambda: embedded_redis.redis_alive(unprotected), timeout=10, what="the old Redis", step=0.05)
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
        assert embedded_redis.stop_redis(own)
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
        embedded_redis.stop_redis(own)
        try:  # the old one, had the test failed before giving it a password
            redis.Redis.from_url(unprotected).shutdown(nosave=True)
        except redis.RedisError:
            pass


def _redis_servers_in(folder: Path) -> list[int]:
    """The redis-server processes working in `folder` (a Redis works in its --dir): what runs of a home's Redis."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and proc.joinpath("cwd").resolve(strict=True) == folder.resolve()
                and b"redis-server" in proc.joinpath("cmdline").read_bytes()
            ):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, a zombie, or another user's
            continue
    return found


needs_proc = pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="reads processes from /proc (Linux)")


@needs_proc
@pytest.mark.services
def test_services_down_stops_the_homes_redis_whatever_port_it_was_started_on(tmp_path) -> None:
    """A benchmark starts its home's Redis on a port of its own (POLICYBOT_REDIS_PORT, from the home's
    bench-redis-port); `services down` on that home, without that variable, still finds it: by its pid file."""
    import subprocess
    import sys

    from core.config import Settings
    from core.errors import ServiceError

    from support.environment import cli_env

    home = tmp_path / "home"
    bench_style = Settings(POLICYBOT_HOME=home, POLICYBOT_REDIS_PORT=embedded_redis.free_port())
    embedded_redis.start_redis(bench_style)
    try:
        assert len(_redis_servers_in(home / "redis")) == 1
        env = {key: value for key, value in cli_env(home).items() if key != "POLICYBOT_REDIS_PORT"}

        def policybot(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "cli", *args], env=env, capture_output=True, text=True, timeout=120
            )

        status = policybot("services", "status")
        # The table is 140 columns wide off a terminal (cli/common.py): a long "where" wraps onto the
        # next row, whose other cells are empty, so its words read on across the borders.
        words = " ".join(status.stdout.replace("│", " ").split())
        assert "pid" in words and "on another port" in words, status.stdout
        # Started without that port, it is not started a second time on the same data.
        with pytest.raises(ServiceError, match="already runs .* on port"):
            embedded_redis.start_redis(Settings(POLICYBOT_HOME=home))
        assert len(_redis_servers_in(home / "redis")) == 1
        down = policybot("services", "down")
        assert down.returncode == 0, down.stderr
        assert "stopped: redis" in down.stdout, down.stdout
        assert _redis_servers_in(home / "redis") == []
        assert "nothing was running" in policybot("services", "down").stdout
    finally:
        embedded_redis.stop_redis(bench_style)


@needs_proc
@pytest.mark.services
@pytest.mark.parametrize("ending", ["returns", "is terminated"])
def test_a_benchmark_stops_the_services_it_started(tmp_path, ending) -> None:
    """bench/common.py's start of the bench stack (every benchmark's) stops, when the run ends or
    is terminated (SIGTERM: kill, pkill, a timeout), the PostgreSQL and Redis it started: nothing
    of the bench home is left running."""
    import signal
    import subprocess
    import sys

    from core.config import Settings

    home = tmp_path / "bench-home"
    run = (
        "from pathlib import Path; import sys, time\n"
        "from bench.common import bench_services_up, use_bench_home\n"
        "use_bench_home(Path(sys.argv[1]))\n"
        "from core.config import get_settings\n"
        "bench_services_up(get_settings())\n"
        "from core import services\n"
        "print('running:', sorted(s.name for s in services.services_status(get_settings()) if s.running), flush=True)\n"
        "if sys.argv[2] == 'is terminated':\n"
        "    time.sleep(120)\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("POLICYBOT_")}
    env["PYTHONPATH"] = str(REPO)
    process = subprocess.Popen(
        [sys.executable, "-c", run, str(home), ending],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    try:
        first = process.stdout.readline()
        assert "running: ['postgres', 'redis']" in first, first + process.stderr.read()
        if ending == "is terminated":
            process.send_signal(signal.SIGTERM)
        rest, errors = process.communicate(timeout=120)
        assert process.returncode == (128 + signal.SIGTERM if ending == "is terminated" else 0), errors
        assert "stopped the benchmark's postgres" in rest and "stopped the benchmark's redis" in rest, rest + errors
        assert _redis_servers_in(home / "redis") == []
        bench = Settings(POLICYBOT_HOME=home, POLICYBOT_REDIS_PORT=int((home / "bench-redis-port").read_text()))
        assert not any(status.running for status in services.services_status(bench))
    finally:  # a failed run's leftovers are stopped, after the assertions above have read them
        process.kill()
        port_file = home / "bench-redis-port"
        if port_file.exists():
            leftover = Settings(POLICYBOT_HOME=home, POLICYBOT_REDIS_PORT=int(port_file.read_text()))
            services.stop_postgres(leftover)
            embedded_redis.stop_redis(leftover)


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
