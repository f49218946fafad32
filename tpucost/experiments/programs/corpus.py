"""The corpus: program ids, forms and configurations over the families, and how to compile them.

The paper measured kernels from 104 production programs, each compiled under many *fusion
configurations* (different ways of cutting the same program into kernels). This package is the
tutorial-sized stand-in: *families* of programs (`tpucost.experiments.programs.families`: 14 architectures
and ``random_ops`` written with `tpucost.experiments.programs.blocks`, and 16 of model code written by
others, ``WRITTEN_BY_OTHERS``), each a generator that draws random
hyperparameters (shapes, widths, depths, dtype f32 or bf16) from a ``numpy.random.Generator``,
in three *forms*:

- ``forward``: ``fn(params, batch) -> output``, the model applied to a batch;
- ``grad``: ``fn(params, batch) -> grads``, ``jax.grad`` of a scalar loss w.r.t. the parameters;
- ``train_step``: ``fn(params, opt_state, batch) -> (params, opt_state, loss)``, one optax update
  (adam, adamw or sgd, chosen at random).

Programs are plain ``jax.numpy``/``lax`` over explicit parameter pytrees (dicts of arrays): that
compiles fastest and keeps the HLO easy to read. They contain no backend-specific code, so they
run on CPU, GPU and TPU; bf16 works on CPU too. Every program is small enough for a 2-core CPU:
tensors of 1e3..1e6 elements; on the 2-core machine (seed 0, default configuration) compiling took
0.55 s median and 2.1 s at most (CPU time; the slowest are bf16 grad/train_step programs of the
attention and convolution families, where XLA:CPU wraps most ops in f32 converts), and a run took
0.7 ms median and 19 ms at most.

Families (``FAMILIES``, the registry of `tpucost.experiments.programs.families`)::

    ``mlp``                    dense layers with a random activation, softmax cross-entropy loss.
    ``cnn``                    conv -> batch norm -> relu -> max/avg pooling blocks, then a classifier.
    ``resnet_block``           residual blocks (conv-bn-relu-conv-bn + skip, strided 1x1 projection).
    ``mobilenet_block``        inverted residuals: 1x1 expand, depthwise 3x3 (feature_group_count), 1x1 project.
    ``unet``                   strided-conv down-sampling, conv-transpose up-sampling, skip concatenations.
    ``transformer_encoder``    pre/post-norm multi-head attention + MLP layers with a key-padding mask.
    ``causal_decoder``         token embedding, causally masked attention, next-token cross-entropy.
    ``lstm``                   an LSTM cell run over time with ``lax.scan``.
    ``gru``                    a GRU cell run over time with ``lax.scan``.
    ``embedding_scatter``      embedding-bag: gather rows, pool them with segment_sum or scatter-add.
    ``graph_message_passing``  edge MLP on gathered node pairs, ``segment_sum``/``segment_max`` to nodes.
    ``nerf_mlp``               sin/cos positional encoding of 3-d points, MLP with a skip, rgb + density.
    ``norm_softmax``           layernorm / rmsnorm / softmax / log-softmax chains (memory-bound kernels).
    ``random_ops``             random chains of sorts, FFTs, scatters, cumulative, bit, window,
                               linear-algebra and other ops (`tpucost.experiments.programs.random_ops`).
    ``hashed_embedding``       integer hashing of categorical ids into a table, pooling, MLP;
                               dropout from XLA's stateful generator (not in ``DEFAULT_FAMILIES``).
    ``keras_*``                14 ``keras.applications`` image classifiers (`tpucost.experiments.programs.keras_apps`).
    ``diffrax_ode``            neural ODEs solved by diffrax (`tpucost.experiments.programs.diffrax_models`).

Configurations (``CONFIGURATIONS``)
    A :class:`CompileConfig` holds XLA compile options and program-level choices (``Variant``).
    Checked on a 2-core x86 CPU, jax/jaxlib 0.10.2, with ``python -m tpucost.experiments.programs`` (the
    first 39 programs of seed 0 over the 13 architecture families of ``DEFAULT_FAMILIES``: each in 3
    forms; ``random_ops`` came later). A configuration *changes* a program when
    its multiset of kernels (``kernel_signatures``: shape, opcode or fusion kind and the ops
    inside) differs from the default's. Per line: programs changed / programs it applies to,
    programs whose kernel *count* changed, and total kernels default -> configuration.

    ::

      ``default``            XLA's own choice. On CPU, dots with their elementwise neighbours and
                             many reductions become YNNPACK fusions (``__ynn_fusion``, kind kCustom);
                             the rest are XLA loop fusions; convolutions run alone.
      ``no_fusion``          ``xla_disable_hlo_passes=fusion``: XLA's loop fusion off, YNNPACK
                             fusions kept. 39/39 changed, 39 counts, 2731 -> 8885 kernels.
      ``no_library_fusion``  YNNPACK/XNNPACK fusion types emptied: dots run alone (Eigen) and XLA
                             fuses the elementwise ops. 38/39 changed (unet forward has no dot),
                             21 counts, 2731 -> 2621.
      ``no_fusion_at_all``   both: about one kernel per HLO op. 39/39, 39 counts, 2731 -> 9205.
      ``ynn_dot_only``       ``xla_cpu_experimental_ynn_fusion_type=LIBRARY_FUSION_TYPE_DOT``: YNNPACK
                             fuses dots only, no elementwise/reduce fusions. 34/39, 29 counts, 2731 -> 2571.
      ``remat_nothing``      train_step only: the loss under ``jax.checkpoint(policy=nothing_saveable)``,
                             so the forward pass runs twice. 13/13, 12 counts, 1423 -> 1544.
                             (On grad forms it changed only where a constant factor sat: the
                             recomputed forward pass is dead code when the loss value is unused.)
      ``remat_dots``         grad and train_step: ``jax.checkpoint(policy=dots_saveable)``: elementwise
                             results are recomputed in the backward pass. 26/26, 22 counts, 2446 -> 2665
                             (in the 4 without a count change, fusions gained reduce-precision
                             ops, which jax.checkpoint adds, and recomputed elementwise ops).
      ``scan_unroll``        lstm/gru only: ``lax.scan(unroll=4)``. 6/6, 6 counts, 387 -> 710.

    On a TPU (libtpu's options, undocumented flags of its fusion passes; accepted by libtpu 0.0.23
    and 0.0.42.1 and checked against the installed libtpu by `compile_option_configurations`;
    measured by compiling example:mixer and example:nnx_vit for v5e, kernels default -> configuration):

      ``tpu_no_conv_input_fusion``    ``xla_jf_conv_input_fusion=false``: mixer 133 -> 166, nnx_vit 339 -> 385.
      ``tpu_no_conv_output_fusion``   ``xla_jf_conv_output_fusion=false``: same kernel count, other fusions (and other estimates: nnx_vit 251 -> 236 us).
      ``tpu_no_multi_output_fusion``  ``xla_jf_enable_multi_output_fusion=false``: 133 -> 163, 339 -> 389.

    Accepted but without effect on these programs: ``xla_disable_hlo_passes=fusion`` (the TPU's
    fusion passes have other names), ``xla_tpu_dot_dot_fusion``, ``xla_tpu_enable_copy_fusion``.

    Tried and dropped. Identical optimized HLO on a dense + softmax + conv test program:
    ``xla_cpu_enable_fast_math``, ``xla_backend_optimization_level=0``, ``xla_cpu_use_xnnpack=False``,
    ``xla_cpu_use_fusion_emitters=False``, ``xla_cpu_max_isa=SSE4_2``,
    ``xla_cpu_parallel_codegen_split_count=1``, ``xla_cpu_prefer_vector_width=128``,
    ``xla_cpu_experimental_xnn_fusion_type`` alone, ``..._ynn_fusion_type=LIBRARY_FUSION_TYPE_REDUCE``
    alone (``DOT,ELTWISE,REDUCE`` gave the default's HLO), ``xla_disable_hlo_passes=cpu-instruction-fusion``.
    ``..._ynn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT`` cut programs exactly like
    ``no_library_fusion`` (only the dot's library differed). ``xla_cpu_use_thunk_runtime`` no longer
    exists (INVALID_ARGUMENT: No such compile option); enum options take full names
    (``LIBRARY_FUSION_TYPE_DOT``, not ``dot``). ``lax.optimization_barrier`` changes nothing
    (shared notes). The compile options were checked on XLA:CPU only, not on GPU or TPU: which
    backend a configuration's options belong to is `tpucost.method.backends.Backend.compile_configurations`,
    and :func:`applicable_configurations` asks it (and the installed jaxlib: `buildable`).

Example::

    from tpucost.experiments.programs import generate_programs, compile_program
    for program in generate_programs(39, seed=0):
        compiled = compile_program(program, "no_fusion")
        out = compiled(*program.args)
"""

