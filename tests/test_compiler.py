"""Tests of compiling for a TPU without one: tpucost.experiments.compiler, tpucost.experiments.xla_estimates, the `compile`
command, and TPU modules cut into kernels (every corpus family and every example program, v5e).

libtpu (the `tpu` extra) is installed by `make test` in both environments; without it the tests
that compile for a TPU skip, saying so, and the missing-compiler path is tested on its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xla_reference

from tpucost import cli, tpu_host
from tpucost.experiments import compiler, xla_estimates
from tpucost.experiments.programs import corpus, diffrax_models, keras_apps
from tpucost.experiments.programs.examples import EXAMPLES
from tpucost.experiments.programs.families import FAMILIES, WRITTEN_BY_OTHERS
from tpucost.method import backends, features, hlo, kernels

#: Every test here compiles for a TPU (or checks what does): make test-colab runs them on Colab's libtpu too.
pytestmark = pytest.mark.tpu

needs_libtpu = pytest.mark.skipif(
    not compiler.tpu_compiler_available(), reason=f"no TPU compiler here: {compiler.INSTALL_HINT}"
)
TPU_TARGETS = [name for name, t in backends.TARGETS.items() if t.is_tpu]
#: An instruction's name and whether its backend_config carries the compiler's estimate.
_ESTIMATED = re.compile(r'^\s*(?:ROOT )?%?([^\s=]+) = .*"estimated_cycles":"(\d+)"', re.M)


def _mlp(x, w1, w2):
    return jax.nn.softmax(jnp.tanh(x @ w1) @ w2)


def _mlp_args(dtype=jnp.bfloat16):
    return (jnp.ones((256, 512), dtype), jnp.ones((512, 512), dtype), jnp.ones((512, 128), dtype))


# --- targets ---------------------------------------------------------------------------------


def test_targets_name_their_chip_and_clock():
    assert backends.target("tpu") is backends.TARGETS[backends.DEFAULT_TPU_TARGET]
    assert backends.DEFAULT_TPU_TARGET == "tpu-v5e"
    assert backends.target(None).name == "cpu" and not backends.target("cpu").is_tpu
    v5e = backends.target("tpu-v5e")
    # 4 MXUs of 128x128 multiply-adds at the clock reach the documented 197 TFLOP/s
    assert v5e.clock_hz * v5e.mxus * v5e.mxu_size**2 * 2 == pytest.approx(197e12)
    assert backends.target("tpu-v4").clock_hz == pytest.approx(1.05e9, rel=0.01)  # the v4 paper's
    assert backends.target("tpu-v6e").clock_hz is None  # the pages disagree on its MXUs
    with pytest.raises(ValueError, match="unknown target 'tpu-v9'.*tpu-v5e"):
        backends.target("tpu-v9")


@pytest.mark.core
@needs_libtpu
@pytest.mark.parametrize("name", TPU_TARGETS)
def test_each_tpu_target_compiles_without_a_tpu(name):
    target = backends.target(name)
    assert compiler.target_device(name).device_kind == target.device_kind
    program = compiler.compile_for_target(_mlp, _mlp_args(), name)
    assert program.compiler["libtpu"] and program.compiler["jax"] == jax.__version__
    assert ":T(" in program.text  # TPU tiled layouts
    assert program.cost_analysis["flops"] >= 2 * 256 * 512 * (512 + 128)
    assert program.cost_analysis["optimal_seconds"] > 0
    assert jax.default_backend() == "cpu"  # nothing moved this process onto a TPU


@pytest.mark.core
@needs_libtpu
def test_cpu_and_tpu_modules_of_one_program_differ_as_the_compilers_do():
    cpu = compiler.compile_for_target(_mlp, _mlp_args(), "cpu")
    tpu = compiler.compile_for_target(_mlp, _mlp_args(), "tpu-v5e")
    assert cpu.compiler["libtpu"] is None and ":T(" not in cpu.text
    tpu_ops = {i.opcode for c in tpu.module.computations.values() for i in c.instructions}
    assert "convolution" in tpu_ops  # the TPU runs bf16 dots as convolutions on its matrix units
    assert "dot" not in tpu_ops


def test_a_missing_tpu_compiler_is_one_line_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setattr(compiler, "tpu_compiler_available", lambda: False)
    compiler.target_device.cache_clear()
    try:
        with pytest.raises(compiler.TpuCompilerMissing, match=r"tpucost\[tpu\]"):
            compiler.compile_for_target(_mlp, _mlp_args(), "tpu-v5e")
        assert cli.cmd_compile(_args("mlp-forward-0-0", "tpu-v5e")) == 2
    finally:
        compiler.target_device.cache_clear()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and 'pip install "tpucost[tpu]"' in err[0]


def test_libtpu_is_told_there_is_no_chip_only_where_there_is_none(tmp_path, monkeypatch):
    assert not tpu_host.tpu_chip_here(tmp_path)
    (tmp_path / "vfio").mkdir()
    (tmp_path / "vfio" / "vfio").touch()  # the control file alone: no chip
    assert not tpu_host.tpu_chip_here(tmp_path)
    (tmp_path / "vfio" / "0").touch()
    assert tpu_host.tpu_chip_here(tmp_path)
    for key in tpu_host.QUIET_LIBTPU_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(tpu_host, "runs_on_tpu", lambda: True)  # JAX's answer, or the device files before
    tpu_host.quiet_libtpu_startup()
    assert not any(key in os.environ for key in tpu_host.QUIET_LIBTPU_ENV)
    monkeypatch.setattr(tpu_host, "runs_on_tpu", lambda: False)
    tpu_host.quiet_libtpu_startup()
    assert os.environ["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"


# --- the compiler's estimates ----------------------------------------------------------------


@pytest.mark.core
@needs_libtpu
def test_every_estimate_in_the_module_reaches_its_kernel():
    program = compiler.compile_for_target(_mlp, _mlp_args(), "tpu-v5e")
    rows = {r["name"]: r for r in xla_estimates.kernel_rows(program)}
    in_text = {name: int(cycles) for name, cycles in _ESTIMATED.findall(program.text)}
    kernel_estimates = {n: r["xla_estimated_cycles"] for n, r in rows.items() if r["xla_estimated_cycles"]}
    assert kernel_estimates and kernel_estimates == {n: c for n, c in in_text.items() if n in rows}
    clock = backends.target("tpu-v5e").clock_hz
    for r in rows.values():
        if r["xla_estimated_cycles"] is not None:
            assert r["xla_estimated_ns"] == pytest.approx(r["xla_estimated_cycles"] / clock * 1e9)
        assert r["roofline_ns"] is not None and r["roofline_ns"] >= 0
    total = xla_estimates.program_estimate(program)
    compute = [r for r in rows.values() if not r["async_copy"]]
    assert total.compute_kernels == len(compute)
    assert total.xla_estimated_cycles == sum(
        r["xla_estimated_cycles"] * r["calls_per_run"] for r in compute if r["xla_estimated_cycles"]
    )
    assert total.optimal_ns == pytest.approx(program.cost_analysis["optimal_seconds"] * 1e9)


def test_estimates_are_read_where_the_compiler_writes_them():
    text = textwrap.dedent(
        """\
        HloModule m

        ENTRY %main (p: f32[8,128]) -> f32[8,128] {
          %p = f32[8,128]{1,0:T(8,128)} parameter(0)
          %a = f32[8,128]{1,0:T(8,128)} exponential(%p), backend_config={"window_config":{"estimated_cycles":"120"}}
          %b = f32[8,128]{1,0:T(8,128)} negate(%a), backend_config={"estimated_cycles":"7"}
          ROOT %c = f32[8,128]{1,0:T(8,128)} copy(%b)
        }
        """
    )
    ks = kernels.decompose(hlo.parse_module(text))
    assert [xla_estimates.estimated_cycles(k) for k in ks] == [120, 7, None]


def test_the_documented_roofline_uses_the_chip_s_peaks():
    v5e = backends.target("tpu-v5e")
    roofline = xla_estimates.documented_roofline(v5e)
    assert (roofline.peak_flops, roofline.bandwidth_bytes_per_s) == (197e12, 819e9)
    assert xla_estimates.documented_roofline(backends.target("cpu")) is None


# --- TPU modules into kernels ----------------------------------------------------------------

ASYNC_COPY = """HloModule m

