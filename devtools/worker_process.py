"""A Celery worker as a separate OS process (the demo and the end-to-end tests run real ones)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The test hooks' variables (devtools/test_worker_app.py reads them); a worker whose environment
# sets one is started with that app, since the production app never reads them.
TEST_DELAY_ENV = "POLICYBOT_TEST_TASK_DELAY_S"
TEST_FAIL_ENV = "POLICYBOT_TEST_FAIL_MARKER"
TEST_SLOW_ENV = "POLICYBOT_TEST_SLOW_MARKER"
TEST_HOOK_ENVS = (TEST_DELAY_ENV, TEST_FAIL_ENV, TEST_SLOW_ENV)


def spawn_logged(command: Sequence[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start `command` from the repository in its own session (its own process group),
    appending its output to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(command), stdout=log, stderr=subprocess.STDOUT, env=dict(env), cwd=str(REPO), start_new_session=True
        )


def terminate(process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within `timeout`."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


class WorkerProcess:
    """`python -m celery -A workers.celery_app worker ...` in its own process group, logging to a file
    (`-A devtools.test_worker_app` when its environment sets one of TEST_HOOK_ENVS)."""

    def __init__(
        self,
        env: Mapping[str, str],
        log_path: Path,
        *,
        queues: Sequence[str] = ("answer", "ingest"),
        concurrency: int = 1,
        pool: str = "prefork",
        name: str | None = None,
    ) -> None:
        self.env = dict(env)
        self.log_path = Path(log_path)
        self.queues = list(queues)
        self.concurrency = concurrency
        self.pool = pool
        self.name = name or f"policybot-{uuid.uuid4().hex[:8]}@%h"
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def app(self) -> str:
        return (
            "devtools.test_worker_app" if any(self.env.get(name) for name in TEST_HOOK_ENVS) else "workers.celery_app"
        )

    @property
    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "celery",
            "-A",
            self.app,
            "worker",
            "-Q",
            ",".join(self.queues),
            "--pool",
            self.pool,
            "-c",
            str(self.concurrency),
            "--loglevel",
            "info",
            "-n",
            self.name,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]

    def start(self) -> WorkerProcess:
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.process = spawn_logged(self.command, self.env, self.log_path)
        return self

    def log_text(self) -> str:
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as handle:
            handle.seek(self._log_offset)
            return handle.read().decode("utf-8", errors="replace")

    def wait_for_log(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        compiled = re.compile(pattern)
        while True:
            match = compiled.search(self.log_text())
            if match:
                return match
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}; log:\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker log never matched {pattern!r}; log:\n{self.log_text()[-4000:]}")
            time.sleep(0.1)

    def wait_ready(self, timeout: float = 180.0) -> WorkerProcess:
        """Until the consumer is up and every child process has loaded its models."""
        deadline = time.monotonic() + timeout
        self.wait_for_log(r"\bready\.", timeout)
        while len(re.findall(r"worker process \d+ ready:", self.log_text())) < self.concurrency:
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker children did not load their models; log:\n{self.log_text()[-4000:]}")
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"worker exited with {self.process.returncode}; log:\n{self.log_text()[-4000:]}")
            time.sleep(0.1)
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _signal_group(self, sig: int) -> None:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, sig)  # the group this worker leads (start_new_session)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the worker and its pool children at once, as when a machine dies."""
        if self.process is None:
            return
        self._signal_group(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> None:
        """Warm shutdown (the main process lets the running task finish), then SIGKILL what is left."""
        if self.process is None:
            return
        if self.process.poll() is None:
            # SIGTERM to the main process only: sent to the whole group, it would kill the pool child mid-task.
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self._signal_group(signal.SIGKILL)  # anything left in the group (a child whose parent died)
        if self.process.poll() is None:
            self.process.wait(timeout=30)
