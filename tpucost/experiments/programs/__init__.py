"""The program corpus: small JAX programs whose XLA kernels make up the kernel data set.

* `tpucost.experiments.programs.blocks`: building blocks (dense, conv, norms, attention, ...), `Variant`, `Model`;
* `tpucost.experiments.programs.families`: the families (``mlp``, ``cnn``, ..., ``random_ops``): the registry
  :data:`FAMILIES` (a `ProgramFamily` record each) and the sets derived from it;
* `tpucost.experiments.programs.random_ops`: the ``random_ops`` family's blocks, one kind of operation each;
* `tpucost.experiments.programs.keras_apps`: the ``keras_*`` families, ``keras.applications`` models (written
  by others; need ``pip install "tpucost[corpus]"``);
* `tpucost.experiments.programs.diffrax_models`: ``diffrax_ode``, neural ODE solves (written by others; the same extra);
* `tpucost.experiments.programs.jraph_models`: ``jraph_gnn``, graph networks of jraph's model zoo (written by others);
* `tpucost.experiments.programs.corpus`: program ids, the three forms, configurations (`CONFIGURATIONS`),
  `generate_programs`, `compile_program`, kernel signatures.

The corpus's public names are importable from the package itself (``from tpucost.experiments.programs import
generate_programs``); ``python -m tpucost.experiments.programs`` prints kernel counts per configuration.
"""

from tpucost.experiments.programs.blocks import Model, Variant
from tpucost.experiments.programs.corpus import (
    CONFIGURATIONS,
    FORMS,
    CompileConfig,
    Program,
    applicable_configurations,
    buildable,
    compile_option_configurations,
    compile_program,
    configurations_for,
    count_kernels,
    generate_programs,
    kernel_signatures,
    loss_from_output,
    make_program,
    parse_program_id,
    program_from_id,
    program_ids,
    survey,
)
from tpucost.experiments.programs.families import (
    DEFAULT_FAMILIES,
    FAMILIES,
    FAMILY_GROUPS,
    WRITTEN_BY_OTHERS,
    WRITTEN_HERE,
    ProgramFamily,
    family_groups,
)

__all__ = [
    "Model",
    "Variant",
    "CONFIGURATIONS",
    "FORMS",
    "CompileConfig",
    "Program",
    "applicable_configurations",
    "buildable",
    "compile_option_configurations",
    "compile_program",
    "configurations_for",
    "count_kernels",
    "generate_programs",
    "kernel_signatures",
    "loss_from_output",
    "make_program",
    "parse_program_id",
    "program_from_id",
    "program_ids",
    "survey",
    "FAMILIES",
    "DEFAULT_FAMILIES",
    "WRITTEN_HERE",
    "WRITTEN_BY_OTHERS",
    "FAMILY_GROUPS",
    "ProgramFamily",
    "family_groups",
]