ENTRY %main (p: f32[128,128]) -> f32[128,128] {
  %p = f32[128,128]{1,0:T(8,128)} parameter(0)
  %cs = (f32[128,128]{1,0:T(8,128)S(1)}, f32[128,128]{1,0:T(8,128)}, u32[]{:S(2)}) copy-start(%p)
  %buf = f32[128,128]{1,0:T(8,128)S(1)} custom-call(), custom_call_target="AllocateBuffer"
  %cd = f32[128,128]{1,0:T(8,128)S(1)} copy-done(%cs)
  %sm = f32[128,128]{1,0:T(8,128)S(1)} custom-call(%cd), custom_call_target="online-softmax"
  ROOT %r = f32[128,128]{1,0:T(8,128)} add(%sm, %buf)
}
"""


def test_tpu_async_copies_and_custom_calls_as_kernels():
    ks = {k.name: k for k in kernels.decompose(hlo.parse_module(ASYNC_COPY))}
    # AllocateBuffer reserves memory; the copy is one kernel, timed under its copy-done's name
    assert set(ks) == {"cd", "sm", "r"}
    assert ks["cd"].is_async_copy and not ks["sm"].is_async_copy and not ks["cd"].host_copy
    assert ks["cd"].instruction.name == "cs"  # its graph is the copy-start's
    assert ks["sm"].custom_call_target == "online-softmax" and ks["r"].custom_call_target is None
    row = features.featurize(ks["sm"]).node_features[-1]
    cols = {n: i for i, n in enumerate(features.NODE_FEATURE_NAMES)}
    assert row[cols["has_tiling"]] == 1.0  # the TPU's (8, 128) tile is in the features
    assert row[cols["layout_tile0"]] == pytest.approx(np.log1p(128))


def _program_list() -> list[str]:
    """One corpus program per family (forms in turn; the Keras ones forward: their grads take
    10-50 s each) and every example program's default configuration."""
    out = []
    for i, family in enumerate(FAMILIES):
        form = "forward" if family.startswith("keras_") else corpus.FORMS[i % len(corpus.FORMS)]
        out.append(f"{family}-{form}-0-0")
    return out + [f"example:{name}" for name in EXAMPLES]


