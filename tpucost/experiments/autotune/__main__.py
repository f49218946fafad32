"""``python -m tpucost.experiments.autotune``: the fresh process of `tpucost.experiments.autotune.remeasure`."""

from tpucost.experiments.autotune.remeasure import main

main()
