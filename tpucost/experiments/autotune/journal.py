"""A journal of completed searches, so that a killed autotuning experiment resumes where it stopped."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpucost.files import write_text_atomic
from tpucost.method.autotune.search import BUDGETS, SearchRun

__all__ = ["JOURNAL_NAME", "Journal"]


#: The journal `autotune` keeps in its ``workdir``: one JSON line per completed search.
JOURNAL_NAME = "autotune-runs.jsonl"


def _json_scalar(value: Any) -> Any:
    """NumPy scalars in a configuration (a space built from arrays) as plain Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"a configuration value of type {type(value).__name__} cannot be written to the journal")


def _run_from_dict(d: Mapping[str, Any]) -> SearchRun:
    fields = dict(d)
    fields["measured"] = [(dict(c), float(ns), float(spent)) for c, ns, spent in fields.get("measured", [])]
    fields["predicted"] = [(dict(c), float(ns)) for c, ns in fields.get("predicted", [])]
    return SearchRun(**fields)


class Journal:
    """The completed searches of one experiment, one JSON line each, so that a killed `autotune`
    resumes where it stopped: a search is written (and flushed to disk) when it ends, with what
    the evaluators spent on it; a line cut short by a kill is dropped and that search runs again."""

    def __init__(self, workdir: str | os.PathLike, experiment: Mapping[str, Any]):
        self.path = Path(workdir) / JOURNAL_NAME
        self.experiment = dict(experiment)
        self.done: dict[tuple[int, str, str, str], dict[str, Any]] = {}
        if self.path.exists():
            self._load()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write_lines([json.dumps({"experiment": self.experiment})])

    def _load(self) -> None:
        lines = self.path.read_text().splitlines()
        kept = []
        for number, line in enumerate(lines, start=1):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                if number == len(lines) and number > 1:  # the search being written when the job was killed
                    break
                raise ValueError(f"{self.path}: line {number}, column {err.colno}: {err.msg}") from None
            if number == 1:
                self._check_experiment(entry)
            else:
                run = entry["run"]
                self.done[
                    (int(run["seed"]), run["start"], run["strategy"], run.get("budget", BUDGETS[0]))
                ] = entry
            kept.append(line)
        if len(kept) != len(lines):
            write_text_atomic(self.path, "\n".join(kept) + "\n")

    def _check_experiment(self, entry: Mapping[str, Any]) -> None:
        old = entry.get("experiment") if isinstance(entry, Mapping) else None
        if not isinstance(old, Mapping):
            raise ValueError(f"{self.path}: line 1 is not an autotuning journal's header")
        for field in sorted(set(old) | set(self.experiment)):
            if old.get(field) != self.experiment.get(field):
                raise ValueError(
                    f"{self.path}: written for another experiment ({field}: {old.get(field)!r} here, "
                    f"{self.experiment.get(field)!r} now); use another workdir or delete it"
                )

    def _write_lines(self, lines: Sequence[str]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def get(
        self, seed: int, start: str, strategy: str, budget: str = BUDGETS[0]
    ) -> tuple[SearchRun, dict[str, dict[str, float]]] | None:
        """The completed search of this seed, start, arm and budget (`BUDGETS`), with what it spent."""
        entry = self.done.get((seed, start, strategy, budget))
        return None if entry is None else (_run_from_dict(entry["run"]), entry["spent"])

    def add(self, run: SearchRun, spent: Mapping[str, Mapping[str, float]]) -> None:
        line = json.dumps({"run": dataclasses.asdict(run), "spent": spent}, default=_json_scalar)
        self._write_lines([line])
        self.done[(run.seed, run.start, run.strategy, run.budget)] = json.loads(line)
