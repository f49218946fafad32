"""The data sets tpucost learns from, one storage and one collection for both tasks.
The splits they are cut into are part of the method (`tpucost.method.splits`).

* `tpucost.experiments.data.graph_table`: many small graphs in flat arrays with offsets, per-graph columns and
  ragged groups; one npz per table, one validator naming the file and the field.
* `tpucost.experiments.data.collection`: a resumable measurement folder (log, device claim, quiet-machine
  wait, merge, provenance) that takes a measure function.
* `tpucost.experiments.data.kernel`: the kernel data set (the kernel task: `tpucost.method.tasks.kernel`).
* `tpucost.experiments.data.tile`: the tile data set (the tile task: `tpucost.method.tasks.tile`).
* `tpucost.experiments.data.additivity`: whether a collection's kernel labels add up to program wall times.
"""