from __future__ import annotations

import collections
import dataclasses
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import optax

from tpucost.compat import LIBRARY_FUSION_OPTIONS, unsupported_compile_options
from tpucost.experiments import compiler
from tpucost.experiments.programs import blocks
from tpucost.experiments.programs.blocks import Batch, Model, Params, PyTree, Variant
from tpucost.experiments.programs.families import DEFAULT_FAMILIES, FAMILIES
from tpucost.method import backends
from tpucost.method.device import warn_once
from tpucost.method.hlo import parse_module
from tpucost.method.kernels import Kernel, decompose
from tpucost.method.measure import compile_fn

__all__ = [
    "FORMS",
    "CompileConfig",
    "Program",
    "loss_from_output",
    "make_program",
    "parse_program_id",
    "program_from_id",
    "program_ids",
    "generate_programs",
    "CONFIGURATIONS",
    "buildable",
    "configurations_for",
    "applicable_configurations",
    "compile_option_configurations",
    "compile_program",
    "kernel_signatures",
    "count_kernels",
    "survey",
]

FORMS: tuple[str, ...] = ("forward", "grad", "train_step")


def loss_from_output(out: jax.Array, batch: Batch) -> jax.Array:
    """Scalar f32 loss: softmax cross-entropy if the batch has ``labels``, else MSE to ``target``."""
    out = out.astype(jnp.float32)
    if "labels" in batch:
        return optax.softmax_cross_entropy_with_integer_labels(out, batch["labels"]).mean()
    return jnp.mean((out - batch["target"].astype(jnp.float32)) ** 2)


