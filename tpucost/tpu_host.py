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

`quiet_libtpu_startup` sets these variables, only where `runs_on_tpu` is False and only when they
are unset: on a TPU VM libtpu reads the real values and one process holds the chip.
``import tpucost`` calls it.

Whether there is a TPU is asked of JAX once its backends are up (`runs_on_tpu`:
``jax.default_backend()``); the device files (`tpu_chip_here`) answer only before that, where starting
JAX is not allowed (libtpu reads the variables above when it starts).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["libtpu_installed", "tpu_chip_here", "runs_on_tpu", "quiet_libtpu_startup"]

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
    """Whether this machine has a TPU chip, by its device files alone (``/dev/accel<n>`` on v2-v4,
    ``/dev/vfio/<n>`` on v5e and later): the answer before JAX's backends are up. After, ask
    `runs_on_tpu`."""
    return any(dev.glob("accel[0-9]*")) or any(p.name.isdigit() for p in dev.glob("vfio/*"))


def _jax_backends_started() -> bool:
    """Whether JAX's backends are up in this process, asked without starting them: False while jax
    is not imported, else `tpucost.compat.backend_started` (jax's private API, read there alone)."""
    if "jax" not in sys.modules:  # this module stays free of jax: `import tpucost` calls it first
        return False
    from tpucost.compat import backend_started

    return backend_started()


def runs_on_tpu(dev: Path = Path("/dev")) -> bool:
    """Whether this process has a TPU: once JAX's backends are up, JAX's answer
    (``jax.default_backend() == "tpu"``); before, the device files (`tpu_chip_here`), so that asking
    never starts JAX."""
    if _jax_backends_started():
        import jax

        return jax.default_backend() == "tpu"
    return tpu_chip_here(dev)


def quiet_libtpu_startup() -> None:
    """Set `QUIET_LIBTPU_ENV`'s variables that are unset, unless this process has a TPU (`runs_on_tpu`)."""
    if not runs_on_tpu():
        for key, value in QUIET_LIBTPU_ENV.items():
            os.environ.setdefault(key, value)
