"""Figures say what they show: the kernel timeline draws every call of the run it names."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import dataclasses  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402

from tpucost import plots  # noqa: E402
from tpucost.measure import Measurement  # noqa: E402


def _measurement(n_kernels: int) -> Measurement:
    names = [f"fusion.{i}" for i in range(n_kernels)]
    timeline = [(name, 1000.0 * i, 500.0 + 10 * i) for i, name in enumerate(names)]
    fields = {f.name: None for f in dataclasses.fields(Measurement)}
    fields.update(runtime_ns={n: d for n, _, d in timeline}, runs_seen={n: 1 for n in names},
                  calls_per_run={n: 1 for n in names}, wall_ns_per_run=[1000.0 * n_kernels + 2000.0],
                  run_span_ns=[1000.0 * n_kernels], hlo_text="", missing=[], nested=[], async_kernels=["fusion.0"],
                  module_name="jit_f", backend="cpu", device_kind="cpu", timeline=timeline)
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