def _loss_fn(model: Model, variant: Variant) -> Callable[[Params, Batch], jax.Array]:
    training = dataclasses.replace(variant, training=True)

    def loss(params: Params, batch: Batch) -> jax.Array:
        return loss_from_output(model.apply(params, batch, training), batch)

    return blocks.remat(loss, variant.remat)


def _optimizer(hp: Mapping[str, Any]) -> optax.GradientTransformation:
    if hp["optimizer"] == "adam":
        return optax.adam(hp["learning_rate"])
    if hp["optimizer"] == "adamw":
        return optax.adamw(hp["learning_rate"], weight_decay=1e-4)
    return optax.sgd(hp["learning_rate"], momentum=0.9)


def _build_fn(model: Model, form: str, variant: Variant) -> Callable[..., Any]:
    """The jittable function of ``form`` for ``model`` (see the module docstring for signatures)."""
    if form == "forward":
        return lambda params, batch: model.apply(params, batch, variant)
    loss = _loss_fn(model, variant)
    if form == "grad":
        return jax.grad(loss)
    return blocks.train_step(loss, _optimizer(model.hparams))


def make_program(family: str, form: str, seed: int, index: int) -> Program:
    """Build program number ``index`` of the corpus for ``seed``: a pure function of its arguments."""
    rng = np.random.default_rng([seed, index, zlib.crc32(family.encode()), FORMS.index(form)])
    model = FAMILIES[family].generate(rng)
    hparams = dict(model.hparams)
    args: tuple[PyTree, ...] = (model.params, model.batch)
    if form == "train_step":
        hparams["optimizer"] = blocks.pick(rng, ["adam", "adamw", "sgd"])
        hparams["learning_rate"] = blocks.pick(rng, [1e-4, 1e-3, 1e-2])
        opt_state = jax.jit(_optimizer(hparams).init)(model.params)  # one compile, not one per array
        args = (model.params, opt_state, model.batch)
    model = dataclasses.replace(model, hparams=hparams)
    build = lambda variant: _build_fn(model, form, variant)  # noqa: E731
    return Program(f"{family}-{form}-{seed}-{index}", family, form, hparams, build(Variant()), args, build)


