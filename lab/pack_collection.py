"""Collecting a device pack: the one command a session runs on the host it landed on.

A *device pack* (`lab.packs`) is one device's kernel data set with its
fingerprint, its noise floor and its device descriptor. `collect_pack` builds one in a collect
folder (`tpucost.experiments.data.kernel_collection.collect`), stage by stage, and a rerun with
``resume`` skips every stage the folder holds already: the device claim (``device.json``, which
refuses another device), a check that every family's library imports, ``descriptor.json``
(`lab.descriptor.load_or_measure`), a first chunk of the corpus and the noise floor
taken then (``noise.json``'s ``start``), the rest of the corpus within the time given (every
family of `PACK_FAMILIES` in turn, `PACK_CONFIGURATIONS`, behind the load and steal gate of
`collection.wait_until_quiet`), the noise floor over the whole (``end``), and the data set with
its counts (`packs.write_pack_file`).

With ``commit``, `git_commit_chunk` commits the folder, and only the folder, after every stage and
every ``commit_every_s`` of measuring: since a part precedes its log line on disk and each log
line is synced, every commit holds a pack that ``resume`` can go on with. The page
``docs/data.md`` ("Collecting a device pack") gives the command line.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lab import descriptor, packs, precompile
from tpucost.experiments.data import collection, kernel_collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.programs import FAMILIES, parse_program_id
from tpucost.experiments.programs.diffrax_models import DIFFRAX_FAMILIES, import_diffrax
from tpucost.experiments.programs.keras_apps import KERAS_FAMILIES, import_keras
from tpucost.files import read_json_object, write_json_atomic
from tpucost.method import device

__all__ = [
    "PACK_FAMILIES",
    "PACK_CONFIGURATIONS",
    "PACK_PROGRAMS",
    "PACK_SEED",
    "COMMIT_EVERY_S",
    "PACK_MAX_LOAD",
    "PACK_MAX_STEAL",
    "PACK_GIVE_UP_S",
    "NOISE_SAMPLE",
    "DEVICE_ID_FIELD",
    "require_git_folder",
    "missing_families",
    "git_commit_chunk",
    "collect_pack",
]

#: A pack measures every family of the corpus (``program_ids``'s default is the 14 first ones only).
PACK_FAMILIES: tuple[str, ...] = tuple(FAMILIES)
#: The configurations that brought the most new kernels per minute in issue 20's collection
#: (``docs/data.md``): the later runs of that collection measured these four.
PACK_CONFIGURATIONS: tuple[str, ...] = ("default", "no_fusion", "scan_unroll", "remat_dots")
#: Programs in the pack's list (100 per family): more than a session measures; ``minutes`` stops it.
PACK_PROGRAMS = 3100
#: The corpus seed of every pack (the bundled first pack's), so packs share program ids.
PACK_SEED = 1
#: Seconds of measuring between two commits of the folder (25 minutes).
COMMIT_EVERY_S = 25 * 60.0
#: Pause while the 1-minute load average is above this (the collector itself counts for 1).
PACK_MAX_LOAD = 1.6
#: Pause while the hypervisor stole more than this share of the CPU time wanted (`collection.steal_share`).
PACK_MAX_STEAL = 0.05
#: The longest the gate waits for quiet before it measures anyway (once: `collection.run`).
PACK_GIVE_UP_S = 10 * 60.0
#: Kernels re-measured for each noise floor (the bundled data set's sample).
NOISE_SAMPLE = 200
#: In `collect_pack`'s folder, replaced by the device id: one command line for every host.
DEVICE_ID_FIELD = "{device_id}"


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``git -C folder ARGS``, output captured."""
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)


def require_git_folder(folder: str | os.PathLike) -> None:
    """ValueError unless ``folder`` (which must exist) lies in a git work tree whose ignore rules
    leave a pack's files (log, parts, descriptor, noise) to be committed."""
    folder = Path(folder)
    inside = _git(folder, "rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise ValueError(
            f"{folder} is not in a git work tree: a pack is committed as it is measured "
            "(collect it inside the repository, or pass --no-commit)"
        )
    probe = (collection.LOG, f"{kernel_collection.PARTS}/probe.npz", descriptor.DESCRIPTOR_FILE)
    ignored = _git(folder, "check-ignore", "--", *probe).stdout.split()
    if ignored:
        raise ValueError(
            f"{folder}: git ignores {', '.join(ignored)}: a pack's files must be committed; "
            "collect it into a folder that .gitignore leaves alone"
        )


