"""How repeatable a kernel label is: the same (program, configuration) measured three times in a
row, one pinned core, for each number of traced repeats.

    python benchmarks/label_repeatability.py [--programs 10] [--seed 22] [--family random_ops]
                                             [--repeats 5,5,20] [--json]

Each setting (one per entry of ``--repeats``, repeats allowed) runs in a fresh process (pinned
before JAX starts) over the same corpus programs
(``program_ids(programs, seed, [family])``, configuration ``default``), each measured with
`tpucost.experiments.data.kernel_collection.measure_program` (the collection's protocol: labels are minima
over the traced runs and over the settling rounds) three times. Prints, per setting, the relative
difference ``|b - a| / a`` of every kernel between the first and the second measurement (what a
re-measurement sees of a label taken in one pass, as collection takes it) and between the second
and the third (both warm), median and 90th percentile, over all kernels and over those >= 5 us;
and, from the second process on, between its first measurement and the first process's (what a
label taken in another process sees: other buffer addresses, another moment of the host). Also
the measuring seconds per program. The reference is the first process, measured in the same run:
the ratios say what more repeats buy.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np

PROGRAM = """
import json, sys, time
from tpucost.method import device
device.pin_to_one_core()
import numpy as np
from tpucost.experiments.data.kernel_collection import measure_program
from tpucost.experiments.programs import program_from_id, program_ids

n, seed, family, repeats = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
pairs = {"first_second": [], "second_third": []}
seconds, first = [], {}
for pid in program_ids(n, seed, [family]):
    program = program_from_id(pid)
    t0 = time.perf_counter()
    labels = []
    for _ in range(3):
        records, _ = measure_program(program, "default", repeats)
        labels.append(dict(zip(records.kernel_hash.tolist(), records.runtime_ns.tolist())))
    seconds.append((time.perf_counter() - t0) / 3)
    first[pid] = labels[0]
    for name, (a, b) in (("first_second", labels[:2]), ("second_third", labels[1:])):
        pairs[name] += [(a[k], abs(b[k] - a[k]) / a[k]) for k in a if k in b]
print(json.dumps({"pairs": pairs, "first": first, "seconds_per_measurement": seconds,
                  "device": device.fingerprint()["id"]}))
"""


def run_setting(programs: int, seed: int, family: str, repeats: int) -> dict:
    """One setting in a fresh process: its kernel pairs and seconds per measurement."""
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(programs), str(seed), family, str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(pairs: list[list[float]]) -> dict[str, float | int | None]:
    """Median and 90th percentile of the relative differences, all kernels and those >= 5 us."""
    rel = np.array([r for _, r in pairs])
    big = np.array([r for ns, r in pairs if ns >= 5_000])

    def q(x: np.ndarray, p: float) -> float | None:
        return float(np.quantile(x, p)) if len(x) else None

    return {"n": len(rel), "median": q(rel, 0.5), "p90": q(rel, 0.9), "n_ge5us": len(big),
            "median_ge5us": q(big, 0.5), "p90_ge5us": q(big, 0.9)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--family", default="random_ops")
    ap.add_argument("--repeats", default="5,5,20", help="traced repeats per round, one process each")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = [int(r) for r in args.repeats.split(",")]
    report, reference_first = {}, None
    for i, repeats in enumerate(settings):
        r = run_setting(args.programs, args.seed, args.family, repeats)
        reference_first = reference_first or r["first"]
        across = [
            (ref[k], abs(r["first"][pid][k] - ref[k]) / ref[k])
            for pid, ref in reference_first.items()
            for k in ref
            if k in r["first"][pid]
        ]
        report[f"{i + 1}: repeats {repeats}"] = {
            "device": r["device"],
            "seconds_per_measurement": sum(r["seconds_per_measurement"]) / len(r["seconds_per_measurement"]),
            **{name: summary(p) for name, p in r["pairs"].items()},
            "first_vs_process_1": summary(across) if i else None,
        }
    if args.json:
        print(json.dumps(report, indent=1))
        return
    ref = next(iter(report.values()))
    print(
        f"{args.programs} {args.family} programs of seed {args.seed}, configuration default, one pinned core, device {ref['device']}"
    )
    for setting, r in report.items():
        for name in ("first_second", "second_third", "first_vs_process_1"):
            s = r[name]
            if s is None:
                continue
            print(
                f"process {setting}  {name:18s} kernels {s['n']:5d}: median {s['median']:.3f} p90 {s['p90']:.3f}; "
                f">= 5 us {s['n_ge5us']:4d}: median {s['median_ge5us']:.3f} p90 {s['p90_ge5us']:.3f}"
            )
        print(
            f"process {setting}  {r['seconds_per_measurement']:.2f} s per measurement, "
            f"{r['seconds_per_measurement'] / ref['seconds_per_measurement']:.2f}x the reference (process 1); "
            f"first-second median >= 5 us {r['first_second']['median_ge5us'] / ref['first_second']['median_ge5us']:.2f}x the reference's"
        )


if __name__ == "__main__":
    main()
