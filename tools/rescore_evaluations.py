"""Score the bundled kernel checkpoints again on the bundled data set, without retraining.

    python tools/rescore_evaluations.py [MODEL_DIR ...]   # default: the bundled random and hard splits

Writes each folder's ``evaluation.json`` with today's `kernel_experiments.evaluate_models` results of
the same saved models on the same split, everything else in the file kept (what the evaluation
reports changed, never the models). Refuses a data set that does not give the split's recorded
test part.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tpucost.experiments import kernel_experiments
from tpucost.experiments.data import kernel as kernel_data
from tpucost.files import read_json_object, write_json_atomic
from tpucost.method.tasks import kernel


def rescore(model_dir: Path, dataset: kernel_data.KernelDataset) -> None:
    path = model_dir / kernel_experiments.EVALUATION_FILE
    report = read_json_object(path)
    parts = kernel_data.split(dataset, report["split"])
    if (report["test_kernels"], report["test_programs"]) != (len(parts.test), len(parts.test_ids)):
        raise SystemExit(
            f"error: {path} was scored on {report['test_kernels']} test kernels of {report['test_programs']} "
            f"programs; this data set's {report['split']} split has {len(parts.test)} of {len(parts.test_ids)}"
        )
    report["results"] = kernel_experiments.evaluate_models(
        dataset, report["split"], model_dir, list(report["results"])
    )
    write_json_atomic(path, report)
    print(f"re-scored {path}")


def main(argv: list[str]) -> int:
    dataset = kernel_data.load_dataset()
    folders = [Path(a) for a in argv] or [kernel.default_model_dir(s) for s in kernel_data.SPLITS]
    for folder in folders:
        rescore(folder, dataset)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
