"""Retrieval: similarity search over the ingested samples, access lists, safe filters."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from core import db
from ingestion.ingest import ingest_paths
from ingestion.retriever import ChunkRetriever
from ingestion.store import chunk_table


@pytest.mark.parametrize(
    ("question", "document", "phrase"),
    [
        (
            "How long do I have to submit expenses after a domestic business trip?",
            "travel-expenses.md",
            "30 calendar days",
        ),
        ("How many weeks of parental leave does a primary caregiver get?", "leave-policy.md", "16 weeks"),
        ("How long must my company account password be?", "devices-security.pdf", "14 characters"),
    ],
)
def test_similarity_query_returns_the_right_chunk(settings, ingested_samples, question, document, phrase):
    passages = ChunkRetriever(settings, ["policies"]).retrieve(question, top_k=3)
    assert passages, "nothing retrieved"
    assert any(p.document == document and phrase in p.text for p in passages), [
        (p.document, p.text[:60]) for p in passages
    ]


def test_training_reads_the_chunks_in_document_order_not_by_their_path_hashed_ids(settings, ingested_samples):
    """Chunk ids hash the file's path; the evaluator's training data must not depend on where
    the same documents were ingested from, so the corpus comes in document order."""
    from application.evaluators import corpus_chunks

    chunks = [chunk for chunk in corpus_chunks(settings) if chunk.document == "leave-policy.md"]
    assert len(chunks) > 3
    with db.session(settings) as session:
        table = chunk_table(settings.embed_dim)
        position = dict(session.execute(select(table.c.node_id, table.c.metadata_["position"].as_integer())).all())
    assert [position[chunk.id] for chunk in chunks] == sorted(position[chunk.id] for chunk in chunks)


def test_access_list_hides_documents_from_other_channels(settings, tmp_path):
    path = tmp_path / "secret.md"
    path.write_text("# Exec Offsite\n\n## Venue\n\nThe executive offsite venue is the Lakeview Lodge in Tahoe.\n")
    ingest_paths(settings, [path], collection="restricted", access_channels=["C0EXEC"])
    question = "Where is the executive offsite venue?"
    assert ChunkRetriever(settings, ["restricted"], channel="C0EXEC").retrieve(question, 3)
    assert ChunkRetriever(settings, ["restricted"], channel="C0OTHER").retrieve(question, 3) == []
    assert ChunkRetriever(settings, ["restricted"]).retrieve(question, 3) == []


def test_filter_values_cannot_inject_sql(settings):
    with pytest.raises(ValueError):
        ChunkRetriever(settings, ["policies') OR ('1'='1"]).retrieve("anything", 3)
    with pytest.raises(ValueError):
        ChunkRetriever(settings, ["policies"], channel="C1' OR '1'='1").retrieve("anything", 3)
