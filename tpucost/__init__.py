"""tpucost: learned performance models for tensor programs.

A tutorial package after "A Learned Performance Model for Tensor Processing Units"
(Kaufman et al., MLSys 2021). Data flows one way, one module per stage:

    hlo -> kernels -> features -> measure -> programs -> data -> models -> train -> ...
"""

__version__ = "0.1.0"
