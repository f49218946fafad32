"""Tests for tpucost.method.losses: one signature, masks respected, the right direction of preference."""

import doctest

import jax.numpy as jnp
import numpy as np
import pytest

from tpucost.method import losses
from tpucost.method.tasks import kernel, tile

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

TARGETS = jnp.array([[1.0, 2.0, 3.0, 0.0]])
WHERE = jnp.array([[True, True, True, False]])


RANK_LOSSES = [name for name, loss in losses.LOSSES.items() if not loss.regression]


def test_the_registry_names_every_loss_once_with_its_model():
    assert RANK_LOSSES == ["hinge", "logistic", "listwise"] and losses.regression_loss_name() == "mse"
    names = [loss.model_name for loss in losses.LOSSES.values()]
    assert len(set(names)) == len(names)
    for name, loss in losses.LOSSES.items():
        assert loss.name == name and losses.get(name) is loss.fn
    with pytest.raises(ValueError, match="already registered"):
        losses.register("hinge", "gnn_other")(losses.pairwise_hinge_loss)


def test_one_registry_serves_both_tasks():
    # the kernel task's loss is the registered regression; the tile task (and its CLI choices)
    # may train with every registered loss, so Table 3 keeps one row per loss
    assert (
        kernel.LOSSES == (kernel.DEFAULT_LOSS,) == ("mse",) and losses.LOSSES[kernel.DEFAULT_LOSS].regression
    )
    assert tile.LOSSES == tuple(losses.LOSSES) == ("hinge", "logistic", "listwise", "mse")


def test_a_new_loss_is_one_decorated_function(monkeypatch):
    monkeypatch.setattr(losses, "LOSSES", dict(losses.LOSSES))

    @losses.register("squared_hinge", "gnn_squared_hinge")
    def squared_hinge(scores, targets, *, where=None):
        return losses.pairwise_hinge_loss(scores, targets, where=where) ** 2

    assert losses.get("squared_hinge") is squared_hinge and "squared_hinge" in losses.LOSSES


@pytest.mark.parametrize("name", RANK_LOSSES)
def test_rank_losses_prefer_the_true_order(name):
    loss = losses.get(name)
    right = loss(jnp.array([[0.0, 2.0, 4.0, 9.0]]), TARGETS, where=WHERE)
    wrong = loss(jnp.array([[4.0, 2.0, 0.0, 9.0]]), TARGETS, where=WHERE)
    assert right.shape == (1,)
    assert float(right[0]) < float(wrong[0])


@pytest.mark.parametrize("name", list(losses.LOSSES))
def test_padding_does_not_change_the_loss(name):
    loss = losses.get(name)
    scores = jnp.array([[0.3, -0.2, 0.9, 0.0]])
    padded = loss(scores, TARGETS, where=WHERE)
    garbage = loss(scores.at[0, 3].set(-50.0), TARGETS.at[0, 3].set(-7.0), where=WHERE)
    short = loss(scores[:, :3], TARGETS[:, :3])
    np.testing.assert_allclose(padded, garbage, rtol=1e-6)
    np.testing.assert_allclose(padded, short, rtol=1e-6)


def test_hinge_matches_paper_formula_by_hand():
    scores = jnp.array([[0.5, 0.0, 2.0]])
    targets = jnp.array([[2.0, 1.0, 3.0]])
    # pairs (i slower than j): (0,1): 1-(0.5-0)=0.5; (2,0): 1-1.5=0 -> 0; (2,1): 1-2 -> 0
    assert float(losses.pairwise_hinge_loss(scores, targets)[0]) == pytest.approx(0.5 / 3)


def test_lists_are_independent_and_short_lists_are_zero():
    scores = jnp.array([[0.0, 1.0], [5.0, 0.0]])
    targets = jnp.array([[1.0, 2.0], [1.0, 2.0]])
    out = losses.pairwise_logistic_loss(scores, targets, where=jnp.array([[True, True], [True, False]]))
    assert float(out[1]) == 0.0 and float(out[0]) > 0.0
    assert (
        float(losses.listwise_softmax_loss(scores, targets, where=jnp.array([[True, False]] * 2))[0]) == 0.0
    )


def test_mse_is_mean_squared_error_over_real_configs():
    out = losses.mse_loss(
        jnp.array([[1.0, 1.0, 7.0]]), jnp.array([[0.0, 3.0, 0.0]]), where=jnp.array([[True, True, False]])
    )
    assert float(out[0]) == pytest.approx((1 + 4) / 2)


def test_unknown_loss_names_the_choices():
    with pytest.raises(ValueError, match="hinge"):
        losses.get("nope")


def test_doctest():
    assert doctest.testmod(losses).failed == 0
