"""Tests of tpucost.experiments.programs: every family x form compiles and runs, generation is deterministic,
and every configuration changes how some program is cut into kernels."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tpucost.experiments.programs import (
    CONFIGURATIONS,
    DEFAULT_FAMILIES,
    FAMILIES,
    FAMILY_GROUPS,
    FORMS,
    WRITTEN_BY_OTHERS,
    WRITTEN_HERE,
    Program,
    ProgramFamily,
    applicable_configurations,
    buildable,
    compile_program,
    configurations_for,
    count_kernels,
    family_groups,
    generate_programs,
    kernel_signatures,
    make_program,
    program_ids,
)
from tpucost.method import backends

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

N_ALL = len(DEFAULT_FAMILIES) * len(FORMS)  # 42: the shortest prefix holding every family in every form


@functools.cache
def _programs(n: int, seed: int) -> tuple[Program, ...]:
    """The first ``n`` programs of ``seed``, built once per test process (each build initialises
    parameters and compiles an optimizer: the tests below share them rather than rebuild them)."""
    return tuple(generate_programs(n, seed=seed))


#: Past the first round of every family and form (seed 3): the programs most tests below read.
N_PAST = N_ALL + 5


@pytest.fixture(scope="module")
def first_programs() -> list[Program]:
    return list(_programs(N_ALL, 0))


def _finite(tree) -> bool:
    return all(bool(np.isfinite(np.asarray(x, dtype=np.float32)).all()) for x in jax.tree.leaves(tree))


def _same_structure(a, b) -> bool:
    """Same tree structure, shapes and dtypes."""
    spec = lambda t: jax.tree.map(lambda x: (x.shape, x.dtype), t)  # noqa: E731
    return jax.tree.structure(a) == jax.tree.structure(b) and spec(a) == spec(b)


def test_families_and_forms():
    assert len(FAMILIES) >= 13 and len(set(FAMILIES)) == len(FAMILIES)
    assert tuple(FAMILIES) == WRITTEN_HERE + WRITTEN_BY_OTHERS and len(WRITTEN_BY_OTHERS) >= 10
    assert WRITTEN_HERE[: len(DEFAULT_FAMILIES)] == DEFAULT_FAMILIES
    assert FORMS == ("forward", "grad", "train_step")
    assert all(name == f.name and callable(f.generate) for name, f in FAMILIES.items())


def test_every_family_is_in_exactly_one_leave_group_out_group():
    """A family missing from FAMILY_GROUPS would stay in training in every leave-group-out run."""
    grouped = [f for members in FAMILY_GROUPS.values() for f in members]
    assert sorted(grouped) == sorted(FAMILIES), set(FAMILIES) ^ set(grouped)
    assert all(FAMILIES[f].group == group for group, members in FAMILY_GROUPS.items() for f in members)
    assert FAMILY_GROUPS["written_by_others"] == WRITTEN_BY_OTHERS
    # The groups the bundled leave-group-out experiment ran, in its order.
    assert list(FAMILY_GROUPS) == [
        "dense", "convolutional", "attention", "recurrent", "sparse", "random_ops", "written_by_others"
    ]  # fmt: skip
    assert FAMILY_GROUPS["sparse"] == ("embedding_scatter", "graph_message_passing", "hashed_embedding")


def test_family_groups_are_derived_from_the_records():
    extra = ProgramFamily("my_family", FAMILIES["mlp"].generate, "new_group")
    groups = family_groups({**FAMILIES, "my_family": extra})
    assert groups["new_group"] == ("my_family",) and groups["dense"] == FAMILY_GROUPS["dense"]


def test_the_default_corpus_stays_the_programs_it_was():
    """A family added later must not shift a seed's default programs (bundled data, calibration)."""
    assert len(DEFAULT_FAMILIES) == 14 and "hashed_embedding" not in DEFAULT_FAMILIES
    assert program_ids(16, seed=1)[13:] == ["random_ops-forward-1-13", "mlp-grad-1-14", "cnn-grad-1-15"]