def test_the_program_list_holds_every_family_and_example():
    specs = _program_list()
    assert {s.rsplit("-", 3)[0] for s in specs if not s.startswith("example:")} == set(FAMILIES)
    assert set(WRITTEN_BY_OTHERS) < set(FAMILIES)
    assert {s for s in specs if s.startswith("example:")} == {f"example:{n}" for n in EXAMPLES}


def _needs_its_library(spec: str) -> None:
    """Skip a family whose library this environment lacks (diffrax needs jax >= 0.10: not on
    Colab's versions, where `make test` installs Keras but not diffrax)."""
    try:
        if spec.startswith("diffrax_"):
            diffrax_models.import_diffrax()
        if spec.startswith("keras_"):
            keras_apps.import_keras()  # sets KERAS_BACKEND=jax first
    except ImportError as err:
        pytest.skip(f"{spec}: {err}")


@pytest.mark.slow
@pytest.mark.core
@needs_libtpu
@pytest.mark.parametrize("spec", _program_list())
def test_every_family_and_example_compiles_for_v5e_into_kernels(spec):
    """Compiled for v5e: XLA's parser reads the module as ours does; every fusion and every
    computing custom call of the entry and of the bodies it runs is a kernel; every kernel
    featurizes; every estimate in the text reaches its kernel."""
    _needs_its_library(spec)
    fn, args, _ = cli.resolve_program(spec)
    program = compiler.compile_for_target(fn, args, "tpu-v5e")
    if xla_reference.available():
        assert xla_reference.assert_agrees([program.text], [spec]) == 1
    module = program.module
    ks = kernels.decompose(module)
    names = {k.name for k in ks}
    for comp_name in {k.computation for k in ks} | {module.entry.name}:
        for inst in module.computations[comp_name].instructions:
            if inst.opcode == "fusion":
                assert inst.name in names, f"fusion {inst.name} is not a kernel"
            if inst.opcode == "custom-call":
                target = inst.attributes.get("custom_call_target")
                assert (inst.name in names) == (target not in kernels.NOT_KERNEL_CUSTOM_CALLS), inst.name
    for k in ks:
        assert np.isfinite(features.featurize(k).node_features).all(), k.name
        if k.opcode == "fusion":
            assert k.kind in ("kLoop", "kInput", "kOutput", "kCustom"), f"{k.name}: {k.kind}"
    layouts = [k.instruction.shape.layout for k in ks if k.opcode == "fusion"]
    assert any(layout is not None and layout.tiles for layout in layouts), "no TPU tiling seen"
    rows = xla_estimates.kernel_rows(program)
    in_text = dict(_ESTIMATED.findall(program.text))
    assert in_text, "the compiler estimated nothing"
    for r in rows:
        if r["name"] in in_text:
            assert r["xla_estimated_cycles"] == int(in_text[r["name"]]), r["name"]
    assert any(r["xla_estimated_cycles"] for r in rows)


