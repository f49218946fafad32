"""What every command shares: JSON or table output, one-line errors and warnings, argument types,
the label mode."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from collections.abc import Callable, Iterator

from tpucost.experiments.tiles.lowering import LOWERINGS
from tpucost.method import device


def emit(result: dict, as_json: bool, table: Callable[[dict], str]) -> int:
    """Print a command's result as JSON or as its readable table; exit code 0. ``table`` formats the
    result as text: a function of `tpucost.experiments.command_tables` or `tpucost.experiments.results`,
    where the tables are made."""
    print(json.dumps(result, indent=1) if as_json else table(result))
    return 0


def fail(err: BaseException | str) -> int:
    """The one way a command fails: ``error: ERR`` on stderr, exit code 2."""
    print(f"error: {err}", file=sys.stderr)
    return 2


def fail_unreadable(path: object, err: OSError) -> int:
    """A file that cannot be read: ``PATH: cannot read: REASON`` on stderr, exit code 2."""
    print(f"{path}: cannot read: {err.strerror or err}", file=sys.stderr)
    return 2


def _warning_line(message, category, filename, lineno, line=None) -> str:
    """`warnings.formatwarning` for the command line: ``warning: MESSAGE`` on one line. Python's
    own format adds the file, the line number and the line of source code that warned."""
    return "warning: " + " ".join(str(message).split()) + "\n"


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """While a command runs, print each warning as one line (``warning: ...``), like its errors.
    (Only the format changes: filters, and warnings recorded by `warnings.catch_warnings`, as before.)"""
    formatted = warnings.formatwarning
    warnings.formatwarning = _warning_line
    try:
        yield
    finally:
        warnings.formatwarning = formatted


def shard(text: str) -> tuple[int, int]:
    """``"I/N"`` -> ``(I, N)``."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N, e.g. 0/2, got {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"need 0 <= I < N, got {text!r}")
    return i, n


def names(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def label_mode(args: argparse.Namespace) -> device.Pinning | None:
    """Pin to one core (tpucost.method.device's label mode) unless ``--all-cores``; before JAX starts.

    On XLA:CPU only: on a TPU or GPU (`tpucost.method.device.expected_backend`) `device.pin_to_one_core`
    leaves the process as it is and says so in the `device.Pinning` returned (None with
    ``--all-cores``)."""
    if args.all_cores:
        return None
    return device.pin_to_one_core()


def all_cores_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--all-cores",
        action="store_true",
        help="measure on every core instead of one (kernels may overlap; labels may not add up); "
        "XLA:CPU only: on a TPU or GPU the process is never pinned",
    )


def lowering_flag(p: argparse.ArgumentParser, default: str = "the backend's") -> None:
    """``--lowering pallas|xla_loop``: how tile kernels run (`tpucost.experiments.tiles.lowering`)."""
    p.add_argument(
        "--lowering",
        choices=LOWERINGS,
        default=None,
        help=f"tile task: run kernels as Pallas kernels or as an XLA loop over the grid (default: {default})",
    )


def gate_flags(p: argparse.ArgumentParser, max_load: float | None, max_steal: float | None) -> None:
    """``--max-load`` and ``--max-steal``, the quiet-machine gate of a collection (None: off)."""
    p.add_argument(
        "--max-load",
        type=float,
        default=max_load,
        help="pause while the 1-minute load average is above this "
        + (f"(default {max_load})" if max_load is not None else "(e.g. 1.5: measure on a quiet machine)"),
    )
    p.add_argument(
        "--max-steal",
        type=float,
        default=max_steal,
        help="pause while the hypervisor steals more than this share of the CPU time wanted "
        + (f"(default {max_steal})" if max_steal is not None else "(e.g. 0.05)"),
    )
