"""Shared fixtures: the HLO corpus in ../shared (tests skip cleanly when it is absent)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from tpucost import features

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "hlo-corpus"


def corpus_rows() -> list[dict[str, str]]:
    """Rows of the corpus MANIFEST.tsv, or [] when the corpus is not there."""
    manifest = CORPUS / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    with manifest.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(scope="session")
def corpus() -> list[dict[str, str]]:
    rows = corpus_rows()
    if not rows:
        pytest.skip(f"HLO corpus not found at {CORPUS}")
    return rows


def rand_graph(rng: np.random.Generator, n: int, max_opcode: int = len(features.OPCODE_VOCAB)) -> features.KernelGraph:
    """A random kernel graph: a DAG in topological order (each node consumes up to 2 earlier ones)."""
    senders, receivers = [], []
    for i in range(1, n):
        for j in rng.choice(i, size=min(i, 2), replace=False):
            senders.append(j)
            receivers.append(i)
    return features.KernelGraph(
        opcodes=rng.integers(1, max_opcode, n).astype(np.int32),
        node_features=rng.random((n, features.NUM_NODE_FEATURES)).astype(np.float32),
        senders=np.asarray(senders, np.int32),
        receivers=np.asarray(receivers, np.int32),
        name=f"k{n}",
        kind="loop",
    )