def test_program_ids_name_the_programs_without_building_them():
    ids = program_ids(N_PAST, seed=3)
    assert ids == [p.program_id for p in _programs(N_PAST, 3)]
    # keras_* ids need no Keras: nothing is built (on Colab's versions, Keras is not installed)
    others = program_ids(2 * len(FAMILIES), seed=0, families=FAMILIES)
    assert others[len(WRITTEN_HERE)] == f"{WRITTEN_BY_OTHERS[0]}-forward-0-{len(WRITTEN_HERE)}"
    with pytest.raises(ValueError, match="unknown families"):
        program_ids(1, families=["no_such_family"])


@pytest.mark.slow
@pytest.mark.parametrize("index", range(N_ALL))
def test_every_family_and_form_compiles_and_runs(first_programs, index):
    program = first_programs[index]
    out = compile_program(program)(*program.args)
    assert _finite(out), program.program_id
    params = program.args[0]
    if program.form == "grad":
        assert _same_structure(out, params)
    elif program.form == "train_step":
        new_params, new_opt_state, loss = out
        assert _same_structure(new_params, params)
        assert _same_structure(new_opt_state, program.args[1])
        assert loss.shape == () and loss.dtype == jnp.float32


@pytest.mark.parametrize("family", WRITTEN_HERE)
def test_forward_runs_for_another_seed(family):
    program = make_program(family, "forward", seed=1, index=7)
    out = jax.jit(program.fn)(*program.args)
    assert _finite(out)
    assert out.dtype == jnp.dtype(program.hparams["dtype"])


def test_same_seed_same_programs():
    first = _programs(N_PAST, 3)
    again = list(generate_programs(N_PAST, seed=3))  # built afresh
    assert [p.program_id for p in first] == [p.program_id for p in again]
    assert [p.hparams for p in first] == [p.hparams for p in again]
    for a, b in zip(first, again, strict=True):
        for x, y in zip(jax.tree.leaves(a.args), jax.tree.leaves(b.args), strict=True):
            np.testing.assert_array_equal(np.asarray(x, np.float32), np.asarray(y, np.float32))


def test_program_ids_are_unique_and_seeds_differ():
    seed0 = list(_programs(N_ALL, 0))
    seed3 = list(_programs(N_PAST, 3)[:N_ALL])
    ids = [p.program_id for p in seed0 + seed3]
    assert len(set(ids)) == len(ids)
    assert seed0[0].program_id == f"{WRITTEN_HERE[0]}-forward-0-0"
    assert sum(a.hparams != b.hparams for a, b in zip(seed0, seed3, strict=True)) > N_ALL // 2


def test_hparams_are_json_serialisable():
    for program in _programs(N_ALL, 0) + _programs(N_PAST, 3):  # two seeds, each family and form twice
        text = json.dumps(program.hparams, sort_keys=True)
        assert json.loads(text) == program.hparams
        assert program.hparams["dtype"] in ("float32", "bfloat16")


@pytest.mark.parametrize("n", [N_ALL, N_PAST])
def test_any_long_prefix_covers_every_family_and_form(n):
    pairs = {(p.family, p.form) for p in _programs(N_PAST, 3)[:n]}  # generation yields one id at a time
    assert pairs == {(f, form) for f in DEFAULT_FAMILIES for form in FORMS}


def test_family_subset():
    programs = list(generate_programs(6, seed=0, families=["lstm", "gru"]))
    assert {(p.family, p.form) for p in programs} == {(f, form) for f in ("lstm", "gru") for form in FORMS}
    with pytest.raises(ValueError):
        next(generate_programs(1, families=["no_such_family"]))


def test_programs_compare_by_id():
    a, b = make_program("mlp", "grad", 0, 4), make_program("mlp", "grad", 0, 4)
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.family = "cnn"  # type: ignore[misc]


