"""A resumable measurement folder, shared by the kernel and the tile collections.

A collection measures a deterministic list of items (the kernel task: (program, configuration)
pairs; the tile task: problems) into one folder:

==================  ===============================================================================
file                content
==================  ===============================================================================
``log.jsonl``       one JSON line per measured item, appended and synced as soon as it is measured
                    (``status`` "ok", "error" with the exception, or "skipped"), with the machine's
                    load average, the share of CPU time the hypervisor stole while it was measured
                    (``steal_share``), and the seconds paused for quiet and why (``paused_s``,
                    ``pause_reason``); one "start" line per run with its parameters
``device.json``     `tpucost.method.device.fingerprint()` of the machine that measured everything here
==================  ===============================================================================

`run` walks the items: an item the log already holds is skipped (so a killed run, started again
on the same folder, loses at most the item in flight), the others are measured one by one by the
caller's ``measure`` function, optionally after waiting for the machine to be quiet (a load
average at most ``max_load``, a steal share at most ``max_steal``: `wait_until_quiet`, with a
`StealMeter` reading ``/proc/stat``), and optionally handing the folder to an ``on_chunk`` callback
(e.g. a git commit) every ``commit_every_s`` seconds. A folder belongs to one device: `claim_device` refuses to add
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
    "PROC_STAT",
    "CpuTimes",
    "cpu_times",
    "steal_share",
    "StealMeter",
    "Pause",
    "wait_until_quiet",
    "gate_summary",
    "merge_logs",
    "Item",
    "ChunkHook",
    "run",
    "provenance",
]

LOG = "log.jsonl"
DEVICE = "device.json"
#: Statuses of a log line that mean "this item was measured" (a rerun skips it).
DONE = ("ok", "error", "skipped")
#: Where Linux reports cumulative CPU times, steal included (`cpu_times`).
PROC_STAT = Path("/proc/stat")
#: Seconds a paused run keeps a CPU busy before reading the steal share again (`wait_until_quiet`).
STEAL_PROBE_S = 1.0


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


@dataclasses.dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time of all CPUs (clock ticks) from ``/proc/stat``'s aggregate ``cpu`` line."""

    busy: int  # user, nice, system, irq, softirq: a CPU ran something of this machine's
    idle: int  # idle and iowait: a CPU had nothing to run
    steal: int  # the 8th value: a CPU had something to run, the hypervisor ran another guest


def cpu_times(path: str | os.PathLike | None = None) -> CpuTimes | None:
    """The aggregate ``cpu`` line of ``/proc/stat`` (``path``, default `PROC_STAT`), or None where
    there is no such file or line (not Linux)."""
    try:
        lines = Path(path or PROC_STAT).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if fields[:1] == ["cpu"] and len(fields) >= 9:
            user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
            return CpuTimes(user + nice + system + irq + softirq, idle + iowait, steal)
    return None


def steal_share(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """The share of the CPU time wanted between two readings that the hypervisor stole:
    ``steal / (busy + steal)``, idle time left out (so an idle second core does not dilute it;
    `top`'s ``st`` divides by all time instead). None without two readings or without wanted time."""
    if before is None or after is None:
        return None
    steal, busy = after.steal - before.steal, after.busy - before.busy
    return round(steal / (busy + steal), 4) if busy + steal > 0 else None


class StealMeter:
    """Reads ``/proc/stat`` and tells the steal share since its previous reading (`steal_share`)."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = path
        self.before = cpu_times(path)
        #: The share of the last interval read (None before the first, or without ``/proc/stat``).
        self.last_share: float | None = None

    def read(self) -> float | None:
        """The steal share since the previous reading; the next interval starts now."""
        now = cpu_times(self.path)
        self.last_share = steal_share(self.before, now)
        self.before = now
        return self.last_share


@dataclasses.dataclass(frozen=True)
class Pause:
    """What `wait_until_quiet` waited: ``seconds``, ``reason`` (the first; None: no pause), and
    whether it ``gave_up`` (measured although the machine was still busy)."""

    seconds: float
    reason: str | None
    gave_up: bool = False


def _why_busy(
    load: float | None, max_load: float | None, steal: float | None, max_steal: float | None
) -> str | None:
    """Why the machine is too busy to measure on (None: it is quiet enough)."""
    if max_load is not None and load is not None and load > max_load:
        return f"load average {load:.2f} > {max_load}"
    if max_steal is not None and steal is not None and steal > max_steal:
        return f"steal {steal:.1%} > {max_steal:.1%}"
    return None


def _spin(seconds: float) -> None:
    """Keep one CPU busy for ``seconds``: an idle CPU wants no time, so the hypervisor steals none."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def wait_until_quiet(
    max_load: float | None,
    bar: Any,
    poll_s: float = 15.0,
    give_up_s: float = 1800.0,
    *,
    max_steal: float | None = None,
    meter: StealMeter | None = None,
) -> Pause:
    """Pause while the load average exceeds ``max_load`` (another process is loading the machine)
    or the steal share exceeds ``max_steal`` (the hypervisor gives the CPU to another guest).

    The steal share first checked is ``meter``'s last reading (the previous measurement's); while
    paused, each poll sleeps ``poll_s``, keeps a CPU busy for `STEAL_PROBE_S` (when ``max_steal`` is
    set) and reads the meter again. Gives up waiting after ``give_up_s`` (the reason then says so;
    the log records it). Returns the seconds paused and the first reason.
    """
    paused, reason = 0.0, None
    load, steal = load_average(), meter.last_share if meter else None
    while (why := _why_busy(load, max_load, steal, max_steal)) is not None:
        reason = reason or why
        if paused >= give_up_s:
            return Pause(paused, f"{reason} (gave up waiting after {paused:.0f} s)", gave_up=True)
        bar.set_description(f"paused: {why}")
        time.sleep(poll_s)
        if max_steal is not None:
            _spin(STEAL_PROBE_S)
        paused += poll_s
        load, steal = load_average(), meter.read() if meter else None
    return Pause(paused, reason)


