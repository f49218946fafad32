"""The paper's two learning problems, one module each, with the same verbs: `tpucost.method.tasks.kernel`
(each kernel's runtime, Table 2) and `tpucost.method.tasks.tile` (ranking a kernel's tile-size
configurations, Table 3).

Each module defines its batch (`KernelBatch`, `TileBatch`), what it reads of a data set (the
Protocols `KernelData`, `TileData`), its `Task` for the shared training loop
(`tpucost.method.train.train_and_evaluate`: batches, loss, metadata), and the same verbs with the
same argument order: `METHODS`, `LOSSES`, `DEFAULT_LOSS`, `default_model_dir(split, ...)`,
`train_model(dataset, split, workdir, config)`, `predict(model, ..., graphs, ...)` and
`load_model(path=None)`, which returns a `TrainedModel` (model, norm, config, meta) in both.
Training every method of a split and scoring it beside the baselines is an experiment: `tpucost.experiments.kernel_experiments` and `tpucost.experiments.tile_experiments`
(both with `train_models` and `evaluate_models`). Import the task modules themselves:
``from tpucost.method.tasks import kernel``.
"""