def test_applicable_configurations():
    lstm_train = make_program("lstm", "train_step", 0, 0)
    mlp_forward = make_program("mlp", "forward", 0, 0)
    # on this backend, every configuration this jaxlib can build (Colab's 0.7.2 has no YNNPACK options)
    assert applicable_configurations(lstm_train, "cpu") == [c for c in CONFIGURATIONS if buildable(c)]
    assert applicable_configurations(lstm_train, "cpu") == configurations_for("lstm", "train_step", "cpu")
    on_cpu = applicable_configurations(mlp_forward, "cpu")
    assert on_cpu[0] == "default" and "scan_unroll" not in on_cpu and "remat_dots" not in on_cpu
    # on a TPU: its compile configurations (libtpu's options), none of XLA:CPU's
    assert applicable_configurations(mlp_forward, "tpu") == [
        "default",
        *backends.BACKENDS["tpu"].compile_configurations,
    ]
    assert "remat_dots" in applicable_configurations(make_program("cnn", "grad", 0, 0), "gpu")


# One cheap program per configuration on which it must change the compiled HLO.
_WITNESS = {name: ("mlp", "forward") for name in CONFIGURATIONS}
_WITNESS.update(
    remat_nothing=("mlp", "train_step"), remat_dots=("mlp", "grad"), scan_unroll=("gru", "forward")
)


@pytest.mark.parametrize(
    "config",
    [
        c
        for c in CONFIGURATIONS
        if c != "default" and c not in backends.BACKENDS["tpu"].compile_configurations
    ],
)
def test_configuration_changes_the_kernels(config):
    """On XLA:CPU (the TPU's configurations: tests/test_compiler.py, compiled for a TPU v5e)."""
    if not buildable(config):
        pytest.skip(f"this jaxlib cannot build {config!r} (tests/test_compat.py covers the skip)")
    family, form = _WITNESS[config]
    program = make_program(family, form, seed=0, index=0)
    assert config in applicable_configurations(program, "cpu")
    default = compile_program(program, "default")
    changed = compile_program(program, config)
    assert kernel_signatures(changed.as_text()) != kernel_signatures(default.as_text())
    assert _finite(changed(*program.args))


def test_count_kernels_on_handwritten_hlo():
    hlo = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %e = f32[4]{0} exponential(%p)
}

%body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = f32[4]{0} get-tuple-element(%t), index=1
  %f = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused
  ROOT %r = (s32[], f32[4]{0}) tuple(%i, %f)
}

%cond (t: (s32[], f32[4])) -> pred[] {
  %t = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %c = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %c), direction=LT
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[4]{0}) tuple(%z, %a)
  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body
  %y = f32[4]{0} get-tuple-element(%w), index=1
  ROOT %n = f32[4]{0} negate(%y)
}
"""
    # negate in the entry, the fusion in the loop body, the compare in the loop condition;
    # the while itself is control flow, not a kernel (tpucost.method.kernels)
    assert kernel_signatures(hlo) == {
        "f32[4] negate(negate)": 1,
        "f32[4] kLoop(exponential)": 1,
        "pred[] compare(compare)": 1,
    }
    assert count_kernels(hlo) == 3


def test_program_from_id_rebuilds_corpus_programs_and_names_a_bad_id():
    from tpucost.experiments.programs import generate_programs, program_from_id

    for program in generate_programs(3, seed=5):
        again = program_from_id(program.program_id)
        assert again.program_id == program.program_id and again.hparams == program.hparams
    for bad in ("mlp-forward-0", "nosuch-forward-0-1", "mlp-sideways-0-1", "mlp-forward-x-1"):
        with pytest.raises(ValueError, match="not a corpus program id"):
            program_from_id(bad)


def test_hashed_embedding_hashes_ids_and_draws_dropout_from_the_stateful_generator():
    """Wang's hash gives ``not`` and ``lax.rng_uniform`` XLA's stateful RNG op in optimized HLO."""
    candidates = (make_program("hashed_embedding", "grad", 0, i) for i in range(200))
    program = next(p for p in candidates if p.hparams["hash"] == "wang" and p.hparams["dropout"] == "hidden")
    compiled = compile_program(program)
    text = compiled.as_text()
    assert " not(" in text and "rng-get-and-update-state(" in text
    assert _finite(compiled(*program.args))
