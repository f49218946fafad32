"""The autotuner's search core: a configuration space (`space`), strategies that propose the next
configuration (`strategies`) and searches that spend a device budget on them (`search`). What a
candidate costs comes from an evaluator (`search.Evaluator`); the evaluators, the programs to tune
and the paper's protocol are in `tpucost.experiments.autotune`. Import the modules themselves:
``from tpucost.method.autotune import search``.
"""
