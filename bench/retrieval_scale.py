"""Retrieval at scale: pgvector HNSW against exact search on synthetic policy-like corpora.

    .venv/bin/python -m bench.retrieval_scale [--sizes 10000,100000,1000000] [--queries 100]

For each size N a table `bench_vectors_N` (id, embedding) is filled with synthetic 384-d
vectors shaped like the real corpus: every vector is a real MiniLM chunk embedding of the
sample policies (a "topic"), blended with a second topic and Gaussian noise, normalised.
Queries are the benchmark questions' real MiniLM embeddings, as production searches with:
questions sit farther from the chunks than chunks from each other, which is what makes
HNSW need a larger ef_search (chunk-like queries reach recall@10 0.98 at ef_search=40 on
100k where questions reach 0.85; measured while writing this benchmark).

Figures per size:
- embedding throughput (chunks/s): MiniLM on a sample of real chunk texts. Embedding 1M
  texts on 2 CPUs would take hours, so it is measured on a sample and extrapolated;
- write throughput: binary COPY of the vectors (rows/s), the HNSW build (s), and inserts
  into the table once the index exists (rows/s, the steady-state ingestion path);
- query latency p50/p99 of the top-10 with HNSW (per ef_search) and exact (sequential scan,
  parallel workers allowed), and recall@10 of HNSW against exact on the same queries.

The synthetic variation is low-rank (see `synthetic`): recall depends on it, and is
stated with the generator in docs/performance.md. The 1M corpus is stored as `halfvec` (half-precision) by default, which halves the table
and the index (about 0.8 + 1 GB instead of 1.6 + 2 GB); --types changes that.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time

import numpy as np

from bench.common import Report, fmt_ms, summary, table, use_bench_home

DIM = 384
TOP_K = 10


def topics(settings) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Real chunk embeddings and texts of the sample corpus, and the benchmark questions' embeddings."""
    import yaml
    from sqlalchemy import text

    from application.runtime import embed_function
    from bench.quality import QUESTIONS
    from core import db

    with db.engine(settings).connect() as connection:
        rows = connection.execute(text("SELECT text, embedding::text FROM data_chunks")).all()
    if not rows:
        raise SystemExit("no chunks in the bench store: run bench.evaluator_speed or bench.e2e first (they ingest)")
    texts = [r[0] for r in rows]
    vectors = np.array([np.array(r[1].strip("[]").split(","), dtype=np.float32) for r in rows])
    questions = [item["question"] for item in yaml.safe_load(QUESTIONS.read_text())]
    return vectors, embed_function(settings)(questions), texts


def synthetic(bases: np.ndarray, n: int, rng: np.random.Generator, noise: float = 0.35, rank: int = 32) -> np.ndarray:
    """n unit vectors near random blends of two base vectors (policy topics).

    Chunks of one topic differ along a few dozen directions, not all 384: the variation is
    low-rank (`rank` random directions, shared by the corpus) plus a little isotropic noise.
    Recall depends on that choice: with isotropic noise alone (every dimension independent,
    the hardest case for any index) recall@10 at 1M was far lower (see docs/performance.md).
    """
    directions = np.random.default_rng(0).normal(0, 1, (rank, bases.shape[1])).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    first = bases[rng.integers(0, len(bases), n)]
    second = bases[rng.integers(0, len(bases), n)]
    weight = rng.uniform(0.55, 0.95, (n, 1)).astype(np.float32)
    out = weight * first + (1 - weight) * second
    out += rng.normal(0, noise / np.sqrt(rank), (n, rank)).astype(np.float32) @ directions
    out += rng.normal(0, 0.01, out.shape).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def copy_binary(ids: np.ndarray, vectors: np.ndarray, half: bool) -> bytes:
    """A PostgreSQL binary COPY stream of (bigint, vector|halfvec) rows, built with numpy."""
    element = ">f2" if half else ">f4"
    row = np.dtype(
        [
            ("fields", ">i2"),
            ("id_len", ">i4"),
            ("id", ">i8"),
            ("vec_len", ">i4"),
            ("dim", ">i2"),
            ("unused", ">i2"),
            ("values", element, (vectors.shape[1],)),
        ]
    )
    data = np.empty(len(ids), dtype=row)
    data["fields"] = 2
    data["id_len"] = 8
    data["id"] = ids
    data["vec_len"] = 4 + vectors.shape[1] * (2 if half else 4)
    data["dim"] = vectors.shape[1]
    data["unused"] = 0
    data["values"] = vectors
    header = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
    return header + data.tobytes() + struct.pack(">h", -1)


