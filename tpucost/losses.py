"""Losses for ranking the configurations of one kernel (the paper's tile-size task).

Every loss has one signature, like optax's ranking losses::

    loss(scores, targets, *, where=None) -> float[..., ]   # one value per list

``scores`` float[..., C] are the model's *costs* for the C configurations of each kernel (higher =
slower), ``targets`` float[..., C] the measured costs on any increasing scale (we use standardised
log runtime), and ``where`` bool[..., C] marks real configurations (padding is False). The last
axis is one kernel's list of configurations; a loss never compares configurations of different
kernels (their runtimes are not comparable). A list with fewer than two real configurations has
loss 0.

>>> import jax.numpy as jnp
>>> scores = jnp.array([[0.0, 1.0, 2.0]])          # the model ranks config 0 fastest
>>> targets = jnp.array([[1.0, 2.0, 3.0]])         # ... and so it is
>>> float(pairwise_hinge_loss(scores, targets)[0])
0.0

Paper (Kaufman et al. 2021, eq. 2): ``L = sum_{i,j} [y_i > y_j] phi(y'_i - y'_j)`` with
``phi(z) = max(0, 1 - z)`` (hinge) or ``log(1 + exp(-z))`` (logistic). We average over the
ordered pairs of each list instead of summing, so a kernel with many configurations does not
outweigh one with few.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

__all__ = [
    "pairwise_hinge_loss",
    "pairwise_logistic_loss",
    "listwise_softmax_loss",
    "mse_loss",
    "LOSSES",
    "rank_loss",
]

Loss = Callable[..., jax.Array]


def _mask(targets: jax.Array, where: jax.Array | None) -> jax.Array:
    return jnp.ones(targets.shape, bool) if where is None else jnp.asarray(where, bool)


def _pairwise(phi: Callable[[jax.Array], jax.Array], scores: jax.Array, targets: jax.Array,
              where: jax.Array | None) -> jax.Array:
    """Mean of ``phi(s_i - s_j)`` over the real pairs (i, j) of each list with ``t_i > t_j``."""
    mask = _mask(targets, where)
    slower = targets[..., :, None] > targets[..., None, :]  # [..., C, C]: i slower than j
    pairs = slower & mask[..., :, None] & mask[..., None, :]
    diff = scores[..., :, None] - scores[..., None, :]
    total = jnp.sum(jnp.where(pairs, phi(diff), 0.0), axis=(-2, -1))
    return total / jnp.maximum(jnp.sum(pairs, axis=(-2, -1)), 1)


def pairwise_hinge_loss(scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None) -> jax.Array:
    """Paper eq. 2 with ``phi(z) = max(0, 1 - z)``: float[...], one value per list."""
    return _pairwise(lambda z: jnp.maximum(0.0, 1.0 - z), scores, targets, where)


def pairwise_logistic_loss(scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None) -> jax.Array:
    """Paper eq. 2 with ``phi(z) = log(1 + exp(-z))``: float[...], one value per list."""
    return _pairwise(lambda z: jax.nn.softplus(-z), scores, targets, where)


def listwise_softmax_loss(scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None) -> jax.Array:
    """Listwise loss: softmax cross-entropy putting all weight on the fastest configuration.

    `optax.losses.ranking_softmax_loss` on logits ``-scores`` (a low cost is a high logit) with
    relevance 1 for the list's fastest real configuration(s) and 0 elsewhere.
    """
    mask = _mask(targets, where)
    best = jnp.min(jnp.where(mask, targets, jnp.inf), axis=-1, keepdims=True)
    labels = (mask & (targets <= best)).astype(scores.dtype)
    loss = optax.losses.ranking_softmax_loss(-scores, labels, where=mask)
    return jnp.where(jnp.sum(mask, axis=-1) >= 2, loss, 0.0)


def mse_loss(scores: jax.Array, targets: jax.Array, *, where: jax.Array | None = None) -> jax.Array:
    """The regression baseline: mean squared error of ``scores`` against ``targets`` per list."""
    mask = _mask(targets, where)
    err = jnp.where(mask, (scores - targets) ** 2, 0.0)
    return jnp.sum(err, axis=-1) / jnp.maximum(jnp.sum(mask, axis=-1), 1)


#: Loss name -> loss function (one signature for all).
LOSSES: dict[str, Loss] = {
    "hinge": pairwise_hinge_loss,
    "logistic": pairwise_logistic_loss,
    "listwise": listwise_softmax_loss,
    "mse": mse_loss,
}


def rank_loss(name: str) -> Loss:
    """The loss called ``name`` (a key of `LOSSES`); ValueError naming the choices otherwise."""
    if name not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")
    return LOSSES[name]
