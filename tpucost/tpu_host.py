"""Whether this machine has a TPU chip, asked without starting JAX; libtpu set up for machines without one.

With libtpu installed (the ``tpu`` extra) on a machine without a TPU, two things get in the way of
compiling for a TPU there (`tpucost.experiments.compiler`), both checked with libtpu 0.0.23 and 0.0.42.1:

* every process that starts JAX prints libtpu's complaints that it found no TPU VM metadata
  (``could not determine TPU accelerator type``, ``unexpected worker hostname``) before falling
  back to the CPU. ``TPU_ACCELERATOR_TYPE`` and ``TPU_WORKER_HOSTNAMES`` keep it quiet;
* libtpu lets one process at a time load it (``/tmp/libtpu_lockfile``: a second one fails with
  ``ABORTED: Internal error when accessing libtpu multi-process lockfile``), which guards a real
  chip. Without a chip there is nothing to guard, and two processes that compile (test workers, a
  notebook beside a command) must not fail: ``ALLOW_MULTIPLE_LIBTPU_LOAD=1`` lifts it.

`quiet_libtpu_startup` sets these variables, only where `tpu_chip_here` is False and only when they
are unset: on a TPU VM libtpu reads the real values and one process holds the chip.
``import tpucost`` calls it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

__all__ = ["libtpu_installed", "tpu_chip_here", "quiet_libtpu_startup"]

#: What libtpu is told on a machine without a TPU: one v5e chip, this host, any number of processes.
QUIET_LIBTPU_ENV = {
    "TPU_ACCELERATOR_TYPE": "v5litepod-1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


def libtpu_installed() -> bool:
    """Whether libtpu (JAX's TPU runtime and compiler, the ``tpu`` extra) is importable."""
    return importlib.util.find_spec("libtpu") is not None


def tpu_chip_here(dev: Path = Path("/dev")) -> bool:
    """Whether this machine has a TPU chip: the device files of a TPU VM (``/dev/accel<n>`` on
    v2-v4, ``/dev/vfio/<n>`` on v5e and later)."""
    return any(dev.glob("accel[0-9]*")) or any(p.name.isdigit() for p in dev.glob("vfio/*"))


def quiet_libtpu_startup() -> None:
    """Set `QUIET_LIBTPU_ENV`'s variables that are unset, unless this machine has a TPU chip."""
    if not tpu_chip_here():
        for key, value in QUIET_LIBTPU_ENV.items():
            os.environ.setdefault(key, value)
