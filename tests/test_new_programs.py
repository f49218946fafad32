"""The ten programs of `new_programs` (written after the corpus was frozen) compile, run and are not
corpus programs; `new_program_errors.py` scores a model on them."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from new_programs import NEW_PROGRAMS

from tpucost.experiments.programs import count_kernels


@pytest.mark.parametrize("name", list(NEW_PROGRAMS))
def test_each_new_program_compiles_and_runs(name):
    fn, args = NEW_PROGRAMS[name]()
    compiled = jax.jit(fn).lower(*args).compile()
    assert count_kernels(compiled.as_text()) >= 3
    out = jax.tree.leaves(compiled(*args))
    assert out and all(np.isfinite(np.asarray(x)).all() for x in out)


def test_there_are_ten():
    assert len(NEW_PROGRAMS) == 10
