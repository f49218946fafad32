"""The tile task's experiments (Table 3, its split seeds, leave-family-out): their defaults, once.

``get_config()`` is what the bundled results were run with; ``get_smoke_config()`` tiny settings.
`tpucost.experiments.tile_experiments` and ``python -m lab experiment ...`` read their
defaults here. The training settings depend on the data set (`tpucost.method.tasks.tile.train_config`:
40 epochs); ``epochs`` None keeps them.
"""

from __future__ import annotations

import dataclasses

from tpucost.method.tasks import tile as tile_task

__all__ = ["Table3Config", "get_config", "get_smoke_config"]


@dataclasses.dataclass(frozen=True)
class Table3Config:
    """The tile task's experiment settings.

    Attributes:
      losses: the losses of Table 3 (one model each).
      leave_family_out_losses: the losses of the leave-family-out experiment.
      split_seeds: the random splits of the seed-spread experiment.
      split_seed: the seed of Table 3's random split.
      epochs: training epochs; None: the bundled models' (`tpucost.method.tasks.tile.train_config`).
    """

    losses: tuple[str, ...] = tile_task.LOSSES
    leave_family_out_losses: tuple[str, ...] = ("hinge", "mse")
    split_seeds: tuple[int, ...] = (0, 1, 2)
    split_seed: int = 0
    epochs: int | None = None


def get_config() -> Table3Config:
    """The settings the bundled tile-task results were run with."""
    return Table3Config()


def get_smoke_config() -> Table3Config:
    """Tiny settings: one loss, one split seed, one epoch (tests, a first try)."""
    return Table3Config(losses=("hinge",), leave_family_out_losses=("hinge",), split_seeds=(0,), epochs=1)
