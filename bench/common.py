"""What every performance benchmark shares: machine description, percentiles, tables, the bench stack.

Benchmarks run on their own POLICYBOT_HOME (default ./.policybot-bench-perf) and their own
Redis port, never on a developer's ./.policybot, and stop the services they started when they
end (`bench_services_up`). Each prints a Markdown table and a summary line; `bench.run_all`
collects them into docs/performance.md.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import platform
import signal
import statistics
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devtools.ports import free_port

if TYPE_CHECKING:
    from core.config import Settings

REPO = Path(__file__).resolve().parent.parent
DEFAULT_HOME = REPO / ".policybot-bench-perf"
RESULTS_DIR = REPO / "bench" / "results"


def use_bench_home(home: Path | None = None) -> Path:
    """Point this process (and the processes it starts) at the benchmark's own stack."""
    home = Path(home or os.environ.get("POLICYBOT_BENCH_HOME") or DEFAULT_HOME).resolve()
    os.environ["POLICYBOT_HOME"] = str(home)
    # One Redis port per bench home, chosen once: a rerun finds its own Redis, never another one's.
    port_file = home / "bench-redis-port"
    if not port_file.exists():
        home.mkdir(parents=True, exist_ok=True)
        port_file.write_text(str(free_port()))
    os.environ["POLICYBOT_REDIS_PORT"] = port_file.read_text().strip()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ["POLICYBOT_AUTO_TRAIN"] = "false"
    for variable in ("DATABASE_URL", "REDIS_URL", "POLICYBOT_EVALUATOR_PATH", "POLICYBOT_GENERATOR_URL"):
        os.environ.pop(variable, None)
    from core.config import reset_settings

    reset_settings()
    return home


def bench_settings(home: Path) -> Settings:
    """Settings on the benchmark home `home`, its PostgreSQL and Redis up for this run (stopped at
    exit when this run started them)."""
    use_bench_home(home)
    from core.config import get_settings

    settings = get_settings()
    bench_services_up(settings)
    return settings


def bench_services_up(settings: Settings) -> None:
    """The bench home's embedded PostgreSQL and Redis up for this run; the ones this run started are
    stopped when it ends (at exit, also after an error), so a benchmark leaves nothing running.
    One that was running before it stays running."""
    from core import services

    running = {status.name for status in services.services_status(settings) if status.running}
    services.services_up(settings)
    started = [name for name in ("postgres", "redis") if name not in running]
    if started:
        atexit.register(_stop_services, settings, started)
        _exit_on_sigterm()


def _exit_on_sigterm() -> None:
    """A SIGTERM (kill, pkill, a timeout) ends the run as Ctrl-C does, through SystemExit, so the
    atexit stop above still runs: by default SIGTERM ends the process before atexit."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def _stop_services(settings: Settings, names: list[str]) -> None:
    from core import db, embedded_redis, services

    db.dispose_engines()  # this process's connections first
    stop = {"postgres": services.stop_postgres, "redis": embedded_redis.stop_redis}
    for name in names:
        try:
            if stop[name](settings):
                print(f"stopped the benchmark's {name} (it was not running before)", flush=True)
        except Exception as error:  # stop the other one all the same
            print(f"could not stop the benchmark's {name}: {error}", file=sys.stderr, flush=True)


def prepared_settings(train_minutes: float = 3.0):  # -> Settings
    """The bench stack up (stopped at exit if this run started it), the sample corpus ingested, an
    evaluator trained once (reused later)."""
    from core.config import get_settings

    settings = get_settings()
    bench_services_up(settings)
    prepare(settings, train_minutes, retrain=False)
    return settings


def prepare(settings: Settings, minutes: float, retrain: bool, seed: int = 0) -> None:
    """The samples ingested, and an evaluator active (trained now when none is, or with `retrain`)."""
    from application import evaluators

    ingest_samples(settings)
    if retrain or evaluators.active_version(settings) is None:
        print(f"training the evaluator ({minutes:g} min budget, seed {seed})...", flush=True)
        result = evaluators.train_and_register(settings, budget_s=minutes * 60, activate="always", seed=seed)
        print(f"trained {result.version}: AUC {result.evaluator.auc:.3f} vs cosine {result.cosine.auc:.3f}", flush=True)


def ingest_samples(settings: Settings) -> None:
    """samples/policies as the knowledge base, samples/hr-portal as the allow-listed HR-portal collection."""
    from sqlalchemy import select

    from core import db
    from core.models import FallbackSourceRow
    from ingestion.ingest import ingest_paths

    for folder, collection in (
        (REPO / "samples" / "policies", "policies"),
        (REPO / "samples" / "hr-portal", "hr-portal"),
    ):
        report = ingest_paths(settings, [folder], collection=collection, prune=True)
        if report.failed:
            raise SystemExit(f"ingestion failed: {report.failed}")
    with db.session(settings) as session:
        if not session.execute(
            select(FallbackSourceRow).where(FallbackSourceRow.name == "HR portal")
        ).scalar_one_or_none():
            session.add(FallbackSourceRow(name="HR portal", kind="collection", collection="hr-portal"))


def load_average() -> str:
    try:
        one, five, _ = os.getloadavg()
        return f"{one:.1f}/{five:.1f}"
    except OSError:  # pragma: no cover
        return "n/a"


def machine() -> str:
    """One line naming the machine and how busy it was (the figures depend on both)."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:  # pragma: no cover
        pass
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):  # pragma: no cover
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores{memory}, Python {platform.python_version()}, torch {torch.__version__}, "
        f"load average {load_average()} (1/5 min)"
    )


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"n": 0, "p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "max": float("nan")}
    return {
        "n": len(values),
        "p50": statistics.median(values),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values),
    }


def fmt_ms(seconds_or_ms: float | None, *, ms: bool = False) -> str:
    if seconds_or_ms is None:  # not measured
        return "n/a"
    value = seconds_or_ms if ms else seconds_or_ms * 1000
    if math.isnan(value):
        return "n/a"
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


@dataclass
class Report:
    """One benchmark's printed output: title, tables and notes, plus machine-readable figures."""

    name: str
    title: str
    sections: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def add(self, text: str) -> None:
        self.sections.append(text)
        print(text + "\n", flush=True)

    def markdown(self) -> str:
        return f"## {self.title}\n\n" + "\n\n".join(self.sections) + "\n"

    def finish(self) -> Report:
        """Print the closing line and store the report for `bench.run_all` (bench/results/NAME.json)."""
        self.figures["duration_s"] = round(time.perf_counter() - self.started, 1)
        self.figures["machine"] = machine()
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        (RESULTS_DIR / f"{self.name}.json").write_text(
            json.dumps(
                {"name": self.name, "title": self.title, "markdown": self.markdown(), "figures": self.figures},
                indent=2,
                default=str,
            )
        )
        print(f"[{self.name}] done in {self.figures['duration_s']:.0f} s on {self.figures['machine']}", flush=True)
        return self

    def begin(self) -> Report:
        print(f"# {self.title}\n\nMachine: {machine()}\n", flush=True)
        return self


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (peak resident set) of a live process, in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def child_pids(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(c) for c in children]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a live process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")
