"""The experiments and their machinery: what the method is trained, tested and compared on.

* `programs`: the corpus of JAX programs (families written here and by others);
* `tiles`: the tile task's Pallas kernel families, their legal block shapes and costs;
* `data`: the kernel and tile data sets and their resumable collection;
* `compiler`: compiling for a target without its chip (a TPU v5e on this CPU);
* `calibration`: the per-device correction of a trained model;
* `kernel_experiments`, `tile_experiments`: every method of a split trained and scored (Tables 2, 3);
* `autotune`: the paper's autotuning protocol, its evaluators and workers (Fig. 4);
* `configs`: the named configuration of each experiment, the one place its defaults live;
* `results`, `plots`, `verdicts`: tables, figures and sentences computed from the numbers.

It uses `tpucost.method`; nothing there uses it.
"""