# --- the command -----------------------------------------------------------------------------


def _args(program: str, target: str, as_json: bool = True):
    import argparse

    return argparse.Namespace(program=program, target=target, json=as_json)


USER_PROGRAM = '''
import jax, jax.numpy as jnp

def attention(config):
    """A program tpucost never saw: single-head attention in bf16, 200 tokens (no multiple of 128)."""
    q = jnp.ones((200, 64), jnp.bfloat16)
    def fn(q, k, v):
        return jax.nn.softmax(q @ k.T / 8.0) @ v
    return fn, (q, q * 2, q * 3)
'''


@pytest.mark.core
@needs_libtpu
def test_compile_command_on_a_program_of_the_user(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(USER_PROGRAM)
    proc = subprocess.run(
        [sys.executable, "-m", "tpucost", "compile", f"{path}:attention", "--target", "tpu-v5e", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["target"] == "tpu-v5e" and result["compiler"]["libtpu"]
    for key in ("name", "kind", "opcode", "xla_estimated_cycles", "xla_estimated_ns"):
        assert all(key in k for k in result["kernels"])
    fn, args, _ = cli.resolve_program(f"{path}:attention")
    program = compiler.compile_for_target(fn, args, "tpu-v5e")
    entry_fusions = {i.name for i in program.module.entry.instructions if i.opcode == "fusion"}
    assert entry_fusions <= {k["name"] for k in result["kernels"]}
    assert result["cost_analysis"]["flops"] == program.cost_analysis["flops"]
    assert any(k["xla_estimated_ns"] for k in result["kernels"])
    assert "not measurements" in result["note"]
    # the clock behind the ns: 197 TFLOP/s over 4 MXUs of 128 x 128 multiply-adds (2 flops each)
    assert (
        result["clock_hz"] == pytest.approx(197e12 / (4 * 128 * 128 * 2))
        and "derived" in result["clock_source"]
    )
    cycles_and_ns = [
        (k["xla_estimated_cycles"], k["xla_estimated_ns"]) for k in result["kernels"] if k["xla_estimated_ns"]
    ]
    assert all(ns == pytest.approx(c / result["clock_hz"] * 1e9) for c, ns in cycles_and_ns)


def test_compile_command_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(config):\n    return 1\n")
    for program, target, expected in (
        ("mlp-forward-0-0", "tpu-v9", "unknown target"),
        ("no-such-program", "cpu", "not a corpus program id"),
        (f"{tmp_path}/none.py:f", "cpu", "no such file"),
        (f"{bad}:f", "cpu", "must return (fn, args)"),
    ):
        assert cli.cmd_compile(_args(program, target)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], (program, err)


def test_compile_command_on_the_cpu_target_reads_a_corpus_program(capsys):
    assert cli.cmd_compile(_args("mlp-forward-0-0", "cpu")) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["target"] == "cpu" and result["compiler"]["libtpu"] is None
    assert result["kernels"] and all(k["xla_estimated_cycles"] is None for k in result["kernels"])
    assert result["cost_analysis"]["flops"] > 0


# --- what the notebooks show: bundled modules, summaries, configurations, Table 2's row ------


def test_module_summary_counts_what_each_compiler_made():
    summary = kernels.module_summary(hlo.parse_module(ASYNC_COPY))
    assert summary["kernels"] == 2 and summary["asynchronous copies"] == 1
    assert summary["lone ops"] == 2 and summary["tiled outputs"] == 2
    assert summary["outputs in memory space 1"] == 1  # the online-softmax's; the add writes to HBM


@pytest.mark.parametrize("name", ["nb01_small_cnn", "nb03_net"])
def test_bundled_programs_load_with_their_provenance(name):
    program, provenance = compiler.load_bundled_program(name)
    assert program.target.name == provenance["target"] == "tpu-v5e"
    assert provenance["compiler"]["libtpu"] and provenance["command"] == "python tools/bundle_tpu_programs.py"
    assert program.cost_analysis["flops"] > 0
    assert xla_estimates.program_estimate(program).estimated_kernels > 0
    if name == "nb01_small_cnn":  # one convolution and two dense layers, one of them in a nested fusion
        assert kernels.module_summary(program.module)["convolution ops"] == 3


def test_without_libtpu_the_notebooks_read_the_bundled_modules(monkeypatch):
    monkeypatch.setattr(compiler, "tpu_compiler_available", lambda: False)
    program, source = compiler.compile_or_bundled(_mlp, _mlp_args(), "tpu-v5e", bundled="nb03_net")
    assert source.startswith("bundled: notebook 03's Net") and 'pip install "tpucost[tpu]"' in source
    assert program.module.entry is not None
    rows, source = xla_estimates.configuration_estimates_or_bundled(
        _mlp, _mlp_args(), ["default"], bundled="nb05_mixer_configurations"
    )
    assert source.startswith("bundled: example:mixer") and rows[0]["configuration"] == "default"
    with pytest.raises(FileNotFoundError, match="no bundled TPU program 'nothing'"):
        compiler.compile_or_bundled(_mlp, _mlp_args(), "tpu-v5e", bundled="nothing")


@pytest.mark.slow
@needs_libtpu
def test_bundled_modules_still_hold_the_compiler_s_kernels():
    """The bundled modules are what tools/bundle_tpu_programs.py compiles now (kernel by kernel: the
    text's metadata holds file paths); the libtpu that wrote them is the newest pins'."""
    import project_tools

    tool = project_tools.load("bundle_tpu_programs")
    for name, (_, fn, args) in tool.bundled_programs().items():
        bundled, provenance = compiler.load_bundled_program(name)
        if provenance["compiler"] != compiler.compiler_versions("tpu-v5e"):
            pytest.skip(
                f"{name} was compiled by {provenance['compiler']}, this is {compiler.compiler_versions('tpu-v5e')}"
            )
        now = compiler.compile_for_target(fn, args, "tpu-v5e")
        assert xla_estimates.kernel_rows(bundled) == xla_estimates.kernel_rows(now), name


@pytest.mark.core
@needs_libtpu
def test_tpu_configurations_are_checked_against_libtpu_and_change_the_kernels(monkeypatch):
    names = corpus.compile_option_configurations("tpu")
    assert names[0] == "default" and "tpu_no_multi_output_fusion" in names
    assert not any(n in names for n in ("no_fusion", "no_library_fusion"))  # XLA:CPU's
    rows = {
        r["configuration"]: r
        for r in xla_estimates.configuration_estimates(
            _mlp,
            _mlp_args(),
            "tpu-v5e",
            ["default", "tpu_no_multi_output_fusion", "tpu_no_conv_input_fusion"],
        )
    }
    assert all(r["xla_estimated_ns"] > 0 for r in rows.values())
    assert len({(r["kernels"], r["xla_estimated_cycles"]) for r in rows.values()}) > 1
    # an option libtpu does not know is left out of the space, by asking libtpu
    fake = corpus.CompileConfig("tpu_fake", "not an option", {"xla_tpu_no_such_option_here": True})
    monkeypatch.setitem(corpus.CONFIGURATIONS, "tpu_fake", fake)
    tpu = backends.BACKENDS["tpu"]
    with_fake = dataclasses.replace(tpu, compile_configurations=(*tpu.compile_configurations, "tpu_fake"))
    monkeypatch.setitem(backends.BACKENDS, "tpu", with_fake)
    assert corpus.compile_option_configurations("tpu") == names
    assert compiler.unsupported_compile_options(fake.compiler_options, "tpu-v5e") == [
        "xla_tpu_no_such_option_here"
    ]


def test_the_estimates_row_needs_labels_from_a_tpu(bundled_kernels):
    from tpucost.experiments.data import kernel as kernel_data

    ds = bundled_kernels
    with pytest.raises(ValueError, match="measured on cpu.*needs labels measured on a TPU"):
        xla_estimates.evaluate_estimates(ds, kernel_data.split(ds, "random"))


@pytest.mark.slow
@pytest.mark.core
@needs_libtpu
def test_the_estimates_row_scores_a_tpu_data_set():
    """A data set as a v5e would measure it (labels: the estimates x 1.5, so the row's error is
    known): the row matches every kernel the compiler estimated and scores them."""
    from tpucost.experiments.data import kernel as kernel_data
    from tpucost.method.splits import Split

    parts, names = [], ["mlp-forward-0-0", "cnn-grad-0-0", "norm_softmax-forward-0-1"]
    for program_id in names:
        program = corpus.program_from_id(program_id)
        compiled = compiler.compile_for_target(program.fn, program.args, "tpu-v5e")
        pairs = [
            (k, r)
            for k, r in zip(
                kernels.decompose(compiled.module), xla_estimates.kernel_rows(compiled), strict=True
            )
            if r["xla_estimated_ns"]
        ]
        meta = {
            "program_id": program_id,
            "family": program.family,
            "form": program.form,
            "configuration": "default",
            "backend": "tpu",
            "device_kind": "TPU v5 lite",
            "jax_version": jax.__version__,
        }
        parts.append(
            kernel_data.from_graphs(
                [features.featurize(k) for k, _ in pairs],
                [1.5 * r["xla_estimated_ns"] for _, r in pairs],
                [r["calls_per_run"] for _, r in pairs],
                meta,
            )
        )
    ds = kernel_data.concat(parts)
    rows = np.arange(len(ds))
    split = Split("program", np.array([]), np.array([]), np.array(sorted(names)), rows[:0], rows[:0], rows)
    result = xla_estimates.evaluate_estimates(ds, split)
    assert result["n_dropped"] == 0 and result["n_kernels"] == len(ds)
    assert result["kendall_median"] == pytest.approx(1.0)
    if result["mape_ge5us"] is not None and not np.isnan(result["mape_ge5us"]):
        assert result["mape_ge5us"] == pytest.approx(100 / 3, rel=1e-3)  # |1 - 1.5| / 1.5


#: A program whose kernels each TPU configuration changes (checked with libtpu 0.0.23 and 0.0.42.1).
_TPU_WITNESS = {
    "tpu_no_conv_input_fusion": "example:mixer",
    "tpu_no_conv_output_fusion": "example:nnx_vit",
    "tpu_no_multi_output_fusion": "example:mixer",
}


@pytest.mark.slow
@pytest.mark.core
@needs_libtpu
@pytest.mark.parametrize("config", backends.BACKENDS["tpu"].compile_configurations)
def test_each_tpu_configuration_changes_the_kernels(config):
    fn, args, _ = cli.resolve_program(_TPU_WITNESS[config])
    default = compiler.compile_for_target(fn, args, "tpu-v5e")
    changed = compiler.compile_for_target(fn, args, "tpu-v5e", corpus.CONFIGURATIONS[config].compiler_options)
    assert corpus.kernel_signatures(changed.text) != corpus.kernel_signatures(default.text)


@pytest.mark.slow
@needs_libtpu
def test_the_notebooks_tpu_programs_compile_here():
    """What notebooks 01, 03 and 05 compile for a TPU v5e compiles under this environment's jax and
    libtpu (make test-colab: Colab's), with the compiler's estimates."""
    import project_tools

    tool = project_tools.load("bundle_tpu_programs")
    for name, (_, fn, args) in tool.bundled_programs().items():
        estimate = xla_estimates.program_estimate(compiler.compile_for_target(fn, args, "tpu-v5e"))
        assert estimate.estimated_kernels > 0 and estimate.xla_estimated_ns > 0, name
    fn, args, _ = cli.resolve_program("example:mixer")
    rows = xla_estimates.configuration_estimates(
        fn, args, "tpu-v5e", corpus.compile_option_configurations("tpu")
    )
    assert [r["configuration"] for r in rows] == ["default", *backends.BACKENDS["tpu"].compile_configurations]
    assert all(r["xla_estimated_ns"] > 0 for r in rows)
