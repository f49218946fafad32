"""Splits of a data set into train, validation and test parts, by the unit that must not leak.

A `Split` holds the ids of what was assigned (the kernel data set assigns *programs*, the tile data
set *problems*: `Split.unit` says which) and the row indices of each part. `random_parts` shuffles
ids with a seed and cuts them by fractions; `family_parts` holds out whole families. Which rows go
with which ids is each data set's business (`tpucost.data.kernel`, `tpucost.data.tile`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["SPLITS", "Split", "check_fractions", "random_parts", "family_parts"]

#: The names every data set's ``split`` knows: ``random`` (held-out ids) and ``hard`` (held-out families).
SPLITS: tuple[str, ...] = ("random", "hard")


@dataclasses.dataclass(frozen=True, eq=False)
class Split:
    """Ids assigned to parts, and the rows that go with them.

    Attributes:
      unit: what the ids are: ``"program"`` (kernel data set) or ``"problem"`` (tile data set).
      train_ids, val_ids, test_ids: unicode[P_part], sorted; every id of the data set is in one.
      train, val, test: int64[R_part], sorted row indices; every row is in exactly one.

    Iterating yields the row indices ``(train, val, test)``, so ``train, val, test = split`` works.
    """

    unit: str
    train_ids: np.ndarray
    val_ids: np.ndarray
    test_ids: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.train, self.val, self.test))


def check_fractions(fractions: Sequence[float]) -> None:
    """ValueError unless ``fractions`` are three non-negative numbers summing to 1."""
    if len(fractions) != 3 or min(fractions) < 0 or not np.isclose(sum(fractions), 1.0):
        raise ValueError(f"fractions must be 3 non-negative numbers summing to 1, got {fractions}")


def _cuts(n: int, fractions: Sequence[float]) -> np.ndarray:
    """Where to cut ``n`` shuffled ids into three parts of the given fractions."""
    sizes = np.round(np.asarray(fractions) * n).astype(int)
    if n >= 3:
        sizes[1:] = [max(1, k) if f > 0 else k for k, f in zip(sizes[1:], fractions[1:], strict=True)]
    sizes[0] = n - sizes[1:].sum()
    return np.cumsum(sizes)[:2]


def random_parts(n: int, seed: int, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> np.ndarray:
    """int64[n]: the part (0 train, 1 val, 2 test) of each of ``n`` ids, shuffled with ``seed`` and
    cut by ``fractions``. With at least three ids, a part with a non-zero fraction gets one."""
    check_fractions(fractions)
    perm = np.random.default_rng(seed).permutation(n)
    part = np.empty(n, np.int64)
    for j, chunk in enumerate(np.split(perm, _cuts(n, fractions))):
        part[chunk] = j
    return part


def family_parts(
    families: np.ndarray, test_families: Sequence[str], val_families: Sequence[str]
) -> np.ndarray:
    """int64[n]: 2 for ids of ``test_families``, 1 for ``val_families``, else 0 (a family may not be both)."""
    both = set(test_families) & set(val_families)
    if both:
        raise ValueError(f"a family cannot be both test and validation: {sorted(both)}")
    return np.where(
        np.isin(families, list(test_families)), 2, np.where(np.isin(families, list(val_families)), 1, 0)
    ).astype(np.int64)
