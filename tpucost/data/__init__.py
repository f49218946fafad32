"""The data sets tpucost learns from, one storage and one collection for both tasks.

* `tpucost.data.graph_table`: many small graphs in flat arrays with offsets, per-graph columns and
  ragged groups; one npz per table, one validator naming the file and the field.
* `tpucost.data.collection`: a resumable measurement folder (log, device claim, quiet-machine
  wait, merge, provenance) that takes a measure function.
* `tpucost.data.splits`: train / validation / test splits by the unit that must not leak.
* `tpucost.data.kernel`: the kernel data set (the kernel task: `tpucost.tasks.kernel`).
* `tpucost.data.tile`: the tile data set (the tile task: `tpucost.tasks.tile`).
* `tpucost.data.additivity`: whether a collection's kernel labels add up to program wall times.
* `tpucost.data.overlap`: how many of a program's kernels the kernel data (and a split's training
  part) already holds.
"""