def parse_program_id(program_id: str) -> tuple[str, str, int, int]:
    """``(family, form, seed, index)`` of a corpus program id, ``<family>-<form>-<seed>-<index>``.

    Raises ValueError naming the id when it is not a corpus program id.
    """
    parts = program_id.rsplit("-", 3)
    if (
        len(parts) != 4
        or parts[0] not in FAMILIES
        or parts[1] not in FORMS
        or not all(p.isdigit() for p in parts[2:])
    ):
        raise ValueError(
            f"{program_id!r} is not a corpus program id (<family>-<form>-<seed>-<index>, "
            f"family one of {tuple(FAMILIES)}, form one of {FORMS})"
        )
    return parts[0], parts[1], int(parts[2]), int(parts[3])


def program_from_id(program_id: str) -> Program:
    """Rebuild a corpus program from its id (see `parse_program_id` and `make_program`).

    Raises ValueError naming the id when it is not a corpus program id.
    """
    return make_program(*parse_program_id(program_id))


def program_ids(n: int, seed: int = 0, families: Sequence[str] | None = None) -> list[str]:
    """The ids of the first ``n`` programs of ``seed`` over ``families``, without building them.

    Program ``i`` is family ``families[i % F]`` in form ``FORMS[(i // F) % 3]``, so every prefix of
    ``3 * F`` programs (42 with the 14 ``DEFAULT_FAMILIES``, the default) holds each family in
    each form exactly once. The other families (``WRITTEN_BY_OTHERS``, ``hashed_embedding``) are
    asked for by name.
    """
    families = tuple(DEFAULT_FAMILIES if families is None else families)
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown families {sorted(unknown)}; choose from {tuple(FAMILIES)}")
    return [
        f"{families[i % len(families)]}-{FORMS[(i // len(families)) % len(FORMS)]}-{seed}-{i}"
        for i in range(n)
    ]


def generate_programs(n: int, seed: int = 0, families: Sequence[str] | None = None) -> Iterator[Program]:
    """Yield the ``n`` programs of :func:`program_ids` (the same ids and hparams for the same
    ``seed`` and ``families``), each built when it is reached."""
    for program_id in program_ids(n, seed, families):
        yield program_from_id(program_id)


@dataclasses.dataclass(frozen=True)
class CompileConfig:
    """One way of cutting a program into kernels (the paper's "fusion configuration").

    ``compiler_options`` go to ``jax.jit(fn).lower(*args).compile(compiler_options=...)``;
    ``variant`` rebuilds the program itself. ``families``/``forms`` restrict where the
    configuration applies (``None``: everywhere); a configuration with compiler options applies
    only on the backends whose record lists it (`tpucost.method.backends.Backend.compile_configurations`).
    """

    name: str
    description: str
    compiler_options: Mapping[str, str | bool | int] = dataclasses.field(default_factory=dict)
    variant: Variant = Variant()
    families: tuple[str, ...] | None = None
    forms: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Program:
    """One program of the corpus: a jittable ``fn`` and concrete ``args`` to run it on.

    ``args`` is a tuple of pytrees (dicts) of concrete jax arrays, created deterministically from
    the seed; ``fn(*args)`` runs the program. Programs compare equal by id.
    """

    program_id: str
    family: str
    form: str
    hparams: dict[str, Any] = dataclasses.field(compare=False)
    fn: Callable[..., Any] = dataclasses.field(compare=False, repr=False)
    args: tuple[PyTree, ...] = dataclasses.field(compare=False, repr=False)
    build: Callable[[Variant], Callable[..., Any]] = dataclasses.field(compare=False, repr=False)

    def configured_fn(self, config: str = "default") -> Callable[..., Any]:
        """The program's function as configuration ``config``'s variant builds it."""
        variant = CONFIGURATIONS[config].variant
        return self.fn if variant == Variant() else self.build(variant)

    def configured(self, config: str = "default") -> tuple[Callable[..., Any], dict[str, Any]]:
        """The program's function as ``config`` builds it, and the compiler options to compile it with."""
        return self.configured_fn(config), dict(CONFIGURATIONS[config].compiler_options)

    def lower(self, config: str = "default") -> jax.stages.Lowered:
        """Trace and lower the program as ``config``'s variant (no XLA optimization yet)."""
        return jax.jit(self.configured_fn(config)).lower(*self.args)

    def compile(self, config: str = "default") -> jax.stages.Compiled:
        """Lower and compile under configuration ``config`` (see :func:`compile_program`)."""
        return compile_program(self, config)


