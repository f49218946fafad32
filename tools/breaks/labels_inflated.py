"""Every label of `measure.measure_kernels` BREAK_FACTOR times too long (default 1.1: a 10% bias)."""

from __future__ import annotations

import os


def pytest_configure(config):
    import dataclasses

    from tpucost.method import measure

    factor = float(os.environ.get("BREAK_FACTOR", "1.1"))
    real = measure.measure_kernels

    def inflated(*args, **kwargs):
        m = real(*args, **kwargs)
        return dataclasses.replace(m, runtime_ns={k: v * factor for k, v in m.runtime_ns.items()})

    measure.measure_kernels = inflated
