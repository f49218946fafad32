"""Checkpoints: the best-model folder and the resumable training state (msgpack and JSON, never pickle).

The best-model folder (`save` writes it, `load` reads it; the bundled checkpoints are such folders)::

    DIR/params.msgpack   the parameters: `flax.serialization` msgpack of a str-keyed dict of arrays
    DIR/config.json      {"format_version": 2, "train": TrainConfig dict or null, "model": ModelConfig
                          dict (its "features" is the `tpucost.method.features.FeatureSpec` the model reads),
                          <the task's metadata keys, e.g. "task", "norm">,
                          "jax_version", "flax_version", "extra"}

It is written into a temporary folder beside DIR, each file with `tpucost.files.write_atomic`,
then swapped in: a reader sees the old checkpoint or the new one, never a mix. The parameter tree
is the same under every tested flax (`tpucost.compat`), so a checkpoint written under one loads
under the other.

The training state (`save_train_state`, `load_train_state`; ``WORKDIR/train_state.msgpack``) is
one msgpack map, written with the same `tpucost.files.write_atomic` after every epoch: the epoch,
the parameters, optimizer state and best parameters (as lists of arrays), the best epoch and
validation loss, the epochs without improvement, the history, and the model config, training
config and task metadata it was written for (JSON strings).

Any problem with a file (missing, not JSON, not msgpack, truncated, a missing field, an array
whose shape the model does not have) raises ValueError with one line naming the file and what is
wrong.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import flax
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx, serialization

from tpucost.files import bundled_dir, read_json_object, write_atomic, write_text_atomic
from tpucost.method.features import FeatureSpec
from tpucost.method.models import ModelConfig, make_model

__all__ = [
    "Build",
    "PARAMS_FILE",
    "CONFIG_FILE",
    "TRAIN_STATE_FILE",
    "SavedModel",
    "TrainState",
    "bundled_checkpoints_dir",
    "save",
    "load",
    "save_train_state",
    "load_train_state",
]

#: The parameters of a best-model folder.
PARAMS_FILE = "params.msgpack"
#: The configs and metadata of a best-model folder.
CONFIG_FILE = "config.json"
#: The resumable training state inside a workdir.
TRAIN_STATE_FILE = "train_state.msgpack"
#: config.json keys `save` writes itself; a task's metadata may not use them.
_RESERVED = frozenset({"format_version", "train", "model", "jax_version", "flax_version", "extra"})
#: The version of the best-model folder's ``config.json``.
FORMAT_VERSION = 2


class SavedModel(NamedTuple):
    """A loaded best-model folder.

    Attributes:
      model: the model, holding the saved parameters.
      config: its `ModelConfig` (``config.features`` is the feature spec it was trained on).
      meta: the whole ``config.json`` (``meta["train"]`` is the TrainConfig dict or None).
    """

    model: nnx.Module
    config: ModelConfig
    meta: dict[str, Any]

    @property
    def task(self) -> str:
        """The task the model was trained for (``"kernel"`` or ``"tile"``)."""
        return str(self.meta["task"])


#: What `load` builds the model with: the saved ModelConfig and config.json's fields -> a fresh
#: model whose parameters the file then fills (default: `tpucost.method.models.make_model` for the
#: saved ``"task"``; the lab's models that read a device pass their own).
Build = Callable[[ModelConfig, dict[str, Any]], nnx.Module]


def bundled_checkpoints_dir() -> Path:
    """Folder of the bundled checkpoints: ``tpucost.files.bundled_dir() / "checkpoints"``."""
    return bundled_dir() / "checkpoints"


# ---------------------------------------------------------------------------------------------
# Reading files: every error names the file
# ---------------------------------------------------------------------------------------------


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _read_msgpack(path: Path) -> Any:
    """The restored msgpack tree of ``path``; ValueError for a missing, unreadable or corrupt file."""
    try:
        blob = path.read_bytes()
    except OSError as err:
        raise ValueError(f"checkpoint {path}: cannot read ({_one_line(err)})") from err
    try:
        return serialization.msgpack_restore(blob)
    except Exception as err:  # noqa: BLE001 - msgpack raises many types on corrupt input
        raise ValueError(f"checkpoint {path}: not a readable msgpack file ({_one_line(err)})") from err


def _require(path: Path, tree: dict[str, Any], fields: tuple[str, ...]) -> None:
    for key in fields:
        if key not in tree:
            raise ValueError(f"checkpoint {path} is missing field {key!r}")


# ---------------------------------------------------------------------------------------------
# Parameters as str-keyed dicts of arrays
# ---------------------------------------------------------------------------------------------


def _str_keys(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {str(k): _str_keys(v) for k, v in tree.items()}
    return np.asarray(tree)


def _restore_like(template: Any, loaded: Any, path: Path, where: str = "params") -> Any:
    """Rebuild ``template`` (a pure dict of arrays, maybe with int keys) from the str-keyed ``loaded``."""
    if isinstance(template, dict):
        if not isinstance(loaded, dict):
            raise ValueError(f"checkpoint {path}: field {where} should be a map, got {type(loaded).__name__}")
        out = {}
        for k, v in template.items():
            if str(k) not in loaded:
                raise ValueError(f"checkpoint {path} is missing field {where}/{k}")
            out[k] = _restore_like(v, loaded[str(k)], path, f"{where}/{k}")
        return out
    try:
        arr = np.asarray(loaded)
    except (TypeError, ValueError) as err:
        raise ValueError(f"checkpoint {path}: field {where} is not an array ({_one_line(err)})") from err
    if arr.shape != np.shape(template) or arr.dtype.kind not in "fiub":
        raise ValueError(
            f"checkpoint {path}: field {where} has shape {arr.shape} ({arr.dtype}), "
            f"the model needs {np.shape(template)}"
        )
    return arr.astype(np.asarray(template).dtype)


def _params_dict(model: nnx.Module) -> dict:
    return jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))


def _load_params_into(model: nnx.Module, pure: Any, path: Path) -> None:
    state = nnx.state(model, nnx.Param)
    restored = _restore_like(nnx.to_pure_dict(state), pure, path)
    nnx.replace_by_pure_dict(state, jax.tree.map(jnp.asarray, restored))
    nnx.update(model, state)


def _leaves_dict(tree: Any) -> dict[str, np.ndarray]:
    return {str(i): np.asarray(x) for i, x in enumerate(jax.tree.leaves(tree))}


def _from_leaves(template: Any, loaded: Any, path: Path, where: str) -> Any:
    """``template``'s pytree with the arrays of a `_leaves_dict` map, checked for count and shapes."""
    leaves, treedef = jax.tree.flatten(template)
    if not isinstance(loaded, dict) or len(loaded) != len(leaves):
        count = len(loaded) if isinstance(loaded, dict) else type(loaded).__name__
        raise ValueError(f"checkpoint {path}: field {where} has {count} arrays, expected {len(leaves)}")
    new = []
    for i, t in enumerate(leaves):
        arr = np.asarray(loaded.get(str(i)))
        if arr.shape != np.shape(t):
            raise ValueError(
                f"checkpoint {path}: field {where}/{i} has shape {arr.shape}, expected {np.shape(t)}"
            )
        new.append(jnp.asarray(arr, dtype=jnp.asarray(t).dtype))
    return jax.tree.unflatten(treedef, new)


