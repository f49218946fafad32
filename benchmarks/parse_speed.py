"""Parse throughput of tpucost.method.hlo.parse_module against XLA's own C++ parser, same files, same run.

    python benchmarks/parse_speed.py [--repeats 3] [FILES...]

Defaults to the ten largest modules of ../shared/hlo-corpus that jaxlib accepts, plus the
optimized HLO of a compiled Flax model. The reference is `jaxlib._hlo.hlo_module_from_text`
(private; benchmarks only). Prints MB/s of each parser and the ratio tpucost / XLA.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from tpucost.method import hlo

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "hlo-corpus"


def default_texts() -> list[tuple[str, str]]:
    texts = []
    manifest = CORPUS / "MANIFEST.tsv"
    if manifest.exists():
        rows = [
            r
            for r in csv.DictReader(manifest.open(), delimiter="\t")
            if r["expected"] == "valid" and r["jaxlib_0.10.2_parse"] == "ok" and r["modules"] == "1"
        ]
        rows.sort(key=lambda r: -int(r["bytes"]))
        texts += [(r["file"][:60], (CORPUS / r["file"]).read_text()) for r in rows[:10]]
    texts.append(("compiled flax mlp+conv", _compiled_text()))
    return texts


def _compiled_text() -> str:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    conv = nnx.Conv(3, 16, (3, 3), rngs=nnx.Rngs(0))
    lin = nnx.Linear(16, 10, rngs=nnx.Rngs(1))
    f = jax.grad(lambda x: jax.nn.log_softmax(lin(jax.nn.relu(conv(x)).mean((1, 2)))).sum())
    return jax.jit(f).lower(jnp.ones((4, 32, 32, 3))).compile().as_text()


def best_time(fn, text: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    texts = [(p.name, p.read_text()) for p in args.files] if args.files else default_texts()
    try:
        from jaxlib import _hlo

        xla_parse = _hlo.hlo_module_from_text
    except (ImportError, AttributeError):
        xla_parse = None
    total_bytes = ours_s = xla_s = 0.0
    print(f"{'file':<62} {'KB':>7} {'tpucost MB/s':>12} {'XLA MB/s':>9} {'ratio':>7}")
    for label, text in texts:
        size = len(text.encode())
        ours = best_time(hlo.parse_module, text, args.repeats)
        ref = best_time(xla_parse, text, args.repeats) if xla_parse else float("nan")
        total_bytes += size
        ours_s += ours
        xla_s += ref
        print(
            f"{label:<62} {size / 1e3:>7.0f} {size / ours / 1e6:>12.2f} {size / ref / 1e6:>9.2f} {ref / ours:>7.3f}"
        )
    print(
        f"{'TOTAL':<62} {total_bytes / 1e3:>7.0f} {total_bytes / ours_s / 1e6:>12.2f} "
        f"{total_bytes / xla_s / 1e6:>9.2f} {xla_s / ours_s:>7.3f}"
    )
    print(
        f"tpucost parses at {xla_s / ours_s:.3f}x the speed of XLA's C++ parser (reference: "
        "jaxlib._hlo.hlo_module_from_text, same files, same run, best of "
        f"{args.repeats})."
    )


if __name__ == "__main__":
    main()