def git_commit_chunk(folder: str | os.PathLike, message: str, tries: int = 3) -> str | None:
    """Commit everything under ``folder`` and nothing else (``git commit --only -- folder``: other
    staged files stay staged, uncommitted); the commit's hash, or None when nothing changed.

    Raises ValueError when ``folder`` is not in a git work tree or git ignores a file in it,
    RuntimeError (with git's message) when git fails ``tries`` times (e.g. another git command
    holds the index lock).
    """
    folder = Path(folder)
    require_git_folder(folder)
    failure = ""
    for attempt in range(tries):
        if attempt:
            time.sleep(2.0)
        added = _git(folder, "add", "--all", "--", ".")
        ignored = _git(folder, "ls-files", "--others", "--ignored", "--exclude-standard", "--", ".")
        if ignored.stdout.strip():
            raise ValueError(f"{folder}: git ignores {', '.join(ignored.stdout.split())}: not committed")
        if added.returncode == 0:
            if _git(folder, "diff", "--cached", "--quiet", "--", ".").returncode == 0:
                return None
            done = _git(folder, "commit", "--quiet", "--only", "-m", message, "--", ".")
            if done.returncode == 0:
                return _git(folder, "rev-parse", "HEAD").stdout.strip()
            added = done
        failure = (added.stderr or added.stdout).strip()
    raise RuntimeError(f"git could not commit {folder} ({tries} tries): {failure}")


def _require_corpus_extra(families: Sequence[str]) -> None:
    """ImportError (naming the extra) unless the libraries of ``families``' models import."""
    if set(families) & set(KERAS_FAMILIES):
        import_keras()
    if set(families) & set(DIFFRAX_FAMILIES):
        import_diffrax()


def _distinct_kernels(folder: Path) -> set[str]:
    """The distinct ``kernel_hash`` values of a collect folder's parts."""
    seen: set[str] = set()
    for part in sorted((folder / kernel_collection.PARTS).glob("*.npz")):
        with np.load(part, allow_pickle=False) as z:
            seen.update(z["kernel_hash"].tolist())
    return seen


def _read_noise(folder: Path) -> dict[str, Any]:
    """The pack's ``noise.json`` (``{"start", "end"}``, either absent), ``{}`` when there is none."""
    path = folder / kernel_data.NOISE_FILE
    return read_json_object(path, "noise floor") if path.exists() else {}


