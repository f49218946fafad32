"""tpucost: learned performance models for tensor programs.

A tutorial package after "A Learned Performance Model for Tensor Processing Units"
(Kaufman et al., MLSys 2021). Data flows one way, one module per stage:

    hlo -> kernels -> features -> measure -> programs -> data -> models -> checkpoint -> train
        -> tasks (kernel, tile) -> costmodel -> ...
"""

from tpucost.tpu_host import quiet_libtpu_startup

__version__ = "0.1.0"

quiet_libtpu_startup()  # before anything starts JAX: libtpu's complaints on a machine without a TPU

__all__ = ["CostModel"]


def __getattr__(name: str):
    """`tpucost.CostModel` without importing jax for `import tpucost.method.hlo`."""
    if name == "CostModel":
        from tpucost.method.costmodel import CostModel

        return CostModel
    raise AttributeError(f"module 'tpucost' has no attribute {name!r}")
