"""tpucost.compat: what differs between the jax/flax versions tpucost is tested on.

`make test` runs this file on the newest pins and on Colab's (flax 0.11.2, jaxlib 0.7.2). The
checkpoints under tests/data/ were written once under each flax version (`_write_fixture`); each
environment loads both, so a checkpoint written under one version is shown to load under the other.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import flax
import jax
import numpy as np
import pytest
from flax import nnx

from tpucost import compat
from tpucost.experiments import programs
from tpucost.experiments.programs import CompileConfig
from tpucost.method import backends, checkpoint, device, features
from tpucost.method.hlo import parse_module
from tpucost.method.kernels import decompose
from tpucost.method.models import ModelConfig, make_model
from tpucost.method.tasks import kernel

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

DATA = Path(__file__).resolve().parent / "data"
FIXTURES = sorted(DATA.glob("checkpoint-flax-*"))
HLO = """HloModule fixture, entry_computation_layout={(f32[32,64]{1,0}, f32[64,16]{1,0})->f32[32,16]{1,0}}

fused {
  a = f32[32,16]{1,0} parameter(0)
  ROOT t = f32[32,16]{1,0} tanh(a)
}

ENTRY main {
  x = f32[32,64]{1,0} parameter(0)
  w = f32[64,16]{1,0} parameter(1)
  d = f32[32,16]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT f = f32[32,16]{1,0} fusion(d), kind=kLoop, calls=fused
}
"""


def _graphs() -> list[features.KernelGraph]:
    return [features.featurize(k) for k in decompose(parse_module(HLO))]


def _predict(model: nnx.Module) -> np.ndarray:
    """The model's standardised outputs for the kernels of HLO (the identity norm)."""
    return kernel.predict(model, kernel.TargetNorm(0.0, 1.0), _graphs())


def _write_fixture() -> Path:
    """Write tests/data/checkpoint-flax-<version>/ (run once per flax version, by hand)."""
    config = ModelConfig(hidden=8, num_layers=2)
    model = make_model(config, nnx.Rngs(7))  # not the seed `checkpoint.load` initialises with
    out = checkpoint.save(DATA / f"checkpoint-flax-{flax.__version__}", model, config, {"task": "kernel"})
    (out / "expected.json").write_text(json.dumps({"standardised": _predict(model).tolist()}))
    return out


def test_module_containers_are_flax_s_own_where_it_has_them():
    assert compat.ModuleList is getattr(nnx, "List", list)
    assert compat.ModuleDict is getattr(nnx, "Dict", dict)


def test_the_parameter_tree_is_the_same_under_every_flax():
    model = make_model(ModelConfig(hidden=8, num_layers=2, neighbours="both"), nnx.Rngs(0))
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    assert sorted(pure["layers"]) == [0, 1]
    assert sorted(pure["layers"][0]["msg"]) == ["operands", "users"]


def test_checkpoints_written_under_each_flax_version_load_under_this_one():
    versions = {p.name.removeprefix("checkpoint-flax-") for p in FIXTURES}
    assert {"0.11.2", "0.12.8"} <= versions, f"fixtures for both tested flax versions, found {versions}"
    for folder in FIXTURES:
        saved = checkpoint.load(folder)
        assert json.loads((folder / "config.json").read_text())["flax_version"] == folder.name.split("-")[-1]
        expected = json.loads((folder / "expected.json").read_text())["standardised"]
        np.testing.assert_allclose(_predict(saved.model), expected, rtol=1e-5, atol=1e-6)


def test_the_installed_jaxlib_is_asked_which_compile_options_exist():
    assert compat.unsupported_compile_options({}) == []
    assert compat.supports_compile_options({"xla_disable_hlo_passes": "fusion"})
    assert compat.unsupported_compile_options(
        {"xla_no_such_option_anywhere": "1", "xla_disable_hlo_passes": "x"}
    ) == ["xla_no_such_option_anywhere"]


def _bogus_configuration(monkeypatch) -> CompileConfig:
    """A configuration whose option no jaxlib has, offered on every backend."""
    bogus = CompileConfig("needs_future_xla", "an option no jaxlib has", {"xla_no_such_option_anywhere": "1"})
    monkeypatch.setitem(programs.CONFIGURATIONS, bogus.name, bogus)
    for name, record in backends.BACKENDS.items():
        monkeypatch.setitem(
            backends.BACKENDS,
            name,
            dataclasses.replace(record, compile_configurations=(*record.compile_configurations, bogus.name)),
        )
    return bogus


def test_a_configuration_this_jaxlib_cannot_build_is_skipped_with_one_line(monkeypatch):
    bogus = _bogus_configuration(monkeypatch)
    program = next(programs.generate_programs(1, 0, families=("mlp",)))
    device._warned.clear()
    with pytest.warns(UserWarning, match="skipped") as caught:
        names = programs.applicable_configurations(program)
        programs.compile_option_configurations()
    assert bogus.name not in names and "default" in names
    assert bogus.name not in programs.compile_option_configurations()
    (message,) = [str(w.message) for w in caught]  # one note, once per process, naming every skip
    assert "xla_no_such_option_anywhere" in message and bogus.name in message and "\n" not in message
    # every configuration offered here compiles
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in programs.compile_option_configurations():
            programs.compile_program(program, name)


def test_configurations_for_another_platform_are_not_probed_here(monkeypatch):
    bogus = _bogus_configuration(monkeypatch)
    program = next(programs.generate_programs(1, 0, families=("mlp",)))
    other = "tpu" if jax.default_backend() != "tpu" else "cpu"
    assert bogus.name in programs.applicable_configurations(program, platform=other)
