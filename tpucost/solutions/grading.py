"""How the notebooks' self-checks grade an answer: not attempted, correct, or wrong with a hint.

Every ``check_N`` in ``tpucost.solutions.nbNN`` follows one pattern: an answer that is still
``None`` prints "not attempted yet" and fails nothing (so a notebook runs top to bottom before the
learner has tried anything); an attempted answer is compared with a value computed independently
of the learner's code (by the library, or from the bundled data), and a wrong one raises
`WrongAnswer` with a hint at the likely mistake, never the answer itself.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd

T = TypeVar("T")


class WrongAnswer(AssertionError):
    """An attempted answer that differs from the independently computed one."""


def not_attempted(exercise: int, what: str) -> bool:
    """Say that ``what`` is still unset; returns False (nothing graded)."""
    print(f"exercise {exercise}: not attempted yet. Set {what}, then run this cell again.")
    return False


def correct(exercise: int, detail: str = "") -> bool:
    """Say that the answer is right (with an optional remark); returns True."""
    print(f"exercise {exercise}: correct" + (f". {detail}" if detail else "."))
    return True


def wrong_answer(exercise: int, hint: str) -> WrongAnswer:
    """The `WrongAnswer` for exercise ``exercise`` with ``hint`` (raise it)."""
    return WrongAnswer(f"exercise {exercise}: not yet. {hint}")


def require(condition: bool, exercise: int, hint: str) -> None:
    """Raise `WrongAnswer` with ``hint`` unless ``condition`` holds."""
    if not condition:
        raise wrong_answer(exercise, hint)


def close(answer: Any, expected: float, tolerance: float) -> bool:
    """Whether ``answer`` is a number within ``tolerance`` of ``expected``."""
    try:
        return abs(float(answer) - float(expected)) <= tolerance
    except (TypeError, ValueError):
        return False


def quietly(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` without what it prints (the solutions print their answers)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args, **kwargs)


def compare_settings(runs: pd.DataFrame, setting: str, score: str, lower_is_better: bool) -> dict[str, Any]:
    """What a table of runs (one row per setting and seed) supports concluding.

    ``best``: the setting with the best mean ``score``; ``lead``: how far its mean is ahead of the
    runner-up's; ``spread``: the largest difference between two seeds of one setting; ``real``:
    whether the lead is larger than that spread (otherwise the ranking may be the seeds' doing).
    """
    means = runs.groupby(setting)[score].mean().sort_values(ascending=lower_is_better)
    spread = float(runs.groupby(setting)[score].agg(lambda s: s.max() - s.min()).max())
    lead = float(abs(means.iloc[1] - means.iloc[0])) if len(means) > 1 else 0.0
    return {"best": means.index[0], "lead": lead, "spread": spread, "real": lead > spread}


def check_runs(
    exercise: int,
    runs: pd.DataFrame,
    setting: str,
    score: str,
    settings: set[str],
    min_seeds: int = 2,
) -> None:
    """A runs table has the columns, the settings and at least ``min_seeds`` seeds per setting."""
    require(isinstance(runs, pd.DataFrame), exercise, "the runs should be a pandas DataFrame.")
    missing = {setting, "seed", score} - set(runs.columns)
    require(not missing, exercise, f"the table has no column(s) {sorted(missing)}.")
    present = set(map(str, runs[setting]))
    require(settings <= present, exercise, f"the table has no rows for {sorted(settings - present)}.")
    seeds = runs.groupby(setting)["seed"].nunique().min()
    require(
        seeds >= min_seeds,
        exercise,
        f"train every setting with at least {min_seeds} seeds: one run per setting cannot tell "
        "a setting from a lucky seed.",
    )


def check_conclusion(
    exercise: int,
    runs: pd.DataFrame,
    setting: str,
    score: str,
    lower_is_better: bool,
    best: Any,
    real: Any,
) -> bool:
    """Grade the two conclusions drawn from a runs table: which setting is best, and whether its
    lead is larger than the spread between seeds (`compare_settings`)."""
    truth = compare_settings(runs, setting, score, lower_is_better)
    direction = "lowest" if lower_is_better else "highest"
    require(
        str(best) == str(truth["best"]),
        exercise,
        f"average {score} over the seeds of each setting; the best one has the {direction} mean.",
    )
    require(
        bool(real) == truth["real"],
        exercise,
        "compare the best setting's lead over the runner-up (difference of means) with the largest "
        "difference between two seeds of one setting.",
    )
    verdict = "larger" if truth["real"] else "not larger"
    return correct(
        exercise,
        f"The best, {truth['best']}, leads by {truth['lead']:.4g}: {verdict} than the seed spread, {truth['spread']:.4g}.",
    )
