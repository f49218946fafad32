"""The paper's method, and nothing else: read it in this order.

Each module is one step of "A Learned Performance Model for Tensor Processing Units"
(Kaufman et al., MLSys 2021) and names the notebook section that shows it at work.

1. `hlo`: parse XLA's optimized HLO text (notebook 01, section 2).
2. `kernels`: cut a module into kernels, one fused computation each (notebook 01, section 3).
3. `features`: a kernel as a graph of opcodes with node features, and a batch of them as one
   `jraph.GraphsTuple` (notebook 01, sections 4-6).
4. `backends`, `device`, `trace_events`, `measure`: a kernel's runtime label, measured on the device
   at hand one kernel at a time (notebook 02, sections 1-2).
5. `splits`: train / validation / test parts by program or by family (notebook 02, section 4).
6. `models`: GraphSAGE, the LSTM baseline and the tile model (notebook 03, section 1).
7. `losses`: every loss of both tasks, one signature (notebook 03, section 1; notebook 04, section 3).
8. `train`: the training loop over any task (notebook 03, section 2).
9. `metrics`: MAPE, Kendall's tau, top-k slowdown (notebook 03, section 4; notebook 04, section 4).
10. `analytical`, `baselines`: the roofline model and the constant beside every learned model
    (notebook 03, section 4).
11. `tasks.kernel`, `tasks.tile`: the two learning problems, each a `Task` with its batches, its
    loss and `predict` (notebooks 03 and 04).
12. `checkpoint`, `correction`, `costmodel`: a trained model saved, loaded, corrected for the device
    at hand and asked about a whole program (notebook 03, section 5).
13. `autotune`: the search core the cost model plugs into (notebook 05, section 2).

Nothing here imports `tpucost.experiments` (the program corpus, the tile kernels, the data sets and
their collection, calibration, the autotuning protocol, reports and tables); a test keeps it so.
"""
