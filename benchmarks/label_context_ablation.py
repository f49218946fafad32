"""Is the program around a small kernel why the merged first pack's hard split got worse?

`benchmarks/label_context.py` measured the same small kernel 1.4x slower inside the pending folder's
large Keras programs than inside the bundled data set's programs. A data set merged from the two keeps
each kernel's least label, but a kernel measured only in the pending folder keeps a label from a large
program. This script writes the merged data set without those kernels where the label is under 5 us
(``--drop small``: the kernels the context moves), from 5 us (``--drop large``) or all of them
(``--drop all``), so that training the hard split on it (the commands in
``docs/results/first_pack_retrain.txt``) tells how much of the regression they cause.

Usage: ``python benchmarks/label_context_ablation.py [MERGED OUT] [--drop small|large|all]``, where MERGED is
``python -m lab data merge --out MERGED tpucost/bundled/kernels_cpu lab/pending/be3048b01916``;
without them (``make bench``) it merges the two folders into a temporary folder and writes OUT beside it.
Reads and writes data sets only; measures nothing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection

FIRST = Path(__file__).resolve().parents[1] / "tpucost" / "bundled" / "kernels_cpu"
#: The same device's measurements of the families the bundled data set lacks.
PENDING = Path(__file__).resolve().parents[1] / "lab" / "pending" / "be3048b01916"
#: Labels below this many nanoseconds are the ones the program around them moves most.
SMALL_NS = 5_000.0


def merged_first_pack(path: str | None) -> tuple[Path, kernel_data.KernelDataset]:
    """The merged first pack in ``path``, or (None) the two folders merged now into a temporary folder."""
    if path is None:
        out = Path(tempfile.mkdtemp(prefix="merged_first_pack_")) / "merged"
        print(f"merging {FIRST} and {PENDING} into {out}")
        return out, kernel_collection.merge([FIRST, PENDING], out)
    return Path(path), kernel_data.load_dataset(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "merged", nargs="?", help="the merged first pack (default: merge the two folders now)"
    )
    parser.add_argument("out", nargs="?", help="where to write the data set (default: beside the merge)")
    parser.add_argument("--drop", choices=("small", "large", "all"), default="small")
    args = parser.parse_args()
    if (args.merged is None) != (args.out is None):
        parser.error("give both MERGED and OUT, or neither")
    merged_dir, merged = merged_first_pack(args.merged)
    out = Path(args.out) if args.out is not None else merged_dir.parent / f"without_{args.drop}"
    first = kernel_data.load_dataset(FIRST)
    pending_only = ~np.isin(merged.kernel_hash, first.kernel_hash)
    small = merged.runtime_ns < SMALL_NS
    drop = pending_only & {"small": small, "large": ~small, "all": True}[args.drop]
    kept = merged.subset(np.flatnonzero(~drop))
    kernel_data.save_dataset(kept, out)
    shutil.copy(merged_dir / "log.jsonl", out / "log.jsonl")  # what evaluate reads
    print(
        f"{len(merged)} kernels merged: {len(merged) - pending_only.sum()} in the bundled data set, "
        f"{pending_only.sum()} only in the pending folder, {drop.sum()} of those left out ({args.drop}); "
        f"{len(kept)} kernels written to {out}"
    )


if __name__ == "__main__":
    main()
