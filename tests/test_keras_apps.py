"""tpucost.experiments.programs.keras_apps: keras.applications models become corpus programs (the corpus extra)."""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

from tpucost.experiments.programs import (
    WRITTEN_BY_OTHERS,
    compile_program,
    count_kernels,
    keras_apps,
    make_program,
)
from tpucost.experiments.programs.blocks import Variant

pytestmark = pytest.mark.core  # also on Colab's Keras and jax (the corpus extra's lower bound)


def test_without_keras_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", None)  # what `import keras` finds when it is not installed
    with pytest.raises(ImportError, match=r"tpucost\[corpus\]"):
        keras_apps.import_keras()


def test_every_architecture_is_a_family_with_its_minimum_sizes():
    assert WRITTEN_BY_OTHERS[: len(keras_apps.ARCHITECTURES)] == tuple(
        a.name for a in keras_apps.ARCHITECTURES
    )
    minimum = {"Xception": 71, "InceptionV3": 75, "InceptionResNetV2": 75}  # keras.applications' checks
    for arch in keras_apps.ARCHITECTURES:
        for constructor, _ in arch.variants.values():
            assert min(arch.sizes) >= minimum.get(constructor, 32), (arch.name, constructor)


def _need_keras() -> None:
    try:
        keras_apps.import_keras()  # sets KERAS_BACKEND=jax first (pytest.importorskip would not)
    except ImportError:
        pytest.skip("Keras is not installed (the corpus extra)")


@pytest.mark.slow
def test_a_keras_model_is_a_corpus_program_with_a_training_mode():
    _need_keras()
    forward = make_program("keras_mobilenet", "forward", 0, 0)
    assert forward.hparams["parameters"] > 0 and forward.hparams["variant"].startswith("alpha")
    logits = compile_program(forward)(*forward.args)
    assert logits.shape == (forward.hparams["batch"], forward.hparams["classes"])
    assert count_kernels(compile_program(forward).as_text()) > 20
    # training mode computes batch statistics (reductions); inference mode uses the moving ones
    model = keras_apps.KERAS_FAMILIES["keras_mobilenet"](np.random.default_rng(3))

    def reductions(training: bool) -> int:
        run = lambda p, b: model.apply(p, b, Variant(training=training))  # noqa: E731
        return jax.jit(run).lower(model.params, model.batch).as_text().count("stablehlo.reduce")

    assert reductions(True) > reductions(False)


@pytest.mark.slow
def test_a_keras_program_has_gradients_for_every_weight():
    _need_keras()
    grad = make_program("keras_mobilenet", "grad", 0, 0)
    grads = compile_program(grad)(*grad.args)
    weights = grad.args[0]["weights"]
    assert [g.shape for g in grads["weights"]] == [w.shape for w in weights]
    assert all(np.isfinite(np.asarray(g, np.float32)).all() for g in grads["weights"])
