"""`policybot serve --http` as a separate OS process (the end-to-end tests and the load benchmarks
run real ones), as devtools/worker_process.py runs Celery workers."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from devtools.ports import free_port
from devtools.worker_process import spawn_logged, terminate


class BotProcess:
    """`policybot serve --http` on a free port, in its own process."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env, self.log_path, self.port = env, log_path, free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> BotProcess:
        import httpx

        self.process = spawn_logged(
            [sys.executable, "-m", "cli", "serve", "--http", "--port", str(self.port)], self.env, self.log_path
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"bot did not start; log:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process)
