"""The embedding model run on transformers (ingestion/embedding.py) gives sentence-transformers'
vectors for the same folder: the chunks stored before it and the questions embedded now agree."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from support.environment import SAMPLES

pytestmark = pytest.mark.training  # loads two copies of MiniLM: seconds, not a quick unit test


def test_the_embedder_gives_sentence_transformers_vectors() -> None:
    from sentence_transformers import SentenceTransformer

    from crag.minilm import minilm_folder
    from ingestion.embedding import SentenceEmbedder

    folder = minilm_folder()
    ours = SentenceEmbedder(folder, batch_size=4)
    reference = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    policies = [path.read_text() for path in sorted(SAMPLES.glob("*.md"))]
    texts = [
        "How long do I have to submit expenses after a domestic trip?",
        "  spaces around it  ",
        "Ünïcödé — “quotes” and dashes",
        "x",
        *(text[:4000] for text in policies[:3]),  # longer than 256 word pieces: cut as sentence-transformers cuts
        *(text[:300] for text in policies),
    ]
    expected = reference.encode(texts, batch_size=4, normalize_embeddings=True)
    got = np.array(ours.get_text_embedding_batch(texts))
    assert got.shape == expected.shape == (len(texts), 384)
    assert np.abs(got - expected).max() < 1e-5
    assert np.allclose(ours.get_query_embedding(texts[0]), expected[0], atol=1e-5)
    assert np.allclose(ours.get_text_embedding(texts[4]), expected[4], atol=1e-5)
    assert ours.get_text_embedding_batch([]) == []


def test_a_folder_pooled_otherwise_is_refused(tmp_path) -> None:
    from crag.minilm import minilm_folder
    from ingestion.embedding import EmbeddingError, SentenceEmbedder

    folder = tmp_path / "cls-pooled"
    shutil.copytree(minilm_folder(), folder)
    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    pooling.write_text(json.dumps(config | {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))
    with pytest.raises(EmbeddingError, match="only mean pooling"):
        SentenceEmbedder(folder, batch_size=4)
