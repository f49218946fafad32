"""The paper's two learning problems, one module each: `tpucost.method.tasks.kernel` (each kernel's runtime,
Table 2) and `tpucost.method.tasks.tile` (ranking a kernel's tile-size configurations, Table 3).

A task builds batches, defines the loss and owns its experiments (training every method of a
split, evaluating them); the loop (`tpucost.method.train.train_and_evaluate`), the models and the
checkpoints are shared. Import the task modules themselves: ``from tpucost.method.tasks import kernel``.
"""
