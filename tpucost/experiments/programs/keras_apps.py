"""Families written by others: the image classifiers of ``keras.applications`` on Keras 3's JAX backend.

The families of `tpucost.experiments.programs.families` are written here, in one style; a model trained only
on them may learn that style rather than XLA. These families are maintained model code written by
the Keras team (``keras.applications``, untrained: ``weights=None``), at input sizes a 2-core CPU
runs in milliseconds. Each family draws a variant of one architecture (depth, width multiplier),
an input size at or above the architecture's minimum, a batch size, a class count and a dtype
policy (``float32``, or ``mixed_bfloat16``: bf16 compute, f32 variables), and returns a
`tpucost.experiments.programs.blocks.Model`, so the corpus turns it into the same three forms (forward, grad,
train step) under the same configurations as the families written here.

How a Keras model becomes a corpus program: its trainable variables are the parameters; its
non-trainable ones (batch-norm moving statistics, dropout seed state) travel in the batch under
``"state"``, so gradients and the optimizer see float parameters only. ``apply`` is Keras'
``stateless_call``: inference mode in the forward form, training mode (batch statistics, dropout)
inside the loss (``Variant.training``). The updated moving statistics are dropped, so the
compiled step does not compute them (a Keras ``fit`` would).

Keras is a collection-only dependency: ``pip install "tpucost[corpus]"``. Without it, building a
program of these families raises an ImportError that says so; nothing else in the package
imports Keras.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import jax
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

__all__ = ["KERAS_FAMILIES", "KerasArchitecture", "import_keras"]


@dataclasses.dataclass(frozen=True)
class KerasArchitecture:
    """One family: the ``keras.applications`` constructors it draws from and its input sizes.

    ``variants`` maps a variant name to (constructor name, extra keyword arguments).
    ``sizes`` are square input sizes (pixels); each is at least the architecture's minimum.
    """

    name: str
    variants: dict[str, tuple[str, dict[str, Any]]]
    sizes: tuple[int, ...]
    batches: tuple[int, ...] = (1, 2, 4)


def import_keras() -> Any:
    """Keras 3 on the JAX backend, or an ImportError naming the extra that installs it.

    Raises RuntimeError when Keras was already imported with another backend (``KERAS_BACKEND``).
    """
    os.environ.setdefault("KERAS_BACKEND", "jax")
    try:
        import keras
    except ImportError as e:
        raise ImportError(
            "the keras_* corpus families need Keras 3: pip install 'tpucost[corpus]' (a collection-only extra)"
        ) from e
    if keras.backend.backend() != "jax":
        raise RuntimeError(
            f"Keras runs on the {keras.backend.backend()!r} backend here; the keras_* families need "
            "KERAS_BACKEND=jax set before Keras is first imported"
        )
    return keras


_NO_PREPROCESSING = {"include_preprocessing": False}

ARCHITECTURES: tuple[KerasArchitecture, ...] = (
    KerasArchitecture("keras_resnet", {"resnet50": ("ResNet50", {})}, (32, 48, 64)),
    KerasArchitecture("keras_resnet_v2", {"resnet50v2": ("ResNet50V2", {})}, (32, 48, 64)),
    KerasArchitecture("keras_vgg", {"vgg16": ("VGG16", {}), "vgg19": ("VGG19", {})}, (32, 48, 64)),
    KerasArchitecture("keras_densenet", {"densenet121": ("DenseNet121", {})}, (32, 48)),
    KerasArchitecture(
        "keras_mobilenet",
        {f"alpha{a}": ("MobileNet", {"alpha": a}) for a in (0.25, 0.5, 0.75, 1.0)},
        (32, 64, 96),
    ),
    KerasArchitecture(
        "keras_mobilenet_v2",
        {f"alpha{a}": ("MobileNetV2", {"alpha": a}) for a in (0.35, 0.5, 0.75, 1.0)},
        (32, 64, 96),
    ),
    KerasArchitecture(
        "keras_mobilenet_v3",
        {
            f"{size.lower()}_alpha{a}{'_minimalistic' if m else ''}": (
                f"MobileNetV3{size}",
                {"alpha": a, "minimalistic": m, **_NO_PREPROCESSING},
            )
            for size in ("Small", "Large")
            for a in (0.75, 1.0)
            for m in (False, True)
        },
        (32, 64, 96),
    ),
    KerasArchitecture(
        "keras_efficientnet", {"b0": ("EfficientNetB0", {}), "b1": ("EfficientNetB1", {})}, (32, 64)
    ),
    KerasArchitecture(
        "keras_efficientnet_v2", {"b0": ("EfficientNetV2B0", {}), "b1": ("EfficientNetV2B1", {})}, (32, 64)
    ),
    KerasArchitecture("keras_convnext", {"tiny": ("ConvNeXtTiny", {})}, (32, 64)),
    KerasArchitecture("keras_xception", {"xception": ("Xception", {})}, (71, 96)),
    KerasArchitecture("keras_inception_v3", {"inception_v3": ("InceptionV3", {})}, (75, 96)),
    KerasArchitecture(
        "keras_inception_resnet_v2", {"inception_resnet_v2": ("InceptionResNetV2", {})}, (75,), (1, 2)
    ),
    KerasArchitecture("keras_nasnet", {"nasnet_mobile": ("NASNetMobile", {})}, (32, 64)),
)


def _build(keras: Any, arch: KerasArchitecture, hp: dict[str, Any], seed: int) -> Any:
    """The untrained Keras model of ``hp``, built under its dtype policy (then the policy is restored)."""
    constructor, kwargs = arch.variants[hp["variant"]]
    previous = keras.config.dtype_policy()
    keras.utils.set_random_seed(seed)
    keras.config.set_dtype_policy(hp["dtype_policy"])
    try:
        return getattr(keras.applications, constructor)(
            weights=None,
            input_shape=(hp["size"], hp["size"], 3),
            classes=hp["classes"],
            classifier_activation=None,
            **kwargs,
        )
    finally:
        keras.config.set_dtype_policy(previous)


def keras_family(arch: KerasArchitecture) -> Callable[[np.random.Generator], Model]:
    """The family generator (``rng -> Model``) of one ``keras.applications`` architecture."""

    def generate(rng: np.random.Generator) -> Model:
        hp = {
            "variant": blocks.pick(rng, list(arch.variants)),
            "size": blocks.pick(rng, arch.sizes),
            "batch": blocks.pick(rng, arch.batches),
            "classes": blocks.pick(rng, [10, 100]),
            "dtype_policy": blocks.pick(rng, ["float32", "float32", "mixed_bfloat16"]),
        }
        keras = import_keras()
        model = _build(keras, arch, hp, seed=int(rng.integers(2**31)))
        hp["parameters"] = int(sum(np.prod(v.shape) for v in model.trainable_variables))
        params: Params = {"weights": [v.value for v in model.trainable_variables]}
        batch: Batch = {
            "x": blocks.normal(rng, (hp["batch"], hp["size"], hp["size"], 3), "float32"),
            "labels": blocks.labels(rng, (hp["batch"],), hp["classes"]),
            "state": [v.value for v in model.non_trainable_variables],  # type: ignore[dict-item]
        }

        def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
            logits, _ = model.stateless_call(p["weights"], b["state"], b["x"], training=v.training)
            return logits

        return Model(hp, params, batch, apply)

    generate.__name__ = arch.name
    generate.__qualname__ = arch.name
    generate.__doc__ = f"``keras.applications`` {', '.join(dict.fromkeys(c for c, _ in arch.variants.values()))} (Keras team)."
    return generate


#: The registry records of the ``keras.applications`` families, by family name (written by others).
KERAS_FAMILIES: dict[str, ProgramFamily] = {
    arch.name: ProgramFamily(arch.name, keras_family(arch), WRITTEN_BY_OTHERS_GROUP, written_here=False)
    for arch in ARCHITECTURES
}
