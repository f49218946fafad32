"""tpucost.experiments.programs.diffrax_models: diffrax ODE solves over Equinox MLPs become corpus programs."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

from tpucost.experiments.programs import (
    WRITTEN_BY_OTHERS,
    compile_program,
    count_kernels,
    diffrax_models,
    make_program,
)


def test_without_diffrax_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "diffrax", None)  # what `import diffrax` finds when it is not installed
    with pytest.raises(ImportError, match=r"tpucost\[corpus\]"):
        diffrax_models.import_diffrax()
    assert set(diffrax_models.DIFFRAX_FAMILIES) <= set(WRITTEN_BY_OTHERS)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(diffrax_models.DIFFRAX_FAMILIES))
def test_a_solve_is_a_corpus_program_with_finite_gradients(family):
    pytest.importorskip("diffrax")
    forward = make_program(family, "forward", 0, 1)
    out = compile_program(forward)(*forward.args)
    assert out.shape == forward.args[1]["target"].shape and np.isfinite(np.asarray(out)).all()
    grad = make_program(family, "grad", 0, 1)
    compiled = compile_program(grad)
    assert "while" in compiled.as_text() and count_kernels(compiled.as_text()) > 20  # the solver's step loop
    grads = jax.tree.leaves(compiled(*grad.args))
    assert grads and all(np.isfinite(np.asarray(g)).all() for g in grads)
    assert any(float(np.abs(np.asarray(g)).sum()) > 0 for g in grads)
