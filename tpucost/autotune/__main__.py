"""``python -m tpucost.autotune``: the fresh process of `tpucost.autotune.remeasure`."""

from tpucost.autotune.remeasure import main

main()
