"""An autotuner on the learned cost models: the paper's Section 6.3 on this stack.

* `tpucost.method.autotune.space`: `Space`, knobs and their choices;
* `tpucost.method.autotune.strategies`: `RandomSearch`, `SimulatedAnnealing` (ask / tell);
* `tpucost.experiments.autotune.tunable`: the program to tune and its space (`load_tunable`);
* `tpucost.experiments.autotune.evaluators`: `DeviceEvaluator`, `ProgramPredictor`, `TilePredictor`;
* `tpucost.method.autotune.search`: the arms at equal device seconds: `device_only_search`,
  `model_guided_search`, `random_order_search` (the control), `heuristic_search`;
* `tpucost.experiments.autotune.wall_time`: the model-using arms at equal wall time (`wall_time_search`), the
  model scoring on spare cores beside the measurements (`ScoringWorker`);
* `tpucost.experiments.autotune.remeasure`: the fresh-process re-measurement that reports are made of;
* `tpucost.experiments.autotune.journal`: resuming a killed experiment;
* `tpucost.experiments.autotune.protocol`: `autotune`, the whole experiment over seeds and starts;
* `tpucost.experiments.autotune.reports`: the bundled experiments, the noise floor, tables.

The figures are in `tpucost.experiments.plots` (`plot_speedups`, `plot_speedup_panels`, `plot_progress`), the
built-in example programs in `tpucost.experiments.programs.examples`. The public names of every module are
importable from the package. Run it: ``python -m tpucost autotune --space program --program
example:transformer --budget-seconds 20 --seeds 3 --json``.
"""

from tpucost.experiments.autotune.evaluators import (
    CachedPredictor,
    DeviceEvaluator,
    ProgramPredictor,
    TilePredictor,
)
from tpucost.experiments.autotune.journal import JOURNAL_NAME
from tpucost.experiments.autotune.protocol import ARMS, STARTS, STRATEGY_NAMES, Autotuning, autotune
from tpucost.experiments.autotune.remeasure import remeasure, remeasure_in_fresh_process
from tpucost.experiments.autotune.reports import (
    PAPER_MODEL_VS_DEVICE,
    arms_comparison_table,
    bundled_reports,
    compare_predicted_and_measured,
    findings,
    measurement_noise,
    report_table,
)
from tpucost.experiments.autotune.tunable import (
    Tunable,
    default_tile_config,
    heuristic_candidates,
    load_program,
    load_tunable,
)
from tpucost.experiments.autotune.wall_time import ScoringWorker, scoring_cores, wall_time_search
from tpucost.method.autotune.evaluation import Counter, Evaluation, Evaluator
from tpucost.method.autotune.search import (
    BUDGETS,
    SearchRun,
    device_only_search,
    heuristic_search,
    measure_in_order,
    model_guided_search,
    random_order_search,
    run_search,
)
from tpucost.method.autotune.space import Config, Space
from tpucost.method.autotune.strategies import STRATEGIES, RandomSearch, SearchStrategy, SimulatedAnnealing

__all__ = [
    "CachedPredictor",
    "Counter",
    "DeviceEvaluator",
    "Evaluation",
    "Evaluator",
    "ProgramPredictor",
    "TilePredictor",
    "JOURNAL_NAME",
    "ARMS",
    "STARTS",
    "STRATEGY_NAMES",
    "Autotuning",
    "autotune",
    "remeasure",
    "remeasure_in_fresh_process",
    "PAPER_MODEL_VS_DEVICE",
    "bundled_reports",
    "compare_predicted_and_measured",
    "arms_comparison_table",
    "findings",
    "measurement_noise",
    "report_table",
    "BUDGETS",
    "SearchRun",
    "device_only_search",
    "heuristic_search",
    "measure_in_order",
    "model_guided_search",
    "random_order_search",
    "run_search",
    "Config",
    "Space",
    "STRATEGIES",
    "RandomSearch",
    "SearchStrategy",
    "SimulatedAnnealing",
    "Tunable",
    "default_tile_config",
    "heuristic_candidates",
    "load_program",
    "load_tunable",
    "ScoringWorker",
    "scoring_cores",
    "wall_time_search",
]
