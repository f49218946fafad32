"""Solutions to the exercises of notebook 03 (training and evaluating the cost model), and their self-checks.

``exercise_N`` solves exercise N and returns what it prints; ``check_N`` grades a learner's answer
against it (`tpucost.solutions.grading`).

The training exercises compare short runs: one run per setting says little, because two seeds of
the same setting differ too. They train every setting with several seeds and report the mean and
the spread; a difference smaller than the spread is noise.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pandas as pd
from flax import nnx

from tpucost.experiments import kernel_experiments
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data.kernel import KernelDataset
from tpucost.experiments.results import NOVELTY_PARTS
from tpucost.method import features, metrics, train
from tpucost.method.features import KernelGraph
from tpucost.method.models import GraphSAGE, ModelConfig
from tpucost.method.splits import Split
from tpucost.method.tasks import kernel
from tpucost.solutions.grading import (
    check_conclusion,
    check_runs,
    close,
    correct,
    not_attempted,
    quietly,
    require,
)


class Net(nnx.Module):
    """Section 5's program, a two-layer MLP with layer norm (the notebook defines the same class):
    built here too so that its TPU module can be bundled (`net_program`)."""

    def __init__(self, rngs: nnx.Rngs):
        self.a = nnx.Linear(96, 192, rngs=rngs)
        self.b = nnx.Linear(192, 48, rngs=rngs)
        self.norm = nnx.LayerNorm(48, rngs=rngs)

    def __call__(self, x):
        return jax.nn.log_softmax(self.norm(self.b(nnx.gelu(self.a(x)))))


def net_program(seed: int = 0) -> tuple[Callable[..., Any], tuple[jax.Array]]:
    """``(fn, (x,))``: section 5's ``Net`` applied to a 64 x 96 batch, as the notebook builds it."""
    net = Net(nnx.Rngs(seed))
    return (lambda x: net(x)), (jnp.ones((64, 96)),)


def sage_layer_by_hand(
    layer: Any, h: jax.Array, senders: jax.Array, receivers: jax.Array, reduce: str = "sum"
) -> jax.Array:
    """One GraphSAGE layer of `tpucost.method.models` (``neighbours="both"``) written out with jraph's segment ops.

    For each direction (a node's operands: edges j -> i; its users: edges i -> j), a message
    ``relu(W' h_j + b')`` per edge, reduced per node (sum, mean or max; 0 for a node without such
    neighbours); then ``relu(W [h_i, from operands, from users] + b)``, scaled to unit length.
    """
    n = h.shape[0]

    def dense(linear: Any, x: jax.Array) -> jax.Array:
        return x @ linear.kernel[...] + linear.bias[...]

    parts = [h]
    for direction, (src, dst) in (("operands", (senders, receivers)), ("users", (receivers, senders))):
        messages = jax.nn.relu(dense(layer.msg[direction], h))[src]  # one row per edge
        degree = jraph.segment_sum(jnp.ones(src.shape, h.dtype), dst, n)
        if reduce == "max":
            agg = jnp.where(degree[:, None] > 0, jraph.segment_max(messages, dst, n), 0.0)
        else:
            agg = jraph.segment_sum(messages, dst, n)
            if reduce == "mean":
                agg = agg / jnp.maximum(degree, 1.0)[:, None]
        parts.append(agg)
    out = jax.nn.relu(dense(layer.combine, jnp.concatenate(parts, axis=-1)))
    return out / jnp.sqrt(jnp.maximum(jnp.sum(out * out, axis=-1, keepdims=True), 1e-12))


def exercise_1(graphs: Sequence[KernelGraph], reduce: str = "mean", hidden: int = 16, seed: int = 0) -> float:
    """The hand-written layer with ``reduce`` ("mean" or "max") against the library's: largest difference."""
    model = GraphSAGE(ModelConfig(hidden=hidden, num_layers=1, reduce=reduce), nnx.Rngs(seed))
    batch, _, _ = features.pad_to_bucket(features.to_graphs_tuple(list(graphs)))
    h0 = model.encoder(batch.nodes["opcode"], batch.nodes["features"])
    mine = sage_layer_by_hand(model.layers[0], h0, batch.senders, batch.receivers, reduce)
    library = model.layers[0](h0, batch.senders, batch.receivers)
    diff = float(jnp.max(jnp.abs(mine - library)))
    print(f"reduce={reduce}: largest difference from models._SAGELayer {diff:.2e}")
    return diff