def connect(settings):
    """A plain psycopg 3 connection to the bench database (autocommit)."""
    import psycopg
    from sqlalchemy.engine import make_url

    from core import services

    url = make_url(services.database_url(settings)).set(drivername="postgresql")
    return psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)


def literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in vector) + "]"


def top_ids(cursor, name: str, kind: str, query: np.ndarray) -> list[int]:
    cursor.execute(f"SELECT id FROM {name} ORDER BY embedding <=> %s::{kind}({DIM}) LIMIT {TOP_K}", (literal(query),))
    return [r[0] for r in cursor.fetchall()]


def timed_queries(cursor, name: str, kind: str, queries: np.ndarray) -> tuple[list[float], list[list[int]]]:
    times, results = [], []
    for query in queries:
        started = time.perf_counter()
        results.append(top_ids(cursor, name, kind, query))
        times.append(time.perf_counter() - started)
    return times, results


def run_size(
    conn,
    n: int,
    kind: str,
    bases: np.ndarray,
    queries: np.ndarray,
    exact_queries: int,
    ef_values: list[int],
    m: int,
    ef_construction: int,
    rng: np.random.Generator,
) -> dict:
    name = f"bench_vectors_{n}_{kind}"
    half = kind == "halfvec"
    cur = conn.cursor()
    cur.execute(f"DROP TABLE IF EXISTS {name}")
    cur.execute(f"CREATE UNLOGGED TABLE {name} (id bigint PRIMARY KEY, embedding {kind}({DIM}) NOT NULL)")
    # Write: binary COPY in blocks (generation time excluded).
    write_s, block = 0.0, 50_000
    for start in range(0, n, block):
        count = min(block, n - start)
        payload = copy_binary(np.arange(start, start + count, dtype=np.int64), synthetic(bases, count, rng), half)
        started = time.perf_counter()
        with cur.copy(f"COPY {name} (id, embedding) FROM STDIN WITH (FORMAT binary)") as copy:
            for offset in range(0, len(payload), 8 << 20):
                copy.write(payload[offset : offset + (8 << 20)])
        write_s += time.perf_counter() - started
    cur.execute(f"ANALYZE {name}")
    cur.execute("SET maintenance_work_mem = '4GB'")
    cur.execute("SET max_parallel_maintenance_workers = 1")  # 2 processes in all: the machine's 2 cores
    started = time.perf_counter()
    cur.execute(
        f"CREATE INDEX ON {name} USING hnsw (embedding {kind}_cosine_ops) "
        f"WITH (m = {m}, ef_construction = {ef_construction})"
    )
    build_s = time.perf_counter() - started
    cur.execute(f"SELECT pg_relation_size('{name}'), pg_indexes_size('{name}')")
    table_bytes, index_bytes = cur.fetchone()

    # Exact top-10: the index switched off, so the planner scans (in parallel where it likes).
    cur.execute("SET enable_indexscan = off")
    exact_times, exact = timed_queries(cur, name, kind, queries[:exact_queries])
    cur.execute("SET enable_indexscan = on")
    hnsw = {}
    for ef in ef_values:
        cur.execute(f"SET hnsw.ef_search = {ef}")
        top_ids(cur, name, kind, queries[0])  # warm the index's first pages
        times, found = timed_queries(cur, name, kind, queries)
        recall = float(np.mean([len(set(a) & set(b)) / TOP_K for a, b in zip(found, exact)]))
        hnsw[ef] = {"latency": summary(times), "recall": recall}
    # Inserts once the index exists (what ingesting one more document costs at this size).
    extra = 500
    payload = copy_binary(np.arange(n, n + extra, dtype=np.int64), synthetic(bases, extra, rng), half)
    started = time.perf_counter()
    with cur.copy(f"COPY {name} (id, embedding) FROM STDIN WITH (FORMAT binary)") as copy:
        copy.write(payload)
    insert_rate = extra / (time.perf_counter() - started)
    return {
        "n": n,
        "kind": kind,
        "copy_rate": n / write_s,
        "build_s": build_s,
        "insert_rate": insert_rate,
        "table_mb": table_bytes / 2**20,
        "index_mb": index_bytes / 2**20,
        "exact": summary(exact_times),
        "hnsw": hnsw,
        "name": name,
    }


