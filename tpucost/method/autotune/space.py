"""The configuration space of an autotuning search: knobs, each with a list of choices.

A configuration picks one choice per knob; the first choice of every knob is the default
configuration unless the space names another.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["Config", "Space"]

Config = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Space:
    """Knobs and their choices; a configuration picks one choice per knob.

    ``knobs`` maps a knob name to its choices (any values that compare with ``==``: strings, ints,
    dicts of block sizes). ``default`` is the default configuration (None: the first choice of
    every knob).
    """

    knobs: Mapping[str, tuple[Any, ...]]
    default_config: Mapping[str, Any] | None = None

    def __post_init__(self):
        knobs = {str(k): tuple(v) for k, v in self.knobs.items()}
        empty = [k for k, v in knobs.items() if not v]
        if empty:
            raise ValueError(f"knobs without choices: {', '.join(empty)}")
        object.__setattr__(self, "knobs", knobs)
        default = (
            dict(self.default_config)
            if self.default_config is not None
            else {k: v[0] for k, v in knobs.items()}
        )
        self.key(default)  # checks it
        object.__setattr__(self, "default_config", default)

    @property
    def default(self) -> Config:
        return dict(self.default_config)

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.knobs.values())

    def key(self, config: Mapping[str, Any]) -> tuple[int, ...]:
        """The configuration as a tuple of choice indices (hashable); ValueError if it is not in the space."""
        if set(config) != set(self.knobs):
            raise ValueError(
                f"configuration keys {sorted(config)} are not the space's knobs {sorted(self.knobs)}"
            )
        out = []
        for name, choices in self.knobs.items():
            try:
                out.append(choices.index(config[name]))
            except ValueError:
                raise ValueError(
                    f"knob {name}: {config[name]!r} is not one of its choices {list(choices)}"
                ) from None
        return tuple(out)

    def config(self, key: Sequence[int]) -> Config:
        return {name: choices[i] for (name, choices), i in zip(self.knobs.items(), key, strict=True)}

    def random(self, rng: np.random.Generator) -> Config:
        return self.config([int(rng.integers(len(c))) for c in self.knobs.values()])

    def neighbor(self, config: Mapping[str, Any], rng: np.random.Generator) -> Config:
        """``config`` with one knob (one that has a choice to change to) set to another choice."""
        key = list(self.key(config))
        movable = [i for i, c in enumerate(self.knobs.values()) if len(c) > 1]
        if not movable:
            return dict(config)
        i = movable[int(rng.integers(len(movable)))]
        n = len(list(self.knobs.values())[i])
        key[i] = (key[i] + 1 + int(rng.integers(n - 1))) % n
        return self.config(key)

    def all_keys(self) -> Iterable[tuple[int, ...]]:
        return itertools.product(*(range(len(c)) for c in self.knobs.values()))