def exercise_2(
    ds: KernelDataset, max_programs: int | None = None, methods: Sequence[str] = kernel.METHODS
) -> pd.DataFrame:
    """Table 2 by novelty of the bundled models on the random split (held-out programs) and the hard
    split (held-out families), side by side: per (method, split, set of rows) the MAPE >=5us, Kendall
    tau and the rows and programs they rest on, for the structure-novel rows, the unseen rows and all
    rows (`tpucost.experiments.results.NOVELTY_PARTS`). ``max_programs`` scores only that many test programs per split."""
    rows = {}
    for split_name in ("random", "hard"):
        split = kernel_data.split(ds, split_name)
        if max_programs is not None:
            split = dataclasses.replace(split, test_ids=split.test_ids[:max_programs])
        model_dir = kernel.default_model_dir(split_name)
        for method in methods:
            m = kernel_experiments.evaluate_split(ds, split, kernel.load_method(model_dir, method).predict)
            for key, label in NOVELTY_PARTS:
                part = m if key is None else m[key]
                rows[(method, split_name, label)] = {
                    "MAPE >=5us (%)": part["mape_ge5us"],
                    "Kendall tau": part["kendall_median"],
                    "rows": part["n_kernels"],
                    "programs": part["n_programs"],
                }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.names = ["method", "split", "rows"]
    print(table.round(3).to_string())
    novel = table.xs("structure-novel", level="rows")["MAPE >=5us (%)"]
    for split_name in ("random", "hard"):
        figures = novel.xs(split_name, level="split").dropna()
        if len(figures):
            print(
                f"{split_name} split, structure-novel rows: lowest MAPE >=5us {figures.min():.1f}% ({figures.idxmin()})"
            )
    return table


def exercise_3(
    ds: KernelDataset, split: Split, predict: Callable[[list[KernelGraph]], np.ndarray]
) -> dict[str, Any]:
    """Per kernel kind: the median error on the test kernels and how many training kernels it has.

    Returns the table (with ``count``, the test kernels behind each median) and Kendall's tau between
    the median error and the training kernels of a kind (negative would mean: rarer kinds, larger errors).
    """
    test = np.asarray(split.test)
    pred = predict([ds.graph(int(i)) for i in test])
    table = metrics.error_by_kind(pred, ds.runtime_ns[test], ds.kind[test])
    train_counts = pd.Series(ds.kind[split.train]).value_counts()
    table["train kernels"] = [int(train_counts.get(k, 0)) for k in table.index]
    tau = metrics.kendall_tau(table["median_ape"], table["train kernels"])
    print(table[["median_ape", "count", "train kernels"]].round(1).to_string())
    print(f"Kendall tau (median APE vs training kernels of the kind): {tau:.2f}")
    return {"table": table, "kendall_tau": tau}


def brief_runs(
    ds: KernelDataset,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    models: dict[str, ModelConfig],
    seeds: Sequence[int] = (0, 1),
    train_kernels: int = 4000,
    epochs: int = 8,
) -> pd.DataFrame:
    """Notebook 03's brief training run for each model config and seed: best validation loss, epoch, seconds.

    Each seed draws its own training kernels and initialisation.
    """
    rows = []
    for name, model_config in models.items():
        for seed in seeds:
            subset = np.random.default_rng(seed).choice(
                train_idx, size=min(train_kernels, len(train_idx)), replace=False
            )
            task = kernel.KernelTask.fit(ds, subset, model_config)
            config = train.TrainConfig(model=model_config, epochs=epochs, patience=epochs, seed=seed)
            start = time.perf_counter()
            result = train.train_and_evaluate(task, config, subset, val_idx, progress=False)
            rows.append(
                {
                    "setting": name,
                    "seed": seed,
                    "best_val_loss": result.best_val_loss,
                    "best_epoch": result.best_epoch,
                    "seconds": time.perf_counter() - start,
                }
            )
    return pd.DataFrame(rows)


def _summary(runs: pd.DataFrame) -> pd.DataFrame:
    summary = runs.groupby("setting", sort=False)["best_val_loss"].agg(["mean", "std", "min", "max"])
    print(summary.round(4).to_string())
    print("A difference between settings smaller than the spread (std, min-max) between seeds is noise.")
    return summary


def exercise_4(
    ds: KernelDataset,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    reduces: Sequence[str] = ("sum", "mean", "max"),
    seeds: Sequence[int] = (0, 1, 2),
    base: ModelConfig | None = None,
    train_kernels: int = 4000,
    epochs: int = 8,
) -> pd.DataFrame:
    """The neighbour reduction (sum, mean, max), each trained with several seeds."""
    base = base or ModelConfig(hidden=64, num_layers=3)
    runs = brief_runs(
        ds,
        train_idx,
        val_idx,
        {r: dataclasses.replace(base, reduce=r) for r in reduces},
        seeds,
        train_kernels,
        epochs,
    )
    _summary(runs)
    return runs


def exercise_5(
    ds: KernelDataset,
    train_idx: np.ndarray,
    val_idx: np.ndarray,
    poolings: Sequence[tuple[str, ...]] = (("sum", "max"), ("mean",), ("mean", "max")),
    seeds: Sequence[int] = (0, 1, 2),
    base: ModelConfig | None = None,
    train_kernels: int = 4000,
    epochs: int = 8,
) -> pd.DataFrame:
    """Graph pooling: with and without the sum (which carries the kernel's size), several seeds each."""
    base = base or ModelConfig(hidden=64, num_layers=3)
    runs = brief_runs(
        ds,
        train_idx,
        val_idx,
        {"+".join(p): dataclasses.replace(base, pooling=tuple(p)) for p in poolings},
        seeds,
        train_kernels,
        epochs,
    )
    _summary(runs)
    return runs