def embedding_rate(settings, texts: list[str], sample: int) -> float:
    from application.runtime import embed_function

    embed = embed_function(settings)
    batch = (texts * (sample // max(1, len(texts)) + 1))[:sample]
    embed(batch[:8])  # warm-up
    started = time.perf_counter()
    embed(batch)
    return sample / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--types", default="vector,vector,halfvec", help="column type per size")
    parser.add_argument("--queries", type=int, default=64, help="benchmark questions used as queries (64 exist)")
    parser.add_argument("--exact-queries", default="64,64,20", help="exact-search queries per size (slow at 1M)")
    parser.add_argument("--ef", default="40,100,200,400,800", help="hnsw.ef_search values")
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=64)
    parser.add_argument("--embed-sample", type=int, default=256)
    parser.add_argument("--keep", action="store_true", help="keep the tables (default: drop them after)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = (args.types.split(",") * len(sizes))[: len(sizes)]
    exact_counts = ([int(s) for s in args.exact_queries.split(",")] + [20] * len(sizes))[: len(sizes)]
    ef_values = [int(e) for e in args.ef.split(",")]

    use_bench_home()
    from bench.common import prepared_settings

    report = Report("retrieval_scale", "Retrieval at scale (pgvector HNSW vs exact)").begin()
    settings = prepared_settings()
    bases, question_vectors, texts = topics(settings)
    rng = np.random.default_rng(7)
    queries = question_vectors[: args.queries]  # what production searches with: embedded questions
    embed_rate = embedding_rate(settings, texts, args.embed_sample)
    report.add(
        f"Embedding (MiniLM, measured on {args.embed_sample} real chunk texts): {embed_rate:.0f} chunks/s, so "
        f"embedding 1M chunks would take {1_000_000 / embed_rate / 3600:.1f} h on this machine; the corpora "
        "below are synthetic vectors, so only writing and searching are timed at scale."
    )
    results = []
    conn = connect(settings)
    try:
        for n, kind, exact_q in zip(sizes, kinds, exact_counts):
            print(f"... {n} rows ({kind})", flush=True)
            result = run_size(conn, n, kind, bases, queries, exact_q, ef_values, args.m, args.ef_construction, rng)
            results.append(result)
            if not args.keep:
                conn.execute(f"DROP TABLE {result['name']}")
            print(
                f"    copy {result['copy_rate']:.0f} rows/s, build {result['build_s']:.0f} s, "
                f"exact p50 {fmt_ms(result['exact']['p50'])}, "
                + ", ".join(
                    f"ef{ef} p50 {fmt_ms(h['latency']['p50'])} recall {h['recall']:.3f}"
                    for ef, h in result["hnsw"].items()
                ),
                flush=True,
            )
    finally:
        conn.close()

    write_rows = [
        [
            f"{r['n']:,}",
            r["kind"],
            f"{r['copy_rate']:,.0f}",
            f"{r['build_s']:.0f} s",
            f"{r['n'] / (r['n'] / r['copy_rate'] + r['build_s']):,.0f}",
            f"{r['insert_rate']:,.0f}",
            f"{r['table_mb']:.0f} / {r['index_mb']:.0f} MB",
        ]
        for r in results
    ]
    report.add(
        f"Writing (embedding excluded; HNSW m={args.m}, ef_construction={args.ef_construction}):\n\n"
        + table(
            [
                "chunks",
                "type",
                "COPY rows/s",
                "HNSW build",
                "load + build rows/s",
                "inserts with index, rows/s",
                "table / index",
            ],
            write_rows,
        )
    )
    query_rows = []
    for r in results:
        query_rows.append(
            [
                f"{r['n']:,}",
                "exact (seq scan)",
                fmt_ms(r["exact"]["p50"]),
                fmt_ms(r["exact"]["p99"]),
                "1.000",
                r["exact"]["n"],
            ]
        )
        for ef, h in r["hnsw"].items():
            query_rows.append(
                [
                    f"{r['n']:,}",
                    f"HNSW ef_search={ef}",
                    fmt_ms(h["latency"]["p50"]),
                    fmt_ms(h["latency"]["p99"]),
                    f"{h['recall']:.3f}",
                    h["latency"]["n"],
                ]
            )
    report.add(
        "Top-10 query latency and recall@10 against exact search:\n\n"
        + table(["chunks", "search", "p50", "p99", "recall@10", "queries"], query_rows)
    )
    largest = results[-1]
    ok = [(ef, h) for ef, h in largest["hnsw"].items() if h["recall"] >= 0.95]
    if ok:
        ef, h = min(ok, key=lambda item: item[1]["latency"]["p99"])
        verdict = (
            f"At {largest['n']:,} chunks ({largest['kind']}), ef_search={ef}: p99 {fmt_ms(h['latency']['p99'])}, "
            f"recall@10 {h['recall']:.3f}: target (p99 < 50 ms, recall ≥ 0.95) "
            + ("met." if h["latency"]["p99"] < 0.050 else "not met on latency.")
        )
    else:
        verdict = f"At {largest['n']:,} chunks no ef_search tried reached recall@10 0.95: target not met."
    report.add(verdict)
    report.figures.update({"embed_rate": embed_rate, "results": results, "verdict": verdict})
    report.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
