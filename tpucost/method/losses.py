"""The losses of both tasks, in one registry: MSE for runtimes, rank losses for configurations.

Every loss has one signature, like optax's ranking losses::

    loss(scores, targets, *, where=None) -> float[..., ]   # one value per list

``scores`` float[..., C] are the model's *costs* (higher = slower), ``targets`` float[..., C] the
measured costs on any increasing scale (we use standardised log runtime), and ``where``
bool[..., C] marks real entries (padding is False). The last axis is one list:

* the kernel task (`tpucost.method.tasks.kernel`, Table 2): a list is one kernel (C = 1), and its
  loss is `mse_loss`, the squared error of the predicted standardised log runtime;
* the tile task (`tpucost.method.tasks.tile`, Table 3): a list is one kernel's C configurations,
  and its loss any registered one: `mse_loss` (the regression baseline) or a rank loss, which
  never compares configurations of different kernels (their runtimes are not comparable); a list
  with fewer than two real configurations has rank loss 0.

>>> import jax.numpy as jnp
>>> scores = jnp.array([[0.0, 1.0, 2.0]])          # the model ranks config 0 fastest
>>> targets = jnp.array([[1.0, 2.0, 3.0]])         # ... and so it is
>>> float(pairwise_hinge_loss(scores, targets)[0])
0.0

Paper (Kaufman et al. 2021, eq. 2): ``L = sum_{i,j} [y_i > y_j] phi(y'_i - y'_j)`` with ``phi``
the hinge (`pairwise_hinge_loss`) or the logistic function (`pairwise_logistic_loss`).
We average over the ordered pairs of each list instead of summing, so a kernel with many
configurations does not outweigh one with few.

The registry: every loss is registered with `register` under a short name, with the name of the
tile model trained with it in Table 3 and whether it is a regression (its scores are then
standardised log runtimes, which `tpucost.method.tasks.tile` and the autotuner turn back into
nanoseconds; a rank loss's scores only order one kernel's configurations). `get` looks a loss up
by name: the kernel task asks for ``"mse"``, the tile task for its ``loss_name``. Adding a loss is
one decorated function here and its test; the tile task, the CLI and Table 3 read `LOSSES`.

Taught in notebook 03, section 1 (the kernel task's squared error and one gradient step,
`notebooks/03_train_cost_model.ipynb`) and notebook 04, section 3 (rank losses against
regression, `notebooks/04_tile_selection.ipynb`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

__all__ = [
    "Loss",
    "RegisteredLoss",
    "LOSSES",
    "register",
    "get",
    "regression_loss_name",
    "pairwise_hinge_loss",
    "pairwise_logistic_loss",
    "listwise_softmax_loss",
    "mse_loss",
]

Loss = Callable[..., jax.Array]


@dataclasses.dataclass(frozen=True)
class RegisteredLoss:
    """A loss of the registry: its function, its tile model's row name in Table 3, and whether it is
    a regression (scores are standardised log runtimes) rather than a rank loss. Every loss can
    train a tile model; the kernel task trains with the regression ``"mse"`` only."""

    name: str
    fn: Loss
    model_name: str
    regression: bool = False


#: Loss name -> its registration, in the order the losses were registered.
LOSSES: dict[str, RegisteredLoss] = {}


def register(name: str, model_name: str, regression: bool = False) -> Callable[[Loss], Loss]:
    """Decorator: add the loss to `LOSSES` under ``name`` (the model trained with it is Table 3's
    ``model_name``; ``regression``: its scores are standardised log runtimes)."""

    def add(fn: Loss) -> Loss:
        if name in LOSSES:
            raise ValueError(f"a loss is already registered as {name!r}")
        LOSSES[name] = RegisteredLoss(name, fn, model_name, regression)
        return fn

    return add


def _mask(targets: jax.Array, where: jax.Array | None) -> jax.Array:
    return jnp.ones(targets.shape, bool) if where is None else jnp.asarray(where, bool)


def _pairwise(
    phi: Callable[[jax.Array], jax.Array], scores: jax.Array, targets: jax.Array, where: jax.Array | None
) -> jax.Array:
    """Mean of ``phi(s_i - s_j)`` over the real pairs (i, j) of each list with ``t_i > t_j``."""
    mask = _mask(targets, where)
    slower = targets[..., :, None] > targets[..., None, :]  # [..., C, C]: i slower than j
    pairs = slower & mask[..., :, None] & mask[..., None, :]
    diff = scores[..., :, None] - scores[..., None, :]
    total = jnp.sum(jnp.where(pairs, phi(diff), 0.0), axis=(-2, -1))
    return total / jnp.maximum(jnp.sum(pairs, axis=(-2, -1)), 1)


@register("hinge", "gnn_rank")
def pairwise_hinge_loss(
    scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None
) -> jax.Array:
    """Paper eq. 2 with ``phi(z) = max(0, 1 - z)``: float[...], one value per list."""
    return _pairwise(lambda z: jnp.maximum(0.0, 1.0 - z), scores, targets, where)


@register("logistic", "gnn_logistic")
def pairwise_logistic_loss(
    scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None
) -> jax.Array:
    """Paper eq. 2 with ``phi(z) = log(1 + exp(-z))``: float[...], one value per list."""
    return _pairwise(lambda z: jax.nn.softplus(-z), scores, targets, where)


@register("listwise", "gnn_listwise")
def listwise_softmax_loss(
    scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None
) -> jax.Array:
    """Listwise loss: softmax cross-entropy putting all weight on the fastest configuration.

    `optax.losses.ranking_softmax_loss` on logits ``-scores`` (a low cost is a high logit) with
    relevance 1 for the list's fastest real configuration(s) and 0 elsewhere.
    """
    mask = _mask(targets, where)
    best = jnp.min(jnp.where(mask, targets, jnp.inf), axis=-1, keepdims=True)
    labels = (mask & (targets <= best)).astype(scores.dtype)
    loss = optax.losses.ranking_softmax_loss(-scores, labels, where=mask)
    return jnp.where(jnp.sum(mask, axis=-1) >= 2, loss, 0.0)


@register("mse", "gnn_mse", regression=True)
def mse_loss(scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None) -> jax.Array:
    """Mean squared error of ``scores`` against ``targets`` per list: the kernel task's loss (lists
    of one kernel: its squared error) and the tile task's regression baseline."""
    mask = _mask(targets, where)
    err = jnp.where(mask, (scores - targets) ** 2, 0.0)
    return jnp.sum(err, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1)


def get(name: str) -> Loss:
    """The loss function registered as ``name``; ValueError naming the choices otherwise."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")
    return LOSSES[name].fn


def regression_loss_name() -> str:
    """The name of the first registered regression loss (the model that predicts runtimes)."""
    return next(name for name, loss in LOSSES.items() if loss.regression)