# ---------------------------------------------------------------------------------------------
# The best-model folder
# ---------------------------------------------------------------------------------------------


def _config_json(model_config: ModelConfig, train: dict | None, metadata: dict, extra: dict | None) -> dict:
    clash = sorted(_RESERVED & set(metadata))
    if clash:
        raise ValueError(f"task metadata may not use the checkpoint's own keys {clash}")
    return {
        **metadata,
        "format_version": FORMAT_VERSION,
        "train": train,
        "model": model_config.to_dict(),
        "jax_version": jax.__version__,
        "flax_version": flax.__version__,
        "extra": extra or {},
    }


def _swap_in(tmp: Path, path: Path) -> None:
    """Replace the folder ``path`` by ``tmp`` (two renames; the old folder is removed after)."""
    old = None
    if path.exists():
        old = path.parent / f".{path.name}.old{os.getpid()}"
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def save(
    path_dir: str | os.PathLike,
    model: nnx.Module,
    config: Any,
    metadata: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``params.msgpack`` and ``config.json`` to ``path_dir`` (a temporary folder, then a swap).

    Args:
      path_dir: the checkpoint folder (replaced when it exists).
      model: the model whose parameters to save.
      config: a `tpucost.method.train.TrainConfig` (anything with ``.model`` and ``.to_dict()``) or a
      `ModelConfig`.
      metadata: the task's metadata (`tpucost.method.train.Task.metadata`), stored at the top level of
      config.json; it may not use the keys `save` writes itself.
      extra: more JSON-serialisable metadata, stored under ``"extra"``.
    """
    path = Path(path_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    model_config = config if isinstance(config, ModelConfig) else config.model
    train = None if isinstance(config, ModelConfig) else config.to_dict()
    meta = _config_json(model_config, train, metadata or {}, extra)
    blob = serialization.msgpack_serialize(_str_keys(_params_dict(model)))
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp"))
    try:
        write_atomic(tmp / PARAMS_FILE, lambda fh: fh.write(blob))
        write_text_atomic(tmp / CONFIG_FILE, json.dumps(meta, indent=2, sort_keys=True))
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _model_config(path: Path, meta: dict[str, Any]) -> ModelConfig:
    """The saved ModelConfig (its feature spec included)."""
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"checkpoint {path}: field 'format_version': {meta.get('format_version')!r}, expected "
            f"{FORMAT_VERSION} (a checkpoint of another tpucost version)"
        )
    model = meta["model"]
    if not isinstance(model, dict) or "features" not in model:
        raise ValueError(f"checkpoint {path}: field 'model' should be an object with the model's 'features'")
    try:
        return ModelConfig.from_dict(model)
    except (TypeError, ValueError, KeyError) as err:
        raise ValueError(f"checkpoint {path}: field 'model': {_one_line(err)}") from err


def load(
    path_dir: str | os.PathLike,
    spec: FeatureSpec | None = None,
    *,
    spec_of: str = "the data",
    build: Build | None = None,
) -> SavedModel:
    """Load a `save` folder.

    The model is the one `tpucost.method.models.make_model` builds for the ``"task"`` saved in
    ``config.json`` (``"kernel"``: GraphSAGE or the LSTM, by the config's ``kind``; ``"tile"``:
    the tile model), so nothing is inferred from the feature widths.

    Args:
      path_dir: the checkpoint folder.
      spec: when given, the model must have been trained on this feature spec.
      spec_of: what ``spec`` belongs to, for the error message (e.g. ``"data set DIR"``).
      build: makes the model from the saved config (`Build`; None: `make_model` of the saved task).

    Raises:
      ValueError: a file or field is missing or corrupt, a shape differs from the model's, or
        the model was trained on another feature spec than ``spec``; one line naming the file.
    """
    path = Path(path_dir)
    cfg_file, params_file = path / CONFIG_FILE, path / PARAMS_FILE
    for f in (cfg_file, params_file):
        if not f.is_file():
            raise ValueError(f"checkpoint {path} is missing {f.name}")
    meta = read_json_object(cfg_file, "checkpoint")
    _require(cfg_file, meta, ("model", "task"))
    config = _model_config(cfg_file, meta)
    if spec is not None:
        config.features.check_matches(spec, f"checkpoint {path}", spec_of)
    try:  # the saved task names the model: a tile config says kind "gnn" too (`make_model`)
        model = make_model(config, 0, task=str(meta["task"])) if build is None else build(config, meta)
    except ValueError as err:
        raise ValueError(f"checkpoint {cfg_file}: field 'task' or 'model': {_one_line(err)}") from err
    _load_params_into(model, _read_msgpack(params_file), params_file)
    return SavedModel(model, config, meta)


# ---------------------------------------------------------------------------------------------
# The resumable training state
# ---------------------------------------------------------------------------------------------


def _default_history() -> dict[str, list[float]]:
    return {"train_loss": [], "val_loss": []}


@dataclasses.dataclass
class TrainState:
    """Where training stands after ``epoch`` finished epochs (what `save_train_state` stores).

    Attributes:
      epoch: epochs finished.
      params, opt_state: the current parameters and optimizer state (pytrees of arrays).
      best_params: the parameters of the best validation loss so far (None before any epoch).
      best_epoch: 1-based epoch of that loss (0 before any epoch).
      best_val: that loss (inf before any epoch).
      bad_epochs: epochs since it last improved.
      history: {"train_loss": [...], "val_loss": [...]}, one entry per finished epoch.
    """

    epoch: int
    params: Any
    opt_state: Any
    best_params: Any = None
    best_epoch: int = 0
    best_val: float = math.inf
    bad_epochs: int = 0
    history: dict[str, list[float]] = dataclasses.field(default_factory=_default_history)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def save_train_state(path: str | os.PathLike, state: TrainState, config: Any, task: dict[str, Any]) -> Path:
    """Write ``state`` (atomically) for training ``config`` (a TrainConfig) on the task with metadata ``task``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    best = state.best_params if state.best_params is not None else state.params
    saved = {
        "epoch": state.epoch,
        "model_config": _json(config.model.to_dict()),
        "train_config": _json(config.to_dict()),
        "task": _json(task),
        "params": _leaves_dict(jax.device_get(state.params)),
        "opt_state": _leaves_dict(jax.device_get(state.opt_state)),
        "best_params": _leaves_dict(jax.device_get(best)),
        "best_epoch": state.best_epoch,
        "best_val": state.best_val,
        "bad_epochs": state.bad_epochs,
        "history": {k: list(v) for k, v in state.history.items()},
        "rng": {"seed": config.seed, "next_epoch": state.epoch},  # epoch randomness = f(seed, epoch)
    }
    blob = serialization.msgpack_serialize(saved)
    return write_atomic(path, lambda fh: fh.write(blob))


def _check_written_for(path: Path, saved: dict[str, Any], config: Any, task: dict[str, Any]) -> None:
    try:
        model = ModelConfig.from_dict(json.loads(saved["model_config"]))
        same_task = "task" not in saved or json.loads(saved["task"]) == json.loads(_json(task))
    except (TypeError, ValueError) as err:
        raise ValueError(f"checkpoint {path}: field 'model_config' or 'task': {_one_line(err)}") from err
    if model != config.model:
        raise ValueError(f"{path} was written for another model config; use a fresh workdir")
    if not same_task:
        raise ValueError(
            f"{path} was written for another task or data (its task metadata differs); use a fresh workdir"
        )


def load_train_state(
    path: str | os.PathLike, template: TrainState, config: Any, task: dict[str, Any]
) -> TrainState:
    """The `save_train_state` file at ``path``, its arrays shaped like ``template``'s.

    Raises:
      ValueError: the file is corrupt or truncated, was written for another model config or task,
        or holds arrays of other shapes; one line naming the file.
    """
    path = Path(path)
    saved = _read_msgpack(path)
    if not isinstance(saved, dict):
        raise ValueError(f"checkpoint {path}: expected a map, got {type(saved).__name__}")
    _require(
        path,
        saved,
        (
            "epoch",
            "model_config",
            "params",
            "opt_state",
            "best_params",
            "best_epoch",
            "best_val",
            "bad_epochs",
            "history",
        ),
    )
    _check_written_for(path, saved, config, task)
    params = _from_leaves(template.params, saved["params"], path, "params")
    try:
        history = {k: [float(x) for x in saved["history"][k]] for k in template.history}
        return TrainState(
            epoch=int(saved["epoch"]),
            params=params,
            opt_state=_from_leaves(template.opt_state, saved["opt_state"], path, "opt_state"),
            best_params=_from_leaves(params, saved["best_params"], path, "best_params"),
            best_epoch=int(saved["best_epoch"]),
            best_val=float(saved["best_val"]),
            bad_epochs=int(saved["bad_epochs"]),
            history=history,
        )
    except (KeyError, TypeError) as err:
        raise ValueError(f"checkpoint {path}: a field is malformed ({_one_line(err)})") from err
