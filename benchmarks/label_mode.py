"""Why labels are measured one kernel at a time: a program's summed labels against its wall time,
on all cores and pinned to one core (the label mode of `tpucost.method.device`).

    python benchmarks/label_mode.py [--runs 3] [--mode both|pin|all] [--json]

The program is two independent convolutions (XLA:CPU's Eigen convolutions, library fusions off),
which XLA:CPU may run at the same time on several cores; then each label also holds the other
kernel's time and the labels sum to more than the wall time. Each run is a fresh process (pinning
must happen before JAX starts). Prints, per mode, the additivity ratio (summed labels / wall time)
and the span ratio (summed labels / the traced run's span: free of the host's drift between the
untraced and the traced runs) of each run and the device, measured in this run on this machine:
the reference is the same program on all cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

PROGRAM = """
import json, sys
from tpucost.method import device
if sys.argv[1] == "pin":
    device.pin_to_one_core()
import jax, jax.numpy as jnp
from tpucost import compat
from tpucost.method.measure import measure_kernels

def f(x, w1, w2):  # two independent convolutions: XLA:CPU may run them at the same time
    conv = lambda w: jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.tanh(conv(w1)) + jnp.sin(conv(w2))

k = jax.random.split(jax.random.key(0), 3)
args = (jax.random.normal(k[0], (4, 48, 48, 32)), jax.random.normal(k[1], (5, 5, 32, 32)),
        jax.random.normal(k[2], (5, 5, 32, 32)))
m = measure_kernels(f, *args, repeats=7, compiler_options=compat.library_fusions_off())
print(json.dumps({"ratio": m.additivity_ratio, "span_ratio": m.span_ratio, "device": m.device, "labels": m.runtime_ns}))
"""


def run_once(mode: str) -> dict:
    """One fresh process measuring the program, pinned (``"pin"``) or on all cores (``"all"``)."""
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=300, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"the {mode} run failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per mode")
    parser.add_argument("--mode", choices=("both", "pin", "all"), default="both")
    parser.add_argument("--json", action="store_true", help="one JSON object: the runs per mode")
    args = parser.parse_args()
    modes = ("all", "pin") if args.mode == "both" else (args.mode,)
    runs = {mode: [run_once(mode) for _ in range(args.runs)] for mode in modes}
    if args.json:
        print(json.dumps(runs))
        return 0
    from tpucost.method import device

    for mode, results in runs.items():
        ratios = ", ".join(f"{r['ratio']:.2f}" for r in results)
        spans = ", ".join(f"{r['span_ratio']:.2f}" for r in results)
        name = "pinned to one core (the label mode)" if mode == "pin" else "all cores"
        print(
            f"{name}: summed labels / wall time = {ratios}; / traced run span = {spans}"
            f"  [{device.describe(results[0]['device'])}]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
