"""tpucost.experiments.programs.jraph_models: jraph's model zoo on random graphs becomes corpus programs."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tpucost.experiments.programs import WRITTEN_BY_OTHERS, compile_program, jraph_models, make_program


def _first_program(model: str, form: str):
    """The first program of ``jraph_gnn`` (seed 0) in ``form`` that draws ``model``."""
    for index in range(200):
        program = make_program("jraph_gnn", form, 0, index)
        if program.hparams["model"] == model:
            return program
    raise AssertionError(f"no jraph_gnn program of the first 200 draws {model}")


def test_the_family_is_written_by_others_and_records_only_what_its_model_uses():
    assert set(jraph_models.JRAPH_FAMILIES) <= set(WRITTEN_BY_OTHERS)
    for index in range(60):
        hp = make_program("jraph_gnn", "forward", 0, index).hparams
        assert ("heads" in hp) == (hp["model"] == "gat"), hp
        assert ("self_edges" in hp) == (hp["model"] == "gcn"), hp


def test_edges_are_ordered_by_graph_as_n_edge_counts_them():
    for index in range(6):
        b = make_program("jraph_gnn", "forward", 0, index).args[1]
        n_node, n_edge = np.asarray(b["n_node"]), np.asarray(b["n_edge"])
        graph_of_edge = np.repeat(np.arange(len(n_edge)), n_edge)  # jraph's reading of n_edge
        first_node = np.concatenate([[0], np.cumsum(n_node)])[graph_of_edge]
        for ends in (b["senders"], b["receivers"]):
            local = np.asarray(ends) - first_node
            assert n_edge.sum() == len(local) and ((local >= 0) & (local < n_node[graph_of_edge])).all()


@pytest.mark.slow
@pytest.mark.parametrize("model", jraph_models.JRAPH_MODELS)
def test_every_model_is_a_program_with_finite_gradients(model):
    forward = _first_program(model, "forward")
    out = compile_program(forward)(*forward.args)
    assert out.shape == (forward.hparams["graphs"], 1) and np.isfinite(np.asarray(out, np.float32)).all()
    grad = _first_program(model, "grad")
    compiled = compile_program(grad)
    text = compiled.as_text()
    assert "gather" in text and "scatter" in text  # jraph's per-edge gathers and segment sums
    grads = jax.tree.leaves(compiled(*grad.args))
    assert grads and all(np.isfinite(np.asarray(g, np.float32)).all() for g in grads)
    assert any(float(np.abs(np.asarray(g, np.float32)).sum()) > 0 for g in grads)
