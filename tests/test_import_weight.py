"""The processes that only listen and queue load no model: torch, transformers and LlamaIndex wait
for the worker that answers (application/answering.py imports application/runtime.py inside
answer_question; the console's evaluator and preview pages import theirs inside the page).

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