def _noise_headline(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    """A noise entry without its rows."""
    return None if entry is None else {k: v for k, v in entry.items() if k != "rows"}


@dataclasses.dataclass
class _PackRun:
    """One `collect_pack` call: where, what and how it measures, and what it did so far."""

    out: Path
    corpus_args: dict[str, Any]  # kernel_collection.collect's arguments after resume
    gate: dict[str, Any]  # max_load, max_steal
    commit_every_s: float
    budget_s: float | None
    noise_sample: int
    progress: bool
    commit: bool
    device_id: str
    runs: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    commits: list[str] = dataclasses.field(default_factory=list)

    def save(self, what: str) -> None:
        """Commit the folder (with ``commit``), the message saying ``what`` was added."""
        if self.commit and (sha := git_commit_chunk(self.out, f"device pack {self.device_id}: {what}")):
            self.commits.append(sha)

    def pairs(self) -> int:
        """The (program, configuration) pairs the pack's log holds, measured without error."""
        return len(kernel_collection.measured_runs(self.out))

    def left_s(self) -> float | None:
        """Seconds of the budget not spent by this call's corpus runs (None: no budget)."""
        return None if self.budget_s is None else self.budget_s - sum(r["seconds"] for r in self.runs)

    def corpus(self, stop_after_s: float | None) -> dict[str, Any]:
        """Measure the corpus (where the log left off), committing every ``commit_every_s``."""
        summary = kernel_collection.collect(
            self.out,
            **self.corpus_args,
            resume=True,
            progress=self.progress,
            do_finalize=False,
            commit_every_s=self.commit_every_s,
            on_chunk=lambda folder, run: self.save(f"pairs measured: {self.pairs()}"),
            stop_after_s=stop_after_s,
            give_up_s=PACK_GIVE_UP_S,
            **self.gate,
        )
        self.runs.append(summary)
        return summary

    def noise(self, stage: str) -> None:
        """Finalize, measure a noise floor (re-measured pairs in ``noise_runs/<stage>``) and store
        it as ``noise.json``'s ``start`` (``stage`` "start") or ``end``, with the pairs measured."""
        kernel_collection.finalize(self.out)
        result = kernel_collection.remeasure_noise(
            self.out,
            self.noise_sample,
            0,
            None,
            self.progress,
            runs_dir=self.out / kernel_collection.NOISE_RUNS / stage,
            **self.gate,
        )
        rows = result.pop("rows")
        noise = _read_noise(self.out)
        noise["start" if stage == "start" else "end"] = {
            **result,
            "pairs": self.pairs(),
            "command": f"python -m lab collect-pack --out {self.out} --resume (noise floor: {stage})",
            "rows": rows,
        }
        write_json_atomic(self.out / kernel_data.NOISE_FILE, noise)

    def measure(self) -> None:
        """Stages 3 to 5: the corpus in chunks, the start's noise floor after the first, the rest
        within the budget, the end's noise floor."""
        if "start" not in _read_noise(self.out):
            if not self.pairs():
                first = self.commit_every_s
                self.corpus(first if self.budget_s is None else min(first, self.budget_s))
            if self.pairs():
                self.noise("start")
                self.save("noise floor at the start")
        left = self.left_s()
        if (not self.runs or self.runs[-1]["stopped"]) and (left is None or left > 0):
            self.corpus(left)
        pairs = self.pairs()
        end = _read_noise(self.out).get("end", {})
        if pairs and (
            end.get("pairs") != pairs or end.get("comparison") != kernel_collection.NOISE_COMPARISON
        ):
            self.noise(f"end-{pairs}")  # new pairs, or a floor that compared labels the old way


def _precompile_worker(ahead: int) -> Callable[[list[str]], precompile.Precompiler | None] | None:
    """`kernel_collection.collect`'s ``compile_ahead``: a precompile worker compiling ``ahead``
    pairs ahead on the spare core (`precompile.start`); None when ``ahead`` is 0 (off)."""
    return None if ahead <= 0 else lambda keys: precompile.start(keys, ahead)


def collect_pack(
    out: str | os.PathLike,
    n_programs: int = PACK_PROGRAMS,
    *,
    seed: int = PACK_SEED,
    minutes: float | None = None,
    commit_every_s: float = COMMIT_EVERY_S,
    max_load: float | None = PACK_MAX_LOAD,
    max_steal: float | None = PACK_MAX_STEAL,
    commit: bool = True,
    resume: bool = False,
    repeats: int = 5,
    noise_sample: int = NOISE_SAMPLE,
    families: Sequence[str] | None = None,
    configurations: Sequence[str] = PACK_CONFIGURATIONS,
    progress: bool = True,
    precompile_ahead: int = precompile.AHEAD,
) -> dict[str, Any]:
    """Measure (or, with ``resume``, go on measuring) this device's pack into ``out`` (see above).

    Args:
      out: the pack's folder (created); with ``commit``, inside a git work tree. `DEVICE_ID_FIELD`
      in it is replaced by this device's id (``tpucost/bundled/packs/{device_id}``).
      n_programs: programs of the corpus list (``program_ids(n_programs, seed, families)``).
      seed: the corpus seed.
      minutes: stop the corpus after this many minutes of this call (pauses included), after a
      commit; the end's noise floor and the data set follow. None: measure the whole list.
      commit_every_s: seconds of measuring between two commits.
      max_load: pause while the 1-minute load average is above this (None: never).
      max_steal: pause while the hypervisor's steal share is above this (None: never).
      commit: git-commit the folder after each stage and chunk (`git_commit_chunk`).
      resume: go on with a folder that already holds a log (else FileExistsError).
      repeats: traced runs per measurement (`kernel_collection.measure_program`).
      noise_sample: kernels re-measured for each noise floor.
      families: the families (default `PACK_FAMILIES`: all).
      configurations: the configurations (default `PACK_CONFIGURATIONS`).
      progress: show progress bars.
      precompile_ahead: pairs compiled ahead on the spare core (`precompile`; 0: off). On by default:
      on this project's quiet 2-core host it gave 1.10-1.16x the distinct kernels per hour with
      labels within the noise (``docs/results/collect_prefetch.txt``); where it cannot start (an
      accelerator, one usable core) the collection runs without it.

    Returns:
      The call's summary: the pack's ``pairs``, distinct ``kernels`` and ``kernels_by_others``
      (`packs.pack_counts`), this call's ``new_kernels``, ``measuring_s`` (seconds, pauses left out)
      and ``kernels_per_hour``, whether it ``stopped`` before the end of the list, the noise
      floors without rows and whether the pack ``passes_gate`` (`packs.passes_gate`), the pack
      log's seconds paused and steal share (`collection.gate_summary`), and the commits made.

    Raises:
      FileExistsError: ``out`` holds a log and ``resume`` is False.
      ValueError: ``out`` cannot be written, was measured on another device, is a folder of the
      bundled data while this device has a bundled pack elsewhere (one pack per device), or (with
      ``commit``) is not in a git work tree or is ignored by git.
      ImportError: a family's library is not installed (``pip install 'tpucost[corpus]'``).
    """
    fingerprint = device.fingerprint()
    out = Path(str(out).replace(DEVICE_ID_FIELD, fingerprint["id"]))
    _refuse_a_second_bundled_pack(out, fingerprint["id"])
    if (out / collection.LOG).exists() and not resume:
        raise FileExistsError(
            f"{out / collection.LOG} exists: pass resume=True (--resume) to continue that pack"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot write the pack folder {out}: {err.strerror or err}") from err
    if commit:
        require_git_folder(out)
    families = tuple(PACK_FAMILIES if families is None else families)
    _require_corpus_extra(families)
    collection.claim_device(out, fingerprint)
    run = _PackRun(
        out,
        {
            "n_programs": n_programs,
            "seed": seed,
            "repeats": repeats,
            "configurations": tuple(configurations),
            "families": families,
            "compile_ahead": _precompile_worker(precompile_ahead),
        },
        {"max_load": max_load, "max_steal": max_steal},
        commit_every_s,
        None if minutes is None else 60.0 * minutes,
        noise_sample,
        progress,
        commit,
        fingerprint["id"],
    )
    before = _distinct_kernels(out)
    if not (out / descriptor.DESCRIPTOR_FILE).exists():
        descriptor.write_descriptor(descriptor.load_or_measure(), out / descriptor.DESCRIPTOR_FILE)
        run.save("device descriptor")
    run.measure()
    counts: dict[str, Any] = {}
    if run.pairs():
        counts = packs.pack_counts(kernel_collection.finalize(out))
        packs.write_pack_file(out)
    run.save(
        f"noise floor at the end and the data set ({run.pairs()} pairs, {counts.get('kernels', 0)} kernels)"
    )
    return _summary(run, before, counts)


def missing_families(device_id: str) -> tuple[str, ...]:
    """The families of `PACK_FAMILIES` that the bundled pack of ``device_id`` never ran (all of
    them when the device has no bundled pack): what a pending collection for it measures. Read
    from the pack's log (the pairs measured without error), not its data set."""
    folder = packs.bundled_pack_of(device_id)
    if folder is None:
        return PACK_FAMILIES
    measured = {parse_program_id(e["program_id"])[0] for e in kernel_collection.measured_runs(folder)}
    return tuple(f for f in PACK_FAMILIES if f not in measured)


def _refuse_a_second_bundled_pack(out: Path, device_id: str) -> None:
    """ValueError when ``out`` is a pack folder of the bundled data (`packs.is_pack_folder`) and
    this device already has a bundled pack in another folder (`packs.bundled_pack_of`): one pack
    per device. Other folders are not checked."""
    if not packs.is_pack_folder(out):
        return
    existing = packs.bundled_pack_of(device_id)
    if existing is not None and existing.resolve() != out.resolve():
        raise ValueError(
            f"this device ({device_id}) already has a bundled pack, {existing}: a device has one pack, "
            f"so {out} would be a second one. Collect a pack on a host whose device has none "
            "(`python -m lab data packs` lists them); measurements of this device that are to join "
            "its pack go to lab/pending/{device_id} (--families: the ones it lacks)"
        )


def _summary(run: _PackRun, before: set[str], counts: dict[str, Any]) -> dict[str, Any]:
    """What `collect_pack` returns (see there)."""
    new = len(_distinct_kernels(run.out) - before)
    seconds = sum(r["seconds"] - r["paused_s"] for r in run.runs)
    noise = _read_noise(run.out)
    return {
        "out": str(run.out),
        "device_id": run.device_id,
        "pairs": run.pairs(),
        **counts,
        "pairs_this_run": sum(r["pairs"] for r in run.runs),
        "errors_this_run": sum(r["errors"] for r in run.runs),
        "new_kernels": new,
        "measuring_s": round(seconds, 1),
        "kernels_per_hour": round(3600 * new / seconds, 1) if seconds > 0 else None,
        "stopped": bool(run.runs and run.runs[-1]["stopped"]),
        "noise_start": _noise_headline(noise.get("start")),
        "noise_end": _noise_headline(noise.get("end")),
        "passes_gate": packs.passes_gate(packs.read_noise(run.out)) if noise else False,
        **collection.gate_summary(collection.read_log(run.out)),
        "commits": run.commits,
        "argv": list(sys.argv),
    }
