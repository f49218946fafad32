"""Splits of a data set into train, validation and test parts, by the unit that must not leak.

A `Split` holds the ids of what was assigned (the kernel data set assigns *programs*, the tile data
set *problems*: `Split.unit` says which) and the row indices of each part. `random_parts` shuffles
ids with a seed and cuts them by fractions; `family_parts` holds out whole families. Which rows go
with which ids is each data set's business (`tpucost.experiments.data.kernel`, `tpucost.experiments.data.tile`).

How small a data set may be: a test figure (a MAPE, a Kendall tau) averaged over one or two test
ids is one or two ids' figure. `MIN_TEST_IDS` is the fewest test ids a split should hold,
`min_ids_for_test` the fewest ids a random split needs to hold them, and `few_test_ids_warning`
the sentence to print when a split (or a collection about to be made) holds fewer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = [
    "SPLITS",
    "RANDOM_FRACTIONS",
    "MIN_TEST_IDS",
    "Split",
    "check_fractions",
    "random_parts",
    "family_parts",
    "part_sizes",
    "min_ids_for_test",
    "few_test_ids_warning",
    "split_size_warning",
]

#: The names every data set's ``split`` knows: ``random`` (held-out ids) and ``hard`` (held-out families).
SPLITS: tuple[str, ...] = ("random", "hard")
#: The (train, validation, test) fractions of the random splits (`random_parts`' default).
RANDOM_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)
#: The fewest test ids (programs, problems) a split should hold: notebook 03's Table 2 is a median
#: or mean over test programs, and over one or two it is those programs' figure, not the method's.
MIN_TEST_IDS = 3


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


def random_parts(n: int, seed: int, fractions: Sequence[float] = RANDOM_FRACTIONS) -> np.ndarray:
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


def part_sizes(n: int, fractions: Sequence[float] = RANDOM_FRACTIONS) -> tuple[int, int, int]:
    """How many of ``n`` ids `random_parts` puts in train, validation and test (the same for every seed)."""
    check_fractions(fractions)
    if n < 0:
        raise ValueError(f"the number of ids must be >= 0, got {n}")
    train_end, val_end = (int(c) for c in _cuts(n, fractions))
    return train_end, val_end - train_end, n - val_end


def min_ids_for_test(test_ids: int = MIN_TEST_IDS, fractions: Sequence[float] = RANDOM_FRACTIONS) -> int:
    """The fewest ids whose random split (`random_parts` with ``fractions``) holds ``test_ids`` test
    ids: 26 for 3 test ids at 80/10/10 (25 ids give 2.5 test ids, which rounds to 2)."""
    check_fractions(fractions)
    if test_ids < 1 or fractions[2] <= 0:
        raise ValueError(f"need test_ids >= 1 and a test fraction > 0, got {test_ids} and {fractions[2]}")
    n = test_ids
    while part_sizes(n, fractions)[2] < test_ids:
        n += 1
    return n


def few_test_ids_warning(
    test_ids: int,
    what: str,
    unit: str = "program",
    minimum: int = MIN_TEST_IDS,
    fractions: Sequence[float] = RANDOM_FRACTIONS,
) -> str:
    """The warning to print when ``what`` (a split, e.g. "the random split of these 12 programs")
    holds ``test_ids`` test ``unit``s, fewer than ``minimum``; ``""`` when it does not. The sentence
    names the minimum and the fewest ids a random split with ``fractions`` needs to reach it."""
    if test_ids >= minimum:
        return ""
    need = min_ids_for_test(minimum, fractions)
    shares = "/".join(f"{100 * f:.0f}" for f in fractions)
    return (
        f"warning: {what} has {test_ids} test {unit}{'' if test_ids == 1 else 's'}, fewer than the "
        f"{minimum} a test figure (notebook 03's Table 2) should rest on; a random {shares} split holds "
        f"{minimum} test {unit}s from {need} {unit}s on: use at least {need}."
    )


def split_size_warning(split: Split, name: str, fractions: Sequence[float] = RANDOM_FRACTIONS) -> str:
    """`few_test_ids_warning` for the split ``name`` (``"random"``, ``"hard"``, ...) of a data set:
    ``""`` when it holds at least `MIN_TEST_IDS` test ids."""
    ids = len(split.train_ids) + len(split.val_ids) + len(split.test_ids)
    what = f"the {name} split of these {ids} {split.unit}s"
    return few_test_ids_warning(len(split.test_ids), what, split.unit, fractions=fractions)
