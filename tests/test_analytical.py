"""Tests of the analytical baseline: kernel costs, the roofline, calibration and per-kind scaling."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tpucost import compat
from tpucost.experiments import kernel_experiments
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.tiles import analytical as tile_analytical
from tpucost.method import analytical, device
from tpucost.method.analytical import (
    AnalyticalModel,
    DeviceRoofline,
    KernelCost,
    kernel_cost,
    measure_roofline,
    roofline_ns,
)
from tpucost.method.features import KernelGraph, featurize
from tpucost.method.hlo import parse_module
from tpucost.method.kernels import decompose

# keep a dot a lone `dot` kernel on XLA:CPU (no YNNPACK/XNNPACK fusion)
NO_LIBRARY_FUSION = compat.library_fusions_off()


def graphs_of(fn, *args, options=None) -> list[KernelGraph]:
    text = jax.jit(fn).lower(*args).compile(compiler_options=options).as_text()
    return [featurize(k) for k in decompose(parse_module(text))]


def only(graphs: list[KernelGraph], kind: str) -> KernelGraph:
    found = [g for g in graphs if g.kind == kind]
    assert len(found) == 1, [(g.name, g.kind) for g in graphs]
    return found[0]


def test_dot_flops_and_bytes():
    g = only(graphs_of(lambda a, b: a @ b, jnp.ones((64, 128)), jnp.ones((128, 32)), options=NO_LIBRARY_FUSION),
             "dot")  # fmt: skip
    assert kernel_cost(g) == KernelCost(2 * 64 * 128 * 32, 0, 4 * (64 * 128 + 128 * 32), 4 * 64 * 32)


def test_dot_transposed_lhs_contracts_the_right_dim():
    g = only(graphs_of(lambda a, b: a.T @ b, jnp.ones((128, 64)), jnp.ones((128, 32)), options=NO_LIBRARY_FUSION),
             "dot")  # fmt: skip
    assert kernel_cost(g).flops == 2 * 64 * 128 * 32


def test_convolution_flops():
    x, w = jnp.ones((2, 16, 16, 8)), jnp.ones((3, 3, 8, 4))
    conv = lambda x, w: jax.lax.conv_general_dilated(  # noqa: E731
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    c = kernel_cost(only(graphs_of(conv, x, w, options=NO_LIBRARY_FUSION), "convolution"))
    assert c.flops == 2 * (2 * 16 * 16 * 4) * (3 * 3) * 8
    assert c.bytes_read == 4 * (x.size + w.size) and c.bytes_written == 4 * 2 * 16 * 16 * 4


def test_grouped_convolution_counts_features_per_group():
    x, w = jnp.ones((1, 8, 8, 8)), jnp.ones((3, 3, 2, 8))  # 4 groups of 2 input features
    conv = lambda x, w: jax.lax.conv_general_dilated(  # noqa: E731
        x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=4
    )
    c = kernel_cost(only(graphs_of(conv, x, w, options=NO_LIBRARY_FUSION), "convolution"))
    assert c.flops == 2 * (6 * 6 * 8) * 9 * 2


def test_exp_is_transcendental():
    (g,) = graphs_of(jnp.exp, jnp.ones((1000,)))
    assert kernel_cost(g) == KernelCost(0, 1000, 4000, 4000)


HLO = """HloModule m, entry_computation_layout={(f32[64,128]{0,1}, f32[128,32]{1,0})->f32[64,32]{1,0}}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused {
  p0 = f32[64,32]{1,0} parameter(0)
  p1 = f32[64,32]{1,0} parameter(1)
  s = f32[64,32]{1,0} add(p0, p1)
  m = f32[64,32]{1,0} multiply(p0, p1)
  e = f32[64,32]{1,0} tanh(m)
  ROOT t = (f32[64,32]{1,0}, f32[64,32]{1,0}) tuple(s, e)
}

