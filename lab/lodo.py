"""The leave-one-device-out experiment (`lab.device_experiments`): its defaults, once.

``get_config()`` is what ``python -m lab experiment leave-one-device-out`` runs with;
``get_smoke_config()`` tiny settings that run in seconds on small synthetic packs (tests).
"""

from __future__ import annotations

import dataclasses

from tpucost.method.models import ModelConfig
from tpucost.method.train import TrainConfig

__all__ = ["LodoConfig", "get_config", "get_smoke_config"]


@dataclasses.dataclass(frozen=True)
class LodoConfig:
    """The leave-one-device-out settings.

    Attributes:
      train: the training settings of the model that reads the device (`lab.device_models`: it
      reads the descriptor's `lab.descriptor.FEATURE_NAMES`); ``--epochs`` replaces its epochs.
      minutes: the adaptation budgets N: the held-out device's measured pairs whose cumulative
      measuring time fits in N minutes, in log order.
      finetune_epochs: epochs of fine-tuning on an adaptation budget's kernels.
      finetune_learning_rate: the peak learning rate of fine-tuning.
      val_fraction: the training packs' programs held out (drawn with ``seed``) for early stopping.
      seed: seeds the validation programs (training uses ``train.seed``).
    """

    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    minutes: tuple[float, ...] = (2.0, 5.0, 10.0)
    finetune_epochs: int = 20
    finetune_learning_rate: float = 3e-4
    val_fraction: float = 0.1
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "minutes", tuple(float(m) for m in self.minutes))
        if not self.minutes or any(m <= 0 for m in self.minutes):
            raise ValueError(f"minutes must be positive budgets, got {self.minutes}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction}")
        if self.finetune_epochs < 1:
            raise ValueError(f"finetune_epochs must be >= 1, got {self.finetune_epochs}")

    def to_dict(self) -> dict:
        """A JSON-ready dict (what a result file records it was run with)."""
        d = dataclasses.asdict(self)
        d["train"] = self.train.to_dict()
        d["minutes"] = list(self.minutes)
        return d


def get_config() -> LodoConfig:
    """The settings of the leave-one-device-out experiment."""
    return LodoConfig()


def get_smoke_config() -> LodoConfig:
    """Tiny settings: a small model, two epochs of one batch each (one compile of each step for a
    few hundred kernels), two epochs of fine-tuning (the first step of a schedule has learning
    rate 0: one epoch of one step would leave the model as it was) (tests, a first try)."""
    return LodoConfig(
        train=TrainConfig.smoke(
            epochs=2,
            batch_size=1024,
            eval_batch_size=1024,
            model=ModelConfig(opcode_embed=8, hidden=16, num_layers=1),
        ),
        finetune_epochs=2,
        finetune_learning_rate=1e-3,
    )
