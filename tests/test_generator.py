"""The optional generator against a real local OpenAI-compatible HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from application.generator import openai_generator
from core.config import Settings
from crag.pipeline import AskContext, CragPipeline, PipelineConfig
from crag.types import Passage, Thresholds

PASSAGE = Passage(
    id="c1",
    text="This section covers domestic travel in 2026. Submit your expense report within 30 calendar days after the trip.",
    origin="kb",
    source="policies",
    document="travel-expenses.md",
    title="Travel",
    section="Travel > Domestic",
)


class OverlapEvaluator:
    """Deterministic stand-in for the T5 judge: share of question words found in the passage."""

    version = "overlap"

    def score(self, question: str, passages):
        words = {w.strip("?.,").lower() for w in question.split() if len(w) > 3}
        return [2 * len([w for w in words if w in p.lower()]) / max(len(words), 1) - 1 for p in passages]


class StaticRetriever:
    def retrieve(self, question: str, top_k: int) -> list[Passage]:
        return [PASSAGE]


@pytest.fixture()
def chat_server() -> Iterator[dict]:
    state: dict = {"reply": "", "requests": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["requests"].append({"path": self.path, "body": body})
            payload = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": state["reply"]},
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()


def _pipeline(url: str) -> CragPipeline:
    generator = openai_generator(Settings(POLICYBOT_GENERATOR_URL=url, POLICYBOT_GENERATOR_MODEL="tiny"))
    config = PipelineConfig(thresholds=Thresholds(upper=0.0, lower=-0.5, strip=-0.9))
    return CragPipeline(lambda _ctx: StaticRetriever(), OverlapEvaluator(), [], config, generator=generator)


QUESTION = "How many days to submit travel expense report after domestic trip?"


def test_grounded_generation_is_used_and_sees_only_the_evidence(chat_server):
    chat_server["reply"] = "For domestic trips in 2026, submit within 30 calendar days after the trip [1]."
    answer = _pipeline(chat_server["url"]).answer(QUESTION, AskContext())
    assert answer.found and answer.text == chat_server["reply"]
    sent = chat_server["requests"][0]["body"]["messages"][1]["content"]
    assert "[1]" in sent and "30 calendar days" in sent and QUESTION in sent


@pytest.mark.parametrize("reply", ["Submit within 30 days.", "See [7].", "NOT IN EVIDENCE"])
def test_ungrounded_generation_falls_back_to_extractive(chat_server, reply):
    chat_server["reply"] = reply
    answer = _pipeline(chat_server["url"]).answer(QUESTION, AskContext())
    assert answer.found and answer.text != reply and "30 calendar days" in answer.text and "[1]" in answer.text


def test_unreachable_generator_falls_back_to_extractive():
    answer = _pipeline("http://127.0.0.1:9/v1").answer(QUESTION, AskContext())
    assert answer.found and "30 calendar days" in answer.text
    assert any("generator failed" in note for note in answer.notes)


def test_no_generator_configured():
    assert openai_generator(Settings()) is None


def test_the_generator_sees_only_evidence_the_asker_may_see(chat_server, settings, ingested_samples, tmp_path):
    """A document with an access list reaches the generator only for a question asked in one of
    its channels: evidence is chosen (retrieval honours access lists) before generation."""
    from application.runtime import Runtime, cosine_evaluator
    from ingestion.ingest import ingest_paths

    path = tmp_path / "board-offsite.md"
    path.write_text("# Board Offsite\n\n## Budget\n\nThe board offsite budget is 90,000 dollars per quarter.\n")
    ingest_paths(settings, [path], collection="restricted", access_channels=["C0BOARD"])
    generating = settings.model_copy(update={"generator_url": chat_server["url"], "generator_model": "tiny"})
    runtime = Runtime(generating, cosine_evaluator(generating))
    question = "What is the board offsite budget per quarter?"
    sent: dict[str | None, str] = {}
    for channel in ("C0BOARD", "C0OTHER", None):
        chat_server["requests"].clear()
        runtime.pipeline(channel).answer(question, AskContext(channel=channel))
        sent[channel] = " ".join(r["body"]["messages"][1]["content"] for r in chat_server["requests"])
    assert "90,000 dollars" in sent["C0BOARD"]  # the generator is asked, and sees what the board may see
    assert "90,000" not in sent["C0OTHER"] and "90,000" not in sent[None]
