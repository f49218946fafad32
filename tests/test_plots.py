"""Figures say what they show: the kernel timeline draws every call of the run it names."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import dataclasses  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tpucost.experiments import plots
from tpucost.method.measure import Measurement


def _measurement(n_kernels: int) -> Measurement:
    names = [f"fusion.{i}" for i in range(n_kernels)]
    timeline = [(name, 1000.0 * i, 500.0 + 10 * i) for i, name in enumerate(names)]
    fields = {f.name: None for f in dataclasses.fields(Measurement)}
    fields.update(
        runtime_ns={n: d for n, _, d in timeline},
        runs_seen={n: 1 for n in names},
        calls_per_run={n: 1 for n in names},
        wall_ns_per_run=[1000.0 * n_kernels + 2000.0],
        run_span_ns=[1000.0 * n_kernels],
        hlo_text="",
        missing=[],
        nested=[],
        async_kernels=["fusion.0"],
        module_name="jit_f",
        backend="cpu",
        device_kind="cpu",
        timeline=timeline,
    )
    return Measurement(**fields)


def test_kernel_timeline_draws_every_call_and_says_so():
    m = _measurement(106)
    ax = plots.kernel_timeline(m, max_rows=40)
    bars = [p for p in ax.patches]
    assert len(bars) == 106
    assert "all 106 kernel calls" in ax.get_title() and "39 longest" in ax.get_title()
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 40 and labels[-1] == "other (67 kernels)"
    right = max(b.get_x() + b.get_width() for b in bars)
    assert right * 1e3 >= m.timeline[-1][1]  # the bars reach the run's last kernel
    plt.close("all")

    small = plots.kernel_timeline(_measurement(5))
    assert "all 5 kernel calls of one run" in small.get_title() and "longest" not in small.get_title()
    plt.close("all")


HLO = """HloModule m

fused (p0: f32[4], p1: f32[4]) -> f32[4] {
  p0 = f32[4]{0} parameter(0)
  p1 = f32[4]{0} parameter(1)
  a = f32[4]{0} add(p0, p1)
  ROOT m = f32[4]{0} multiply(a, p1)
}