# ---------------------------------------------------------------------------------------------
# Self-checks: ``check_N(answer, ...)`` grades exercise N (see `tpucost.solutions.grading`)
# ---------------------------------------------------------------------------------------------


def check_1(my_layer: Callable[..., Any], layer: Any, h: jax.Array, graph: jraph.GraphsTuple) -> bool:
    """A hand-written mean layer, ``my_layer(layer, h, senders, receivers)``, against ``layer``
    (a layer of a model built with ``reduce="mean"``)."""
    mine = my_layer(layer, h, graph.senders, graph.receivers)
    if mine is None:
        return not_attempted(1, "my_mean_layer to return your layer's output")
    mine = np.asarray(mine)
    library = np.asarray(layer(h, graph.senders, graph.receivers))
    require(
        mine.shape == library.shape, 1, f"your output has shape {mine.shape}, the layer's {library.shape}."
    )
    as_sum = np.asarray(sage_layer_by_hand(layer, h, graph.senders, graph.receivers, "sum"))
    require(
        not np.allclose(mine, as_sum, rtol=1e-5, atol=1e-6)
        or np.allclose(as_sum, library, rtol=1e-5, atol=1e-6),
        1,
        "that is still the sum: divide each node's summed messages by its number of neighbours in "
        "that direction (at least 1).",
    )
    require(
        np.allclose(mine, library, rtol=1e-5, atol=1e-6),
        1,
        f"largest difference {float(np.max(np.abs(mine - library))):.2e}. Count each direction's "
        "neighbours separately (operands: per receiver; users: per sender) and normalise after combine.",
    )
    return correct(1)


def check_2(hard_gnn_mape: float | None) -> bool:
    """The bundled GNN's median MAPE (kernels >= 5 us) on the hard split's structure-novel rows, from
    its evaluation.json."""
    if hard_gnn_mape is None:
        return not_attempted(2, "hard_gnn_mape to a percentage (a float)")
    stored = {
        name: json.loads((kernel.default_model_dir(name) / "evaluation.json").read_text())["results"]["gnn"]
        for name in ("random", "hard")
    }
    expected = stored["hard"]["structure_novel"]["mape_ge5us"]
    require(
        close(hard_gnn_mape, expected, 0.5)
        or not close(hard_gnn_mape, stored["random"]["structure_novel"]["mape_ge5us"], 0.5),
        2,
        "that is the random split's figure; load the hard split's models (SPLIT = 'hard').",
    )
    other_rows = (stored["hard"]["unseen"]["mape_ge5us"], stored["hard"]["mape_ge5us"])
    require(
        close(hard_gnn_mape, expected, 0.5) or not any(close(hard_gnn_mape, v, 0.5) for v in other_rows),
        2,
        "that is the figure on the unseen rows (or all rows); read the structure-novel column.",
    )
    require(
        close(hard_gnn_mape, expected, 0.5),
        2,
        "read the gnn row's 'MAPE >=5us' (a percentage) in the structure-novel column of Table 2 on the "
        "hard split's test programs.",
    )
    return correct(2)


def check_3(
    tau_rarity: float | None,
    ds: KernelDataset,
    split: Split,
    predict: Callable[[list[KernelGraph]], np.ndarray],
) -> bool:
    """Kendall's tau between a kind's median error on the test kernels and its training kernels."""
    if tau_rarity is None:
        return not_attempted(3, "tau_rarity to a float")
    answer = quietly(exercise_3, ds, split, predict)
    require(
        close(tau_rarity, answer["kendall_tau"], 0.05),
        3,
        "per kind: the median absolute percentage error over its test kernels, and its number of "
        "training kernels (ds.kind[split.train]); then one tau over the kinds.",
    )
    return correct(3, "How many test kernels does each median rest on?")


def _check_training_runs(
    exercise: int, runs: Any, settings: set[str], best: Any, real: Any, names: str
) -> bool:
    if runs is None or best is None or real is None:
        return not_attempted(exercise, names)
    check_runs(exercise, runs, "setting", "best_val_loss", settings)
    return check_conclusion(exercise, runs, "setting", "best_val_loss", True, best, real)


def check_4(reduce_runs: pd.DataFrame | None, best_reduce: str | None, lead_is_real: bool | None) -> bool:
    """The runs of exercise 4 and the two conclusions drawn from them: the reduction with the lowest
    mean validation loss, and whether its lead is larger than the spread between seeds."""
    return _check_training_runs(
        4,
        reduce_runs,
        {"sum", "mean", "max"},
        best_reduce,
        lead_is_real,
        "reduce_runs (your runs), best_reduce and lead_is_real",
    )


def check_5(pooling_runs: pd.DataFrame | None, best_pooling: str | None, lead_is_real: bool | None) -> bool:
    """As `check_4`, for the graph poolings (settings named like ``"sum+max"``)."""
    return _check_training_runs(
        5,
        pooling_runs,
        {"sum+max", "mean", "mean+max"},
        best_pooling,
        lead_is_real,
        "pooling_runs (your runs), best_pooling and lead_is_real",
    )