def gate_summary(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Over log lines: seconds paused for quiet, pauses by reason's kind, and the median and
    largest steal share measured (None where no line recorded one)."""
    lines = [e for e in entries if e.get("status") in DONE]
    steal = [float(e["steal_share"]) for e in lines if e.get("steal_share") is not None]
    reasons = [str(e["pause_reason"]).split(" ")[0] for e in lines if e.get("pause_reason")]
    return {
        "paused_s": round(sum(float(e.get("paused_s") or 0.0) for e in lines), 1),
        "pauses": {r: reasons.count(r) for r in sorted(set(reasons))},
        "steal_median": round(float(np.median(steal)), 4) if steal else None,
        "steal_max": max(steal) if steal else None,
    }


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


#: ``on_chunk(folder, summary)``: what `run` calls every ``commit_every_s`` (e.g. a git commit).
ChunkHook = Callable[[Path, dict[str, Any]], None]


def run(
    folder: str | os.PathLike,
    items: Iterable[Item],
    key_of: Callable[[Mapping[str, Any]], str],
    measure: Callable[[Item], dict[str, Any]],
    start: Mapping[str, Any],
    *,
    max_load: float | None = None,
    max_steal: float | None = None,
    give_up_s: float = 1800.0,
    commit_every_s: float | None = None,
    on_chunk: ChunkHook | None = None,
    stop_after_s: float | None = None,
    progress: bool = True,
    desc: str = "collect",
    unit: str = "item",
) -> dict[str, Any]:
    """Measure the ``items`` the folder's log does not hold yet, one log line each.

    ``measure(item)`` returns the rest of the item's log line (``status`` "ok" or "skipped" and
    its results); an exception becomes an "error" line and the run goes on. ``key_of(line)`` is
    the key of an earlier line. ``start`` (the run's parameters) goes in the run's "start" line.
    Every line gets the device id, the load average, the steal share while it was measured, the
    seconds paused for quiet and why (`wait_until_quiet` with ``max_load`` and ``max_steal``), and
    the time. Once the gate gave up waiting (after ``give_up_s``), it does not wait again until it
    finds the machine quiet: a machine that stays busy costs ``give_up_s`` once, not per item.

    With ``on_chunk``, ``on_chunk(folder, summary)`` is called after the line that ends each
    ``commit_every_s`` seconds of the run (pauses included) and once after the last line, when
    lines were added since: every line and what was written before it are then in the folder.
    ``stop_after_s`` stops the run cleanly after the item that ends that many seconds (one item
    at least).

    Returns counts: items measured, errors, seconds, `gate_summary` of the run's lines, chunks
    handed over, and ``stopped`` (True when ``stop_after_s`` ended the run before its last item).
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
    t_start = time.perf_counter()
    meter, lines, chunks, t_chunk, unsent = StealMeter(), [], 0, t_start, 0

    def summary() -> dict[str, Any]:
        return {
            "measured": len(lines),
            "errors": sum(e["status"] == "error" for e in lines),
            "seconds": time.perf_counter() - t_start,
            **gate_summary(lines),
            "chunks": chunks,
        }

    bar = tqdm(todo, disable=not progress, unit=unit, desc=desc)
    gave_up = False
    for item in bar:
        patience = 0.0 if gave_up else give_up_s
        pause = wait_until_quiet(max_load, bar, give_up_s=patience, max_steal=max_steal, meter=meter)
        gave_up = pause.gave_up
        bar.set_description(item.key)
        entry = _measured_line(item, measure, meter)
        entry.update(paused_s=pause.seconds, pause_reason=pause.reason, device_id=fingerprint["id"])
        append_log(out, entry)
        lines.append(entry)
        unsent += 1
        if on_chunk and commit_every_s is not None and time.perf_counter() - t_chunk >= commit_every_s:
            chunks, t_chunk, unsent = chunks + 1, time.perf_counter(), 0
            on_chunk(out, summary())
        if stop_after_s is not None and time.perf_counter() - t_start >= stop_after_s:
            break
    bar.close()
    if on_chunk and unsent:
        chunks += 1
        on_chunk(out, summary())
    return {**summary(), "stopped": len(lines) < len(todo)}


def _measured_line(
    item: Item, measure: Callable[[Item], dict[str, Any]], meter: StealMeter
) -> dict[str, Any]:
    """The log line of one item measured now: its fields, ``measure``'s results (or the error),
    wall seconds, load average, steal share while it was measured, and the time."""
    load = load_average()
    meter.read()  # the steal share of the measurement alone
    t0 = time.perf_counter()
    try:
        entry = {**item.fields, **measure(item)}
    except Exception as err:  # noqa: BLE001 - a failing item is logged and skipped
        entry = {
            **item.fields,
            "status": "error",
            "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc(limit=3),
        }
    entry.update(
        wall_s=round(time.perf_counter() - t0, 4),
        load_average=load,
        steal_share=meter.read(),
        time=time.time(),
    )
    return entry


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