ENTRY main (x: f32[4], y: f32[4]) -> f32[4] {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  ROOT f = f32[4]{0} fusion(x, y), kind=kLoop, calls=fused
}
"""


def test_draw_kernel_counts_ops_as_the_kernel_table_does():
    from tpucost.method import hlo, kernels

    (kernel,) = kernels.decompose(hlo.parse_module(HLO))
    ops = int(plots.kernel_table([kernel])["ops"].iloc[0])
    title = plots.draw_kernel(kernel).get_title()
    assert ops == 2 and f"{ops} ops + 2 inputs" in title
    plt.close("all")


def test_learning_curves_against_kernels_seen_with_the_noise_floor():
    import numpy as np

    histories = {
        "long": {"train_loss": [1.0, 0.5, 0.3, 0.2], "val_loss": [1.1, 0.6, 0.4, 0.45]},
        "short": {"train_loss": [0.9, 0.4], "val_loss": [1.0, 0.5]},
    }
    ax = plots.learning_curves(
        histories, examples_per_epoch={"long": 10_000, "short": 2_000}, noise_floor=0.05, title="t"
    )
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert np.allclose(lines["long validation"].get_xdata(), [10, 20, 30, 40])  # thousands of kernels
    assert np.allclose(lines["short train"].get_xdata(), [2, 4])
    assert np.allclose(lines["label noise (re-measured labels)"].get_ydata(), 0.05)
    assert "kernels seen" in ax.get_xlabel() and ax.get_title() == "t"
    plt.close("all")
    assert plots.learning_curves(histories).get_xlabel() == "epoch"  # the old call still works
    plt.close("all")


def test_predicted_vs_measured_shares_axes_and_names_the_error():
    import numpy as np

    rng = np.random.default_rng(0)
    measured = np.exp(rng.uniform(5, 15, 500))
    predictions = {
        "good": measured * np.exp(rng.normal(0, 0.1, 500)),
        "bad": measured * np.exp(rng.normal(0, 1.5, 500)),
    }
    axes = plots.predicted_vs_measured(predictions, measured, title="500 kernels")
    assert axes[0].get_xlim() == axes[1].get_xlim() and axes[0].get_ylim() == axes[1].get_ylim()
    assert all("MAPE" in ax.get_title() and "within 2x" in ax.get_title() for ax in axes)
    assert int(axes[0].get_title().split("MAPE ")[1].split("%")[0]) < int(
        axes[1].get_title().split("MAPE ")[1].split("%")[0]
    )
    assert "2x off" in [ln.get_label() for ln in axes[0].get_lines()]
    assert axes[0].figure._suptitle.get_text() == "500 kernels"
    clims = {tuple(c.get_clim()) for ax in axes for c in ax.collections}
    assert len(clims) == 1  # one colour scale for every panel
    plt.close("all")
    scatter = plots.predicted_vs_measured(predictions, measured, hexbin=False)
    assert len(scatter) == 2
    plt.close("all")


def test_error_by_kind_draws_the_noise_and_program_kernels_draws_every_bar():
    import pandas as pd

    table = pd.DataFrame(
        {"median_ape": [10.0, 40.0], "count": [100, 5]}, index=pd.Index(["kLoop", "dot"], name="kind")
    )
    ax = plots.error_by_kind(table, noise=3.2, title="gnn")
    assert ax.get_title() == "gnn" and any("label noise" in ln.get_label() for ln in ax.get_lines())
    plt.close("all")
    ax = plots.program_kernels(
        ["a", "b", "c"], {"measured": [1.0, 2.0, 3.0], "predicted": [1.5, 2.5, float("nan")]}, title="Net"
    )
    dots = {ln.get_label(): ln for ln in ax.get_lines()}
    assert len(dots["measured"].get_xdata()) == len(dots["predicted"].get_xdata()) == 3  # a dot per kernel
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    plt.close("all")


@pytest.mark.slow  # draws every figure of the bundled data set: 4-7 s
def test_data_set_figures_draw_the_bundled_data(bundled_kernels):
    """Notebook 02's figures on the bundled data: every kernel counted, no empty size bins at
    the low end, the additivity axis not squeezed by one extreme pair."""
    from tpucost.experiments.data import additivity

    ds = bundled_kernels
    frame = ds.to_frame()
    opcodes = plots.opcode_frequencies(ds)
    assert not opcodes.patches and len(opcodes.get_lines()[0].get_xdata()) > 5  # dots, not log-axis bars
    sizes = plots.kernel_sizes(frame)
    heights = [p.get_height() for p in sizes.patches]
    widths = [p.get_width() for p in sizes.patches]  # whole sizes per bin
    assert all(float(w).is_integer() for w in widths)
    assert sum(h * w for h, w in zip(heights, widths, strict=True)) == pytest.approx(len(frame))
    small = [h for p, h in zip(sizes.patches, heights, strict=True) if p.get_x() + p.get_width() < 20]
    assert small and all(h > 0 for h in small), small  # integer sizes: no empty bins at the low end
    # kernels per size, not per bin: a bin of two sizes is not twice as tall for holding two
    per_size = frame["n_nodes"].value_counts()
    for p, h in zip(sizes.patches, heights, strict=True):
        inside = per_size[(per_size.index > p.get_x()) & (per_size.index < p.get_x() + p.get_width())]
        assert h == pytest.approx(inside.sum() / p.get_width())
    table = additivity.additivity_table()
    ax = plots.additivity_hist(table, clip=2.5)
    assert ax.get_xlim()[1] <= 2.5
    notes = [t.get_text() for t in ax.texts]
    assert (table["additivity_ratio"] > 2.5).any() == any("not shown" in n for n in notes)
    plt.close("all")


def test_coinciding_top_k_curves_stay_visible():
    ax = plots.top_k_curves({"rank (hinge)": [0.0, 0.0, 0.0], "MSE": [0.0, 0.0, 0.0]})
    first, second = ax.get_lines()[:2]
    assert list(first.get_xdata()) != list(second.get_xdata())  # shifted sideways
    assert first.get_linestyle() != second.get_linestyle() and first.get_marker() != second.get_marker()
    plt.close("all")


@pytest.mark.slow  # draws the bundled data set's heatmap: 4 s
def test_feature_heatmap_names_features_on_rows_at_a_legible_size():
    from tpucost.experiments.data import kernel as kernel_data
    from tpucost.method import features

    graph = kernel_data.load_dataset().graph(0)
    ax = plots.feature_heatmap(graph, features.NODE_FEATURE_NAMES)
    rows = [t.get_text() for t in ax.get_yticklabels()]
    nonzero = [
        n for n, col in zip(features.NODE_FEATURE_NAMES, graph.node_features.T, strict=True) if col.any()
    ]
    assert rows == nonzero  # every non-zero feature named, in order
    assert min(t.get_fontsize() for t in ax.get_yticklabels()) >= 8
    assert len(ax.get_xticklabels()) == len(graph.opcodes)
    plt.close("all")


def test_overhead_shares_draws_one_series_per_lowering_in_percent():
    ax = plots.overhead_shares([4, 16, 64], {"pallas": [0.5, 0.7, 0.9], "xla_loop": [0.05, 0.1, 0.2]})
    series = ax.collections
    assert len(series) == 2 and ax.get_xscale() == "log"
    np.testing.assert_allclose(series[1].get_offsets()[:, 1], [5.0, 10.0, 20.0])
    assert all(s.get_edgecolor().shape[0] and s.get_edgecolor()[0][3] > 0 for s in series)  # visible
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == ["pallas", "xla_loop"]
    plt.close("all")
