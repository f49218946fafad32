"""A resumable measurement folder, shared by the kernel and the tile collections.

A collection measures a deterministic list of items (the kernel task: (program, configuration)
pairs; the tile task: problems) into one folder:

==================  ===============================================================================
file                content
==================  ===============================================================================
``log.jsonl``       one JSON line per measured item, appended and synced as soon as it is measured
                    (``status`` "ok", "error" with the exception, or "skipped"), with the machine's
                    load average and the seconds paused for quiet; one "start" line per run with
                    its parameters
``device.json``     `tpucost.method.device.fingerprint()` of the machine that measured everything here
==================  ===============================================================================

`run` walks the items: an item the log already holds is skipped (so a killed run, started again
on the same folder, loses at most the item in flight), the others are measured one by one by the
caller's ``measure`` function, optionally after waiting for the machine to be quiet (a load
average at most ``max_load``). A folder belongs to one device: `claim_device` refuses to add
another machine's labels, `one_device` refuses to merge folders of different devices, and
`require_device` refuses to re-measure (noise floors) elsewhere. `provenance` summarises a log for
a data set's ``PROVENANCE.md``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from tpucost.files import read_json_object, write_json_atomic, write_text_atomic
from tpucost.method import device

__all__ = [
    "LOG",
    "DEVICE",
    "read_log",
    "append_log",
    "read_device",
    "claim_device",
    "one_device",
    "require_device",
    "load_average",
    "wait_until_quiet",
    "merge_logs",
    "Item",
    "run",
    "provenance",
]

LOG = "log.jsonl"
DEVICE = "device.json"
#: Statuses of a log line that mean "this item was measured" (a rerun skips it).
DONE = ("ok", "error", "skipped")


def read_log(folder: str | os.PathLike) -> list[dict[str, Any]]:
    """The log lines of ``folder`` (a torn last line from a killed run is left out)."""
    path = Path(folder) / LOG
    entries = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return entries


def append_log(folder: Path, entry: Mapping[str, Any]) -> None:
    """Append one line to ``folder``'s log and sync it (a torn last line is ended first)."""
    path = folder / LOG
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
    else:
        torn = False
    with open(path, "a") as fh:
        fh.write(("\n" if torn else "") + json.dumps(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_device(folder: str | os.PathLike) -> dict[str, Any] | None:
    """The fingerprint of the device that measured ``folder`` (None when it has no ``device.json``)."""
    path = Path(folder) / DEVICE
    return read_json_object(path) if path.exists() else None


def claim_device(folder: Path, fingerprint: Mapping[str, Any]) -> None:
    """Write ``device.json``, or refuse to add this device's labels to another device's folder."""
    recorded = read_device(folder)
    if recorded is None:
        write_json_atomic(folder / DEVICE, dict(fingerprint))
    elif device.differences(recorded, fingerprint):
        raise ValueError(
            f"{folder / DEVICE}: this collection was measured on {device.describe(recorded)}, this machine is "
            f"{device.describe(fingerprint)} ({'; '.join(device.differences(recorded, fingerprint))}); "
            "a data set comes from one device: collect into a new folder"
        )


def one_device(folders: Sequence[Path], allow_mixed_devices: bool = False) -> dict[str, Any] | None:
    """The device of every folder; ValueError naming two folders whose devices differ (unless
    allowed, then None when they differ). None too when a folder has no ``device.json``."""
    found = [(d, read_device(d)) for d in folders]
    known = [(d, fp) for d, fp in found if fp is not None]
    for d, fp in known[1:]:
        diff = device.differences(known[0][1], fp)
        if diff and not allow_mixed_devices:
            raise ValueError(
                f"{known[0][0]} was measured on {device.describe(known[0][1])} and {d} on {device.describe(fp)} "
                f"({'; '.join(diff)}): labels of different devices do not belong in one data set "
                "(pass --allow-mixed-devices to merge them anyway)"
            )
    if allow_mixed_devices and len({fp["id"] for _, fp in known}) > 1:
        return None
    return known[0][1] if known and len(known) == len(found) else None


def require_device(recorded: Mapping[str, Any] | None, where: Path, why: str) -> dict[str, Any]:
    """This machine's fingerprint, or ValueError when ``recorded`` (a data set's device) is another."""
    here = device.fingerprint()
    if not recorded or recorded.get("id") != here["id"]:
        raise ValueError(
            f"{where}: measured on {device.describe(recorded)}, this is {device.describe(here)}: "
            f"{why} needs the same device"
        )
    return here


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS does not report one)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def wait_until_quiet(
    max_load: float | None, bar: Any, poll_s: float = 15.0, give_up_s: float = 1800.0
) -> float:
    """Pause while the load average exceeds ``max_load`` (another process is loading the machine).

    Returns the seconds paused. Gives up waiting after ``give_up_s`` (the log records the load).
    """
    paused, load = 0.0, load_average()
    while max_load is not None and load is not None and load > max_load and paused < give_up_s:
        bar.set_description(f"paused: load average {load:.2f} > {max_load}")
        time.sleep(poll_s)
        paused += poll_s
        load = load_average()
    return paused


def merge_logs(folders: Sequence[Path], out: Path) -> None:
    """Write the log lines of every folder to ``out``'s log, each distinct line once, in folder order
    (``out``'s own lines too when it is one of ``folders``)."""
    lines: dict[str, None] = {}
    for folder in folders:
        if (folder / LOG).exists():
            lines.update((line, None) for line in (folder / LOG).read_text().splitlines() if line.strip())
    if lines:
        write_text_atomic(out / LOG, "".join(f"{line}\n" for line in lines))


@dataclasses.dataclass(frozen=True)
class Item:
    """One thing to measure: its log ``key`` (unique in the folder), the fields its log line
    starts with, and what `run` hands to ``measure``."""

    key: str
    fields: Mapping[str, Any]
    payload: Any


def run(
    folder: str | os.PathLike,
    items: Iterable[Item],
    key_of: Callable[[Mapping[str, Any]], str],
    measure: Callable[[Item], dict[str, Any]],
    start: Mapping[str, Any],
    *,
    max_load: float | None = None,
    progress: bool = True,
    desc: str = "collect",
    unit: str = "item",
) -> dict[str, Any]:
    """Measure the ``items`` the folder's log does not hold yet, one log line each.

    ``measure(item)`` returns the rest of the item's log line (``status`` "ok" or "skipped" and
    its results); an exception becomes an "error" line and the run goes on. ``key_of(line)`` is
    the key of an earlier line. ``start`` (the run's parameters) goes in the run's "start" line.
    Every line gets the device id, the load average, the seconds paused for quiet and the time.
    Returns counts: items measured, errors, seconds.
    """
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot write the collection folder {out}: {err.strerror or err}") from err
    fingerprint = device.fingerprint()
    claim_device(out, fingerprint)
    done = {key_of(e) for e in read_log(out) if e.get("status") in DONE}
    todo = [item for item in items if item.key not in done]
    append_log(
        out,
        {
            "status": "start",
            **start,
            "todo": len(todo),
            "already_done": len(done),
            "argv": list(sys.argv),
            "time": time.time(),
            "device_id": fingerprint["id"],
            "load_average": load_average(),
        },
    )
    errors, t_start = 0, time.perf_counter()
    bar = tqdm(todo, disable=not progress, unit=unit, desc=desc)
    for item in bar:
        paused = wait_until_quiet(max_load, bar)
        bar.set_description(item.key)
        load, t0 = load_average(), time.perf_counter()
        try:
            entry = {**item.fields, **measure(item)}
        except Exception as err:  # noqa: BLE001 - a failing item is logged and skipped
            entry = {
                **item.fields,
                "status": "error",
                "error": f"{type(err).__name__}: {err}",
                "traceback": traceback.format_exc(limit=3),
            }
            errors += 1
        entry.update(
            wall_s=round(time.perf_counter() - t0, 4),
            load_average=load,
            paused_s=paused,
            device_id=fingerprint["id"],
            time=time.time(),
        )
        append_log(out, entry)
    bar.close()
    return {"measured": len(todo), "errors": errors, "seconds": time.perf_counter() - t_start}


def provenance(
    title: str,
    entries: Sequence[Mapping[str, Any]],
    call: str,
    folders: Sequence[Path],
    device_line: str,
    counts_line: str,
    run_fields: Sequence[str],
) -> str:
    """The text of a data set's ``PROVENANCE.md``, from its collection log: what wrote it, where,
    on which device, how many items measured (errors, skips), the seconds measuring, the load
    average, and every run's parameters (``run_fields`` of its "start" line)."""
    starts = [e for e in entries if e.get("status") == "start"]
    measured = [e for e in entries if e.get("status") in DONE]
    count = lambda s: sum(e.get("status") == s for e in measured)  # noqa: E731
    wall = sum(float(e.get("wall_s") or 0) for e in measured)
    loads = [e["load_average"] for e in measured if e.get("load_average") is not None]
    lines = [
        f"# {title}",
        "",
        f"Written by `{call}` on {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, "
        f"host `{platform.node()}`, Python {platform.python_version()}.",
        "",
        f"- command line: `{' '.join(sys.argv)}`",
        f"- device: {device_line}",
        f"- from: {', '.join(f'`{r}`' for r in folders)}",
        f"- {counts_line}",
        f"- log: {count('ok')} measured, {count('error')} errors, {count('skipped')} skipped; {wall:.0f} s "
        f"measuring; load average median {float(np.median(loads)) if loads else float('nan'):.2f}, max "
        f"{max(loads) if loads else float('nan'):.2f}",
        "- runs (the log's start lines):",
    ]
    for s in starts:
        params = {k: s.get(k) for k in (*run_fields, "todo", "already_done", "device_id")}
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(s["time"])) if s.get("time") else "?"
        lines.append(f"  - {when}: `{' '.join(s.get('argv') or [])}` {json.dumps(params)}")
    return "\n".join(lines) + "\n"
