"""Named experiment configurations, one module per experiment behind the paper's figures (flax's
``configs/*.py: get_config()`` style). Each module's ``get_config()`` returns a frozen dataclass
holding the experiment's defaults, and ``get_smoke_config()`` tiny settings for tests; the CLI and
the experiment functions read their defaults there, so each default is written once.

* `tpucost.experiments.configs.table2`: the kernel task (Table 2, leave-group-out, learning curve,
  hyperparameter search);
* `tpucost.experiments.configs.table3`: the tile task (Table 3, split seeds, leave-family-out);
* `tpucost.experiments.configs.autotune`: the autotuning figure (budgets, seeds, starts, arms, search).
"""
