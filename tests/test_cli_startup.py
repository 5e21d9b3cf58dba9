"""The CLI answers `--help` and bad input at once: it loads the heavy stack only in commands that use it.

Guarded by the modules a run imports, not by timing (timings vary with the machine).
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer.main
from rich.console import Console
from typer.testing import CliRunner

from support.environment import REPO

HEAVY = (
    "torch",
    "transformers",
    "llama_index",
    "sqlalchemy",
    "alembic",
    "sentence_transformers",
    "celery",
    "slack_bolt",
)

# Runs the console-script entry (cli.main:run) with argv, then reports what got imported.
ENTRY = """
import json, sys
arguments, watched = json.loads(sys.argv[1]), set(json.loads(sys.argv[2]))
sys.argv = ["policybot", *arguments]
try:
    from cli.main import run
    run()
    code = 0
except SystemExit as exit:
    code = exit.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & watched)
print(json.dumps({"code": code, "heavy": heavy}), file=sys.__stdout__)
"""


def run_entry(tmp_path: Path, *args: str) -> tuple[dict, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "POLICYBOT_HOME": str(tmp_path),
        "HOME": str(tmp_path),
        # a command that got as far as the database would fail here instead of starting one
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "REDIS_URL": "redis://127.0.0.1:1",
    }
    result = subprocess.run(
        [sys.executable, "-c", ENTRY, json.dumps(list(args)), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (("ask", ""), "the question is empty"),
        (("ask", "How many PTO days carry over?", "--channel", "general"), "--channel takes a Slack channel ID"),
        (("ingest", "/no/such/folder"), "no such file or folder: /no/such/folder"),
        (("ingest", str(REPO / "samples" / "policies"), "--collection", "Bad Name"), "invalid collection name"),
        (("ingest", str(REPO / "samples" / "policies"), "--channels", "general"), "not a Slack channel ID: general"),
        (("docs", "access", "travel-expenses.md", "--channels", "#general"), "not a Slack channel ID"),
        (("evaluator", "train", "--activate", "sometimes"), "--activate must be"),
        (("evaluator", "train", "--minutes", "0"), "--minutes must be positive"),
        (("evaluator", "calibrate"), "say where the labels come from"),
        (("logs", "--since", "last tuesday"), "--since"),
        (("serve",), "--http or --socket"),
    ],
)
def test_input_errors_answer_before_the_heavy_stack(tmp_path, args, message) -> None:
    report, stderr = run_entry(tmp_path, *args)
    assert report["code"] in (1, 2) and message in stderr, stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert report["heavy"] == [], f"{args} imported {report['heavy']} before refusing its input"


def test_help_loads_nothing_heavy(tmp_path) -> None:
    for args in (("--help",), ("ask", "--help"), ("ingest", "--help"), ("evaluator", "train", "--help")):
        report, stderr = run_entry(tmp_path, *args)
        assert report == {"code": 0, "heavy": []}, (args, report, stderr)


def _commands(command: click.Command, path: tuple[str, ...] = ()):  # -> Iterator[tuple[tuple[str, ...], click.Command]]
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))


def test_every_option_has_help_that_renders_whole() -> None:
    from cli.main import app

    root = typer.main.get_command(app)
    runner = CliRunner()
    undocumented, dangling, valued_flags = [], [], []
    for path, command in _commands(root):
        for param in command.params:
            if isinstance(param, click.Option) and not (param.help or "").strip():
                undocumented.append(f"{' '.join(path)} {param.opts[0]}")
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"}, terminal_width=200)
        assert shown.exit_code == 0, (path, shown.output)
        dangling += [f"{' '.join(path)}: {line.strip()}" for line in shown.output.splitlines() if " ." in line]
        # a flag takes no value: `--help <bool>` reads as if it took one (typer 0.29's rich help)
        valued_flags += [f"{' '.join(path)}: {line.strip()}" for line in shown.output.splitlines() if "<bool>" in line]
    assert undocumented == []
    assert dangling == []  # e.g. "Time budget ." where Rich took "[default: ...]" for markup
    assert valued_flags == []
    hash_help = runner.invoke(app, ["console", "hash-password", "--help"], terminal_width=200).output
    assert re.search(r"--user\s+<str>", hash_help) and re.search(r"--help\s+Show this message", hash_help), hash_help


def test_activate_cosine_is_documented() -> None:
    from cli.main import app

    shown = CliRunner().invoke(app, ["evaluator", "activate", "--help"], terminal_width=200)
    assert "'cosine'" in shown.output


TRAINING_EVENTS = [
    {"phase": "data", "step": 0, "total": 1, "elapsed": 0.1},
    {"phase": "data", "step": 1, "total": 1, "elapsed": 2.0},
    {"phase": "train", "step": 50, "total": 100, "loss": 0.9, "elapsed": 30.0},
    {"phase": "train", "step": 60, "total": 240, "loss": 0.8, "elapsed": 35.0},  # replanned: 60/240 < 50/100
    {"phase": "train", "step": 200, "total": 240, "loss": 0.5, "elapsed": 80.0},
    {"phase": "calibrate", "step": 1, "total": 40, "elapsed": 95.0},
    {"phase": "calibrate", "step": 40, "total": 40, "elapsed": 110.0},
    {"phase": "save", "step": 0, "total": 1, "elapsed": 111.0},
]


def test_training_bar_never_moves_backwards() -> None:
    from cli.evaluator import TrainingProgress

    terminal = Console(file=io.StringIO(), force_terminal=True, width=100)
    shown: list[tuple[str, float]] = []
    with TrainingProgress(terminal) as show:
        for event in TRAINING_EVENTS:
            show(event)
            task = show.progress.tasks[-1]
            shown.append((task.description, task.percentage))
    train = [percent for phase, percent in shown if phase == "train"]
    assert train == [50.0, 50.0, pytest.approx(200 / 240 * 100)]
    assert [phase for phase, _ in shown] == [
        "data",
        "data",
        "train",
        "train",
        "train",
        "calibrate",
        "calibrate",
        "save",
    ]


def test_training_without_a_terminal_prints_one_line_per_phase() -> None:
    from cli.evaluator import TrainingProgress

    output = io.StringIO()
    with TrainingProgress(Console(file=output, width=100)) as show:
        for event in TRAINING_EVENTS:
            show(event)
    assert output.getvalue().splitlines() == ["[0:00] data", "[0:30] train", "[1:35] calibrate", "[1:51] save"]