_NO_LIBRARY = dict.fromkeys(LIBRARY_FUSION_OPTIONS, "")
_TRAINING = ("grad", "train_step")

CONFIGURATIONS: dict[str, CompileConfig] = {
    c.name: c
    for c in (
        CompileConfig("default", "XLA's default fusion decisions"),
        CompileConfig(
            "no_fusion",
            "XLA's loop/input fusion pass disabled",
            {"xla_disable_hlo_passes": "fusion"},
        ),
        CompileConfig(
            "no_library_fusion",
            "YNNPACK/XNNPACK fusions off: dots alone, XLA fuses the rest",
            _NO_LIBRARY,
        ),
        CompileConfig(
            "no_fusion_at_all",
            "XLA fusion and library fusions off",
            {**_NO_LIBRARY, "xla_disable_hlo_passes": "fusion"},
        ),
        CompileConfig(
            "ynn_dot_only",
            "YNNPACK fuses dots with neighbours; no elementwise/reduce fusions",
            {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"},
        ),
        CompileConfig(
            "tpu_no_conv_input_fusion",
            "TPU: producers not fused into the inputs of dots and convolutions",
            {"xla_jf_conv_input_fusion": False},
        ),
        CompileConfig(
            "tpu_no_conv_output_fusion",
            "TPU: consumers not fused into the outputs of dots and convolutions",
            {"xla_jf_conv_output_fusion": False},
        ),
        CompileConfig(
            "tpu_no_multi_output_fusion",
            "TPU: no fusion with several outputs",
            {"xla_jf_enable_multi_output_fusion": False},
        ),
        CompileConfig(
            "remat_nothing",
            "jax.checkpoint(loss, policy=nothing_saveable): forward run twice",
            variant=Variant(remat="nothing_saveable"),
            forms=("train_step",),
        ),
        CompileConfig(
            "remat_dots",
            "jax.checkpoint(loss, policy=dots_saveable)",
            variant=Variant(remat="dots_saveable"),
            forms=_TRAINING,
        ),
        CompileConfig(
            "scan_unroll",
            "lax.scan(..., unroll=4) in recurrent families",
            variant=Variant(scan_unroll=4),
            families=("lstm", "gru"),
        ),
    )
}


def buildable(config_name: str) -> bool:
    """Whether the installed jaxlib accepts every XLA option of configuration ``config_name``.

    Each jaxlib has its own set of options (jaxlib 0.7.2, Colab's, has no YNNPACK ones). The first
    time a configuration is found unbuildable, one note names every configuration skipped here.
    """
    if not unsupported_compile_options(CONFIGURATIONS[config_name].compiler_options):
        return True
    skipped = {name: unsupported_compile_options(c.compiler_options) for name, c in CONFIGURATIONS.items()}
    skipped = {name: missing for name, missing in skipped.items() if missing}
    options = sorted({option for missing in skipped.values() for option in missing})
    warn_once(
        f"tpucost: jaxlib {jaxlib.__version__} has no compile option {', '.join(map(repr, options))}, so the "
        f"configurations {', '.join(skipped)} are skipped here",
        key="unbuildable configurations",
        stacklevel=3,
    )
    return False


def _on_backend(config: CompileConfig, platform: str) -> bool:
    """Whether ``config`` applies on ``platform``: no compile options, or options of that backend."""
    return not config.compiler_options or config.name in backends.backend(platform).compile_configurations


def configurations_for(family: str, form: str, platform: str | None = None) -> list[str]:
    """Names of the configurations that apply to programs of ``family`` in ``form`` on ``platform``
    (default: JAX's backend). On JAX's own backend, configurations this jaxlib cannot build are
    left out (see `buildable`)."""
    here = jax.default_backend()
    platform = platform or here
    return [
        name
        for name, c in CONFIGURATIONS.items()
        if (c.families is None or family in c.families)
        and (c.forms is None or form in c.forms)
        and _on_backend(c, platform)
        and (platform != here or buildable(name))
    ]


def applicable_configurations(program: Program, platform: str | None = None) -> list[str]:
    """Names of the configurations that apply to ``program`` on ``platform`` (see `configurations_for`)."""
    return configurations_for(program.family, program.form, platform)


def compile_option_configurations(backend: str | None = None) -> tuple[str, ...]:
    """Names of the configurations that only set XLA compile options, apply to every program on
    ``backend`` (default: JAX's) and, on JAX's own backend, build with this jaxlib; ``"default"`` first.
    The TPU's, asked for on another backend, are those the installed libtpu accepts (all of them
    when there is no libtpu to ask: nothing can compile them then).
    """
    here = jax.default_backend()
    backend = backend or here
    return tuple(
        name
        for name, c in CONFIGURATIONS.items()
        if c.variant == Variant()
        and c.families is None
        and c.forms is None
        and _on_backend(c, backend)
        and (buildable(name) if backend == here else _tpu_compiler_accepts(c, backend))
    )


def _tpu_compiler_accepts(config: CompileConfig, backend: str) -> bool:
    """Whether the installed libtpu accepts ``config``'s options (True off the TPU, or without libtpu)."""
    if backend != "tpu" or not compiler.tpu_compiler_available():
        return True
    return not compiler.unsupported_compile_options(config.compiler_options, backends.DEFAULT_TPU_TARGET)


def compile_program(program: Program, config_name: str = "default") -> jax.stages.Compiled:
    """Lower ``program`` as the configuration's variant and compile it with its XLA options."""
    return compile_fn(
        program.configured_fn(config_name), program.args, CONFIGURATIONS[config_name].compiler_options
    )


def _signature(kernel: Kernel) -> str:
    """``"<shape> <kind>(<sorted ops inside>)"``, e.g. ``"f32[64,128] kLoop(add,exponential)"``."""
    ops = sorted(node.opcode for node in kernel.nodes if node.opcode != "parameter")
    return f"{kernel.instruction.shape} {kernel.kind}({','.join(ops)})"


def kernel_signatures(hlo_text: str) -> collections.Counter[str]:
    """The kernels of optimized HLO text (``Compiled.as_text()``) as a multiset of signatures.

    Kernels are those of :func:`tpucost.method.kernels.decompose`. Two compilations of a program with
    different multisets cut it into different kernels (or run a kernel with another library).
    """
    return collections.Counter(_signature(k) for k in decompose(parse_module(hlo_text)))


def count_kernels(hlo_text: str) -> int:
    """Number of kernels in optimized HLO text (see :func:`kernel_signatures`)."""
    return sum(kernel_signatures(hlo_text).values())


def survey(n: int = 39, seed: int = 0, families: Sequence[str] | None = None) -> None:
    """Print kernel counts per program and configuration (``python -m tpucost.experiments.programs``): by
    default the first 39 programs of seed 0 over the 13 architecture families of
    ``DEFAULT_FAMILIES`` (the figures above).

    A configuration "changes" a program when its multiset of kernel signatures differs from the
    default's; ``(same)`` marks the programs where it does not.
    """
    totals: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in CONFIGURATIONS}  # changed, n, k0, k
    if families is None:
        families = [f for f in DEFAULT_FAMILIES if FAMILIES[f].group != "random_ops"]
    for program in generate_programs(n, seed, families):
        base = kernel_signatures(compile_program(program, "default").as_text())
        row = [f"{program.program_id:36s} default={sum(base.values()):4d}"]
        for name in applicable_configurations(program)[1:]:
            kernels = kernel_signatures(compile_program(program, name).as_text())
            for i, value in enumerate((kernels != base, 1, sum(base.values()), sum(kernels.values()))):
                totals[name][i] += value
            row.append(f"{name}={sum(kernels.values())}{'' if kernels != base else '(same)'}")
        print(" ".join(row), flush=True)
    for name, (changed, programs, k_default, k_config) in totals.items():
        if programs:
            print(f"{name:20s} changed {changed}/{programs} programs; kernels {k_default} -> {k_config}")
