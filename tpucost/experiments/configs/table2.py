"""The kernel task's experiments (Table 2 and the experiments beside it): their defaults, once.

``get_config()`` is what the bundled results were run with; ``get_smoke_config()`` tiny settings.
`tpucost.experiments.kernel_experiments` and ``python -m lab experiment ...`` read their
defaults here.
"""

from __future__ import annotations

import dataclasses

from tpucost.method.tasks import kernel
from tpucost.method.train import TrainConfig

__all__ = ["Table2Config", "get_config", "get_smoke_config"]


@dataclasses.dataclass(frozen=True)
class Table2Config:
    """The kernel task's experiment settings.

    Attributes:
      train: the training settings (the bundled models'); ``--epochs`` replaces its epochs.
      methods: the methods trained and scored (Table 2's rows; leave-group-out's default).
      learning_curve_methods: the methods of the learning curve.
      fractions: the learning curve's fractions of the training programs.
      hparam_epochs: epochs per hyperparameter trial (early stopping on validation).
      hparam_split: the split whose validation programs score the hyperparameter trials.
    """

    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    methods: tuple[str, ...] = kernel.METHODS
    learning_curve_methods: tuple[str, ...] = ("gnn",)
    fractions: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)
    hparam_epochs: int = 12
    hparam_split: str = "random"


def get_config() -> Table2Config:
    """The settings the bundled kernel-task results were run with."""
    return Table2Config()


def get_smoke_config() -> Table2Config:
    """Tiny settings: one epoch, two fractions, the fast methods (tests, a first try)."""
    return Table2Config(
        train=TrainConfig(epochs=1),
        methods=("gnn", "constant"),
        fractions=(0.5, 1.0),
        hparam_epochs=1,
    )
