"""Shared fixtures: the HLO corpus in ../shared (tests skip cleanly when it is absent)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

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