ENTRY main {
  x = f32[64,128]{0,1} parameter(0)
  y = f32[128,32]{1,0} parameter(1)
  d = f32[64,32]{1,0} dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  r = f32[32]{0} reduce(d, z), dimensions={0}, to_apply=add
  c = f32[64,32]{0,1} copy(d)
  f = (f32[64,32]{1,0}, f32[64,32]{1,0}) fusion(d, d), kind=kLoop, calls=fused
  ROOT o = f32[64,32]{1,0} get-tuple-element(f), index=0
}
"""


def test_hand_written_module_rules():
    costs = {k.name: kernel_cost(featurize(k)) for k in decompose(parse_module(HLO))}
    # lhs laid out {0,1}: its minor-most dim is logical dim 0 (64); contracting dim 1 is 128
    assert costs["d"] == KernelCost(2 * 64 * 32 * 128, 0, 4 * (64 * 128 + 128 * 32), 4 * 64 * 32)
    assert costs["r"] == KernelCost(64 * 32, 0, 4 * 64 * 32 + 4, 4 * 32)
    assert costs["c"] == KernelCost(0, 0, 4 * 64 * 32, 4 * 64 * 32)  # data movement: no flops
    # multi-output fusion: the root tuple is not written twice; add + multiply flops, tanh transcendental
    assert costs["f"] == KernelCost(2 * 64 * 32, 64 * 32, 2 * 4 * 64 * 32, 2 * 4 * 64 * 32)


def test_kernel_cost_rejects_foreign_layouts():
    g = KernelGraph(np.zeros(2, np.int32), np.zeros((2, 140), np.float32), np.zeros(0, np.int32),
                    np.zeros(0, np.int32), "k", "kLoop")  # fmt: skip
    with pytest.raises(ValueError, match="feature layout"):
        kernel_cost(g)


ROOF = DeviceRoofline(peak_flops=1e12, peak_transcendentals=1e10, bandwidth_bytes_per_s=1e11,
                      launch_overhead_ns=1000.0, backend="test", device_kind="test")  # fmt: skip


def test_roofline_ns_takes_the_binding_limit():
    assert roofline_ns(KernelCost(1e9, 0, 0, 0), ROOF) == pytest.approx(1000 + 1e6)  # compute bound
    assert roofline_ns(KernelCost(1e3, 1e6, 0, 0), ROOF) == pytest.approx(1000 + 1e5)  # transcendentals
    assert roofline_ns(KernelCost(1e3, 0, 6e6, 4e6), ROOF) == pytest.approx(1000 + 1e5)  # memory bound
    assert roofline_ns(KernelCost(0, 0, 0, 0), ROOF) == 1000


def test_the_roofline_is_measured_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TPUCOST_CACHE_DIR", str(tmp_path))
    rl = measure_roofline(repeats=2, min_time_s=0.002)
    values = [rl.peak_flops, rl.peak_transcendentals, rl.bandwidth_bytes_per_s, rl.launch_overhead_ns]
    assert all(math.isfinite(v) and v > 0 for v in values), rl
    assert rl.backend == jax.default_backend()
    (path,) = tmp_path.glob("roofline-*.json")
    assert path == analytical.default_cache_path(rl.backend, rl.device_kind, device.fingerprint()["id"])
    assert json.loads(path.read_text())["peak_flops"] == rl.peak_flops

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again instead of reading the cache")

    monkeypatch.setattr(analytical, "_measure", no_measuring)
    assert measure_roofline() == rl
    with pytest.raises(AssertionError, match="measured again"):
        measure_roofline(force=True)


@pytest.fixture(scope="module")
def synthetic():
    """Kernel graphs of two kinds (kLoop fusions of exp, mul, add; lone dots) of several sizes."""
    graphs = []
    for n in (100, 1000, 10_000, 100_000):
        graphs += graphs_of(
            lambda x: jnp.exp(x) * 2.0 + 1.0, jnp.ones((n,))
        )  # one op alone is no fusion in jaxlib 0.7
    for m in (8, 32, 128):
        graphs += graphs_of(
            lambda a, b: a @ b, jnp.ones((m, 64)), jnp.ones((64, m)), options=NO_LIBRARY_FUSION
        )
    assert sorted({g.kind for g in graphs}) == ["dot", "kLoop"]
    return graphs


def test_model_recovers_per_kind_scale(synthetic):
    true_scale = {"kLoop": 3.0, "dot": 0.5}
    est = np.array([roofline_ns(kernel_cost(g), ROOF) for g in synthetic])
    y = est * np.array([true_scale[g.kind] for g in synthetic])
    model = AnalyticalModel(ROOF).fit(synthetic, y)
    assert model.coefficients == pytest.approx(true_scale)
    assert model.counts == {"kLoop": 4, "dot": 3}
    np.testing.assert_allclose(model.predict(synthetic), y, rtol=1e-9)
    # an unseen kind falls back to the global coefficient (median over all training kernels)
    assert model.coefficient("convolution") == model.global_coefficient == pytest.approx(3.0)
    # round trip
    again = AnalyticalModel.from_json(model.to_json())
    np.testing.assert_allclose(again.predict(synthetic), y, rtol=1e-12)
    assert again.roofline == ROOF


@pytest.mark.measures
def test_model_uses_only_the_training_data(synthetic, tmp_path, monkeypatch):
    """Fit through `tpucost.experiments.kernel_experiments.train_models` on a data set holding the test labels too:
    garbage test labels must not move a coefficient."""
    monkeypatch.setattr(analytical, "measure_roofline", lambda *args, **kwargs: ROOF)
    est = np.array([roofline_ns(kernel_cost(g), ROOF) for g in synthetic])
    kinds = np.array([g.kind for g in synthetic])
    y = est * np.where(kinds == "dot", 2.0, 5.0)
    # kernels 0-3 are exps, 4-6 dots; 3, 5, 6 run in held-out (test) families. One train dot against
    # two test dots: a fit that saw the test labels would take its dot median from them.
    family = ["mlp", "mlp", "mlp", "unet", "mlp", "gru", "nerf_mlp"]
    meta = {
        "form": "forward",
        "configuration": "default",
        "backend": "cpu",
        "device_kind": "cpu",
        "jax_version": "0",
    }
    test = [3, 5, 6]
    y_garbage = y.copy()
    y_garbage[test] *= 1000.0
    fitted = []
    for name, labels in (("clean", y), ("garbage", y_garbage)):
        ds = kernel_data.concat(
            [
                kernel_data.from_graphs(
                    [g], [labels[i]], [1], {**meta, "program_id": f"{family[i]}-{i}", "family": family[i]}
                )
                for i, g in enumerate(synthetic)
            ]
        )
        assert kernel_data.split(ds, "hard").test.tolist() == test
        kernel_experiments.train_models(ds, "hard", tmp_path / name, methods=("analytical",), progress=False)
        model = AnalyticalModel.from_json((tmp_path / name / "analytical.json").read_text())
        assert model.coefficients == pytest.approx({"dot": 2.0, "kLoop": 5.0})
        assert model.counts == {"dot": 1, "kLoop": 3}
        fitted.append((model.coefficients, model.global_coefficient))
    assert fitted[0] == fitted[1]


def test_model_fit_kinds_and_predict_before_fit(synthetic):
    y = np.array([roofline_ns(kernel_cost(g), ROOF) for g in synthetic])
    # explicit kinds override graph.kind; predict before fit is an error
    assert AnalyticalModel(ROOF).fit(synthetic, y, ["all"] * len(synthetic)).coefficients.keys() == {"all"}
    with pytest.raises(RuntimeError):
        AnalyticalModel(ROOF).predict(synthetic)


def test_tile_roofline_by_hand():
    from tpucost.experiments import tiles
    from tpucost.method import analytical

    rl = analytical.DeviceRoofline(
        peak_flops=1e12, peak_transcendentals=1e11, bandwidth_bytes_per_s=1e10, launch_overhead_ns=5_000.0
    )
    cost = tiles.tile_cost("matmul", (256, 256, 256), "float32", {"bm": 128, "bn": 128, "bk": 128})
    step_ns = 1_000.0
    per_step = step_ns + 1e9 * max(
        cost.flops_per_step / 1e12, (cost.bytes_in_per_step + cost.bytes_out_per_step) / 1e10
    )
    big = 10 * cost.working_set_bytes
    assert tile_analytical.tile_roofline_ns(cost, rl, step_ns, big) == pytest.approx(
        5_000.0 + cost.steps * per_step
    )
    spilled = tile_analytical.tile_roofline_ns(cost, rl, step_ns, cost.working_set_bytes // 2)
    assert spilled > tile_analytical.tile_roofline_ns(
        cost, rl, step_ns, big
    )  # the working set spills: slower


def test_tile_model_prefers_fewer_steps_when_steps_are_expensive():
    from tpucost.experiments import tiles
    from tpucost.method import analytical

    rl = analytical.DeviceRoofline(1e12, 1e11, 1e11, 1_000.0)
    model = tile_analytical.AnalyticalTileModel(rl, step_ns=50_000.0, scratchpad=2**30)
    configs = tiles.legal_configs("softmax", (256, 256))
    est = model.predict_ns("softmax", (256, 256), "float32", configs)
    steps = [tiles.tile_cost("softmax", (256, 256), "float32", c).steps for c in configs]
    assert est.shape == (len(configs),) and np.argmin(est) == np.argmin(steps)


@pytest.mark.measures
def test_a_grid_step_of_the_xla_loop_costs_a_fraction_of_an_interpreted_one(tmp_path, monkeypatch):
    """Why the CPU labels use the XLA loop: Pallas' interpret mode copies the 1 MiB operand on every
    step of the micro-benchmark, the XLA loop slices one block (measured: tens of us against about
    one). Each lowering has its own cache file."""
    monkeypatch.setenv("TPUCOST_CACHE_DIR", str(tmp_path))
    tile_analytical.step_overhead_ns.cache_clear()
    loop = tile_analytical.step_overhead_ns(repeats=3, lowering="xla_loop")
    interpreted = tile_analytical.step_overhead_ns(repeats=3, lowering="pallas")
    tile_analytical.step_overhead_ns.cache_clear()
    assert loop < interpreted / 5, (loop, interpreted)
    assert {p.name.split("-")[2] for p in tmp_path.glob("step-overhead-*.json")} == {"xla_loop", "pallas"}


@pytest.mark.measures
def test_step_overhead_is_measured_once_per_device_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TPUCOST_CACHE_DIR", str(tmp_path))
    tile_analytical.step_overhead_ns.cache_clear()
    first = tile_analytical.step_overhead_ns(repeats=2)
    (path,) = tmp_path.glob("step-overhead-*.json")
    assert device.fingerprint()["id"] in path.name and first >= 0

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again instead of reading the cache")

    monkeypatch.setattr(tile_analytical, "_copy_kernel_s", no_measuring)
    tile_analytical.step_overhead_ns.cache_clear()  # a new process: only the file remains
    assert tile_analytical.step_overhead_ns(repeats=2) == first
    path.write_text("{ not json")
    tile_analytical.step_overhead_ns.cache_clear()
    with pytest.raises(AssertionError, match="measured again"):  # an unreadable cache is measured again
        tile_analytical.step_overhead_ns(repeats=2)
    tile_analytical.step_overhead_ns.cache_clear()
