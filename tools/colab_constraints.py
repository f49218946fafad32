"""Write constraints-colab.txt: the package versions of Colab's runtime image, for the second test environment.

    python tools/colab_constraints.py FREEZE [--source TEXT] [--date YYYY-MM-DD]

FREEZE is the `pip freeze` of Colab's CPU runtime, ``pip-freeze.txt`` of the public repository
googlecolab/backend-info (its git log dates each list). To refresh after Colab updates its image:
fetch that repository, then run this with its ``pip-freeze.txt``, the commit and its date, e.g.

    python tools/colab_constraints.py backend-info/pip-freeze.txt --source googlecolab/backend-info@a724079 \\
        --date 2026-08-19

The file pins every ``name==version`` line of Colab's list (what the runtime has preinstalled;
URL-installed packages such as torch are left out), then, for the packages of constraints.txt that
Colab does not ship (jraph, pytest-timeout, ...), the versions of constraints.txt, so that the
environment is reproducible. `make test` installs the Colab test environment with it, and
pyproject.toml's lower bounds must equal its versions of our direct dependencies
(tests/test_packaging.py checks both).
"""

from __future__ import annotations

import argparse
import datetime
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def canonical(name: str) -> str:
    """PEP 503 normalised package name (``Foo_Bar`` -> ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, tuple[str, str]]:
    """``{canonical name: (name as written, version)}`` of the ``name==version`` lines of a freeze file."""
    pins = {}
    for line in path.read_text().splitlines():
        m = PIN.match(line.strip())
        if m:
            pins[canonical(m.group(1))] = (m.group(1), m.group(2))
    return pins


#: The libtpu that ``jax[tpu]==V`` asks for, by Colab's jax version V (from that jax's metadata). Colab's
#: TPU image ships libtpu 0.0.21.1 beside jax 0.7.2, whose deviceless compile crashes (tpucost.experiments.compiler).
TPU_COMPILER_FOR_JAX = {"0.7.2": "0.0.23"}


def colab_constraints(freeze: Path, ours: Path, source: str, date: str) -> str:
    """Text of constraints-colab.txt from Colab's freeze and our constraints.txt."""
    colab, tested = read_pins(freeze), read_pins(ours)
    extra = {k: v for k, v in tested.items() if k not in colab}
    jax_version = colab.get("jax", ("jax", ""))[1]
    if "libtpu" in extra and jax_version in TPU_COMPILER_FOR_JAX:
        extra["libtpu"] = ("libtpu", TPU_COMPILER_FOR_JAX[jax_version])
    lines = [
        "# The package versions of Colab's runtime image: the oldest environment `make test` tests.",
        f"# Source: {source} pip-freeze.txt, dated {date}.",
        "# Refresh: python tools/colab_constraints.py FREEZE --source REPO@COMMIT --date DATE (see that file).",
        "# Colab's own packages first; then, for packages Colab does not ship, the pins of constraints.txt.",
        *(f"{name}=={version}" for name, version in sorted(colab.values(), key=lambda nv: canonical(nv[0]))),
        "# not on Colab (from constraints.txt):",
        *(f"{name}=={version}" for name, version in sorted(extra.values(), key=lambda nv: canonical(nv[0]))),
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("freeze", type=Path, help="Colab's pip-freeze.txt (googlecolab/backend-info)")
    parser.add_argument("--source", default="googlecolab/backend-info", help="where the list came from")
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="the list's date")
    parser.add_argument("--out", type=Path, default=ROOT / "constraints-colab.txt")
    args = parser.parse_args()
    if not args.freeze.is_file():
        raise SystemExit(f"{args.freeze}: no such file (Colab's pip-freeze.txt)")
    args.out.write_text(colab_constraints(args.freeze, ROOT / "constraints.txt", args.source, args.date))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
