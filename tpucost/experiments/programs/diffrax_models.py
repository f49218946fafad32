"""A family written by others, beyond Keras: neural ODE solves with diffrax and Equinox.

diffrax (Patrick Kidger's JAX library of ODE/SDE solvers) integrates a neural vector field, an
Equinox ``eqx.nn.MLP``; both the solver loops and the layers are maintained code written outside
this project, in a style unlike the corpus's own families: ``while`` loops with adaptive step
control, Runge-Kutta tableaus. One family:

``diffrax_ode``
    a neural ODE: ``dy/dt = mlp(y)`` from t=0 to 1, with a random explicit solver (Euler, Heun,
    Midpoint, Ralston, Bosh3, Tsit5, Dopri5), constant steps or (for the adaptive ones) a PID
    step-size controller, saving the final state or several times.

(A neural SDE family, ``diffrax_sde`` against a ``VirtualBrownianTree``, was tried and dropped:
its Brownian tree nests a search loop in every step, and measuring one 4 ms program took 114 s of
traced runs, where the ODEs take 1-2 s; an ``UnsafeBrownianPath`` cannot be differentiated.)

The batch of initial states is ``jax.vmap``-ed; the loss is the mean squared error to a target
(`tpucost.experiments.programs.corpus.loss_from_output`). f32 only (diffrax's step-size control assumes it).
diffrax and Equinox are collection-only dependencies: ``pip install "tpucost[corpus]"``; without
them, building such a program raises an ImportError that says so.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpucost.experiments.programs import blocks
from tpucost.experiments.programs.blocks import (
    WRITTEN_BY_OTHERS_GROUP,
    Batch,
    Model,
    Params,
    ProgramFamily,
    Variant,
)

__all__ = ["DIFFRAX_FAMILIES", "import_diffrax"]

_ACTIVATIONS = {"tanh": jnp.tanh, "softplus": jax.nn.softplus, "silu": jax.nn.silu}
_ODE_SOLVERS = ("Euler", "Heun", "Midpoint", "Ralston", "Bosh3", "Tsit5", "Dopri5")
_ADAPTIVE = ("Heun", "Bosh3", "Tsit5", "Dopri5")  # solvers with an error estimate


def import_diffrax() -> tuple[Any, Any]:
    """``(diffrax, equinox)``, or an ImportError naming the extra that installs them."""
    try:
        import diffrax
        import equinox
    except ImportError as e:
        raise ImportError(
            "the diffrax_* corpus families need diffrax and Equinox: pip install 'tpucost[corpus]' "
            "(a collection-only extra)"
        ) from e
    return diffrax, equinox


def _mlp(eqx: Any, rng: np.random.Generator, dim: int, hp: dict[str, Any]) -> tuple[Params, Any]:
    """An Equinox MLP ``dim -> dim`` split into (array leaves, static rest)."""
    key = jax.random.key(int(rng.integers(2**31)))
    mlp = eqx.nn.MLP(dim, dim, hp["width"], hp["depth"], activation=_ACTIVATIONS[hp["activation"]], key=key)
    return eqx.partition(mlp, eqx.is_array)


def _hparams(rng: np.random.Generator) -> dict[str, Any]:
    return {
        "batch": blocks.pick(rng, [8, 16, 32, 64]),
        "dim": blocks.pick(rng, [4, 8, 16, 32]),
        "width": blocks.pick(rng, [16, 32, 64, 128]),
        "depth": blocks.pick(rng, [1, 2, 3]),
        "activation": blocks.pick(rng, list(_ACTIVATIONS)),
    }


def diffrax_ode(rng: np.random.Generator) -> Model:
    """A neural ODE solved by diffrax (random solver, step control and save times)."""
    diffrax, eqx = import_diffrax()
    hp = _hparams(rng)
    hp["solver"] = blocks.pick(rng, _ODE_SOLVERS)
    hp["adaptive"] = hp["solver"] in _ADAPTIVE and blocks.pick(rng, [True, False])
    hp["steps"] = blocks.pick(rng, [8, 16, 32]) if not hp["adaptive"] else blocks.pick(rng, [32, 64])
    hp["saves"] = blocks.pick(rng, [1, 4])
    params, static = _mlp(eqx, rng, hp["dim"], hp)
    out_shape = (hp["batch"], hp["saves"], hp["dim"])
    batch = {
        "x": blocks.normal(rng, (hp["batch"], hp["dim"]), "float32"),
        "target": blocks.normal(rng, out_shape, "float32"),
    }
    solver = getattr(diffrax, hp["solver"])()
    if hp["adaptive"]:
        controller, dt0 = diffrax.PIDController(rtol=1e-3, atol=1e-5), 0.1
    else:
        controller, dt0 = diffrax.ConstantStepSize(), 1.0 / hp["steps"]
    saveat = diffrax.SaveAt(ts=jnp.linspace(1.0 / hp["saves"], 1.0, hp["saves"]))

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        field = eqx.combine(p, static)
        term = diffrax.ODETerm(lambda t, y, args: field(y))

        def one(y0: jax.Array) -> jax.Array:
            return diffrax.diffeqsolve(
                term,
                solver,
                0.0,
                1.0,
                dt0,
                y0,
                stepsize_controller=controller,
                max_steps=hp["steps"] + 1,
                saveat=saveat,
                throw=False,
            ).ys

        return jax.vmap(one)(b["x"])

    return Model(hp, params, batch, apply)


#: The registry records of the diffrax families, by name (written by others).
DIFFRAX_FAMILIES: dict[str, ProgramFamily] = {
    f.name: f
    for f in (ProgramFamily("diffrax_ode", diffrax_ode, WRITTEN_BY_OTHERS_GROUP, written_here=False),)
}
