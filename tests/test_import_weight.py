"""The processes that only listen and queue load no model: torch, transformers and LlamaIndex wait
for the worker that answers (application/answering.py imports application/runtime.py inside
answer_question; the console's evaluator and preview pages import theirs inside the page).

`policybot ask`, which answers in its own process, loads what one question needs and nothing more.

Guarded by the modules an import loads, as tests/test_cli_startup.py guards the CLI's.
"""

from __future__ import annotations

import json
import subprocess
import sys

from support.environment import REPO

MODEL_STACK = ("torch", "transformers", "sentence_transformers", "llama_index")

# What `policybot serve --http` imports (cli/serve.py): the Bolt app, its HTTP endpoint and the
# sweep, the Celery enqueuer (and through it the tasks), the admin console.
SERVE_MODULES = ("bot.app", "bot.http", "bot.socket", "bot.recovery", "workers.enqueuer", "console.app")

LOADED = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def top_level_modules_after_importing(names: tuple[str, ...]) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", LOADED, json.dumps(names)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        timeout=120,
        check=True,
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_the_serve_process_loads_no_model() -> None:
    loaded = top_level_modules_after_importing(SERVE_MODULES)
    assert "slack_bolt" in loaded and "celery" in loaded  # the imports did run
    assert sorted(loaded & set(MODEL_STACK)) == []


# What one question does not need: sentence-transformers (and through it scikit-learn, SciPy's
# statistics and pandas) only to run MiniLM, which ingestion/embedding.py runs on transformers itself.
NOT_FOR_A_QUESTION = ("sentence_transformers", "sklearn", "pandas")

# Runs the console-script entry with argv; at exit (after the command), reports what got imported
# and whether the objects were frozen out of the exit's garbage collection (cli/main.py).
ASK = """
import atexit, gc, json, sys
sys.argv = ["policybot", *json.loads(sys.argv[1])]
atexit.register(lambda: print(json.dumps({
    "loaded": sorted({name.split(".")[0] for name in sys.modules}),
    "frozen": gc.get_freeze_count(),
}), file=sys.__stderr__))
from cli.main import run
run()
"""


def test_ask_loads_only_what_one_question_needs(policybot_home, ingested_samples) -> None:
    """`policybot ask` answers with the models it needs (torch, transformers, LlamaIndex's retrieval)
    and imports nothing else of weight; its objects are left out of the exit's garbage collection."""
    from support.environment import cli_env

    question = "How long do I have to submit expenses after a domestic trip?"
    result = subprocess.run(
        [sys.executable, "-c", ASK, json.dumps(["ask", question, "--json"])],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(policybot_home),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["citations"], result.stdout  # it did answer
    report = json.loads(result.stderr.strip().splitlines()[-1])
    loaded = set(report["loaded"])
    assert {"torch", "transformers", "llama_index"} <= loaded  # the models did load
    assert sorted(loaded & set(NOT_FOR_A_QUESTION)) == []
    assert report["frozen"] > 100_000  # the models' objects, frozen before the interpreter exits
