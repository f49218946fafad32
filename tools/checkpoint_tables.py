"""Print the Markdown result tables of the bundled checkpoints from their ``evaluation.json``.

    python tools/checkpoint_tables.py [CHECKPOINTS_DIR]

Used to write ``tpucost/bundled/checkpoints/README.md``: every number there comes from the files
the training commands wrote, none typed by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tpucost import data
from tpucost.tasks import kernel

HEADER = "| method | MAPE >=5us (%) | MAPE <5us (%) | Kendall tau | rows | programs |\n| --- | --- | --- | --- | --- | --- |"


def _row(method: str, r: dict) -> str:
    return (f"| {method} | {r['mape_ge5us']:.1f} | {r['mape_lt5us']:.1f} | {r['kendall_median']:.3f} "
            f"| {r['n_kernels']} | {r['n_programs']} |")


def tables(report: dict) -> str:
    """The section of one split: sizes, all-kernel and unseen tables, dispatch overhead, training time."""
    results = report["results"]
    out = [f"## {report['split']} split: {report['train_programs']} / {report['val_programs']} / "
           f"{report['test_programs']} programs; {report['train_kernels']} train / {report['val_kernels']} "
           f"validation / {report['test_kernels']} test kernels", "", "all kernels the test programs ran:", "", HEADER]
    out += [_row(m, results[m]) for m in kernel.METHODS if m in results]
    out += ["", "unseen test kernels only:", "", HEADER]
    out += [_row(m, results[m]["unseen"]) for m in kernel.METHODS if m in results]
    dispatch = report.get("dispatch_ns_per_kernel")
    if dispatch is not None:
        out += ["", f"Dispatch overhead per kernel (training programs' runs): {dispatch:.0f} ns"]
    seconds = ", ".join(f"{m} {s:.0f}" for m, s in report["train_seconds"].items())
    epochs = ", ".join(f"{m} {len(h['val_loss'])}" for m, h in report.get("histories", {}).items())
    out += ["", f"Training seconds: {seconds}; epochs run: {epochs}"]
    return "\n".join(out)


def search_table(search: dict) -> str:
    """The hyperparameter search (``tools/hparam_search.py``): one row per trial, validation programs only."""
    out = [f"## Hyperparameter search (validation programs of the random split, {search['trials'][0]['val_programs']} programs)",
           "", "| trial | changed from the defaults | val MAPE >=5us (%) | val MAPE <5us (%) | val Kendall tau "
           "| epochs | seconds |", "| --- | --- | --- | --- | --- | --- | --- |"]
    base = search["trials"][0]["config"]
    for t in search["trials"]:
        changed = {k: v for k, v in t["config"].items() if k != "model" and v != base[k]}
        changed |= {k: v for k, v in t["config"]["model"].items() if v != base["model"][k]}
        out.append(f"| {t['trial']} | {changed or '-'} | {t['val_mape_ge5us']:.1f} | {t['val_mape_lt5us']:.1f} "
                   f"| {t['val_kendall_median']:.3f} | {t['epochs_run']} | {t['seconds']:.0f} |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else data.bundled_dir() / "checkpoints"
    if (root / "hparam_search.json").exists():
        print(search_table(json.loads((root / "hparam_search.json").read_text())), end="\n\n")
    for split in data.SPLITS:
        path = root / f"kernel-{split}" / "evaluation.json"
        if path.exists():
            print(tables(json.loads(path.read_text())), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
