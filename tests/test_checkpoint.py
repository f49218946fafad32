"""Tests of tpucost.method.checkpoint: the best-model folder, the training state, corrupt files, feature specs."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest
from test_train import SMOKE, ToyDataset, fit

from tpucost import cli
from tpucost.experiments.tpugraphs import TILE_FEATURES
from tpucost.method import checkpoint, features, train
from tpucost.method.models import LSTMBaseline, ModelConfig, TileGraphSAGE, make_model
from tpucost.method.tasks import kernel
from tpucost.method.train import TrainConfig

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

NORM = kernel.TargetNorm(7.0, 2.0)


@pytest.fixture(scope="module")
def toy() -> ToyDataset:
    return ToyDataset(48)


def _saved(tmp_path, name: str = "c", config=SMOKE):
    model = make_model(config.model if isinstance(config, TrainConfig) else config, 0)
    meta = {"task": "kernel", "norm": NORM.to_dict(), "features": features.TPUCOST_FEATURES.to_dict()}
    return checkpoint.save(tmp_path / name, model, config, meta)


def _one_line_error(path, fn) -> str:
    """The ValueError of ``fn()``: one line that names ``path``."""
    with pytest.raises(ValueError) as caught:
        fn()
    message = str(caught.value)
    assert "\n" not in message and str(path) in message, message
    return message


@pytest.mark.parametrize("kind", ["gnn", "lstm"])
def test_checkpoint_round_trip(tmp_path, toy, kind):
    cfg = TrainConfig.smoke(epochs=1, model=ModelConfig(kind=kind, opcode_embed=8, hidden=16, num_layers=2))
    task = kernel.KernelTask.fit(toy, np.arange(32), cfg.model)
    model_before = make_model(cfg.model, rngs=1)  # untrained, not seed 0: any parameters round-trip
    ckpt = checkpoint.save(tmp_path / "ckpt", model_before, cfg, task.metadata(), extra={"note": "test"})
    assert sorted(p.name for p in ckpt.iterdir()) == ["config.json", "params.msgpack"]
    assert (ckpt / "params.msgpack").read_bytes()[:1] != b"\x80"  # msgpack, not a pickle stream
    model, norm2, cfg2, meta = kernel.load_model(ckpt)
    assert cfg2 == cfg and norm2 == task.norm and meta["extra"] == {"note": "test"}
    assert meta["model"]["features"]["layout"] == features.layout_fingerprint() and meta["task"] == "kernel"
    assert meta["format_version"] == checkpoint.FORMAT_VERSION
    graphs = [toy.graph(i) for i in range(48)]
    np.testing.assert_array_equal(
        kernel.predict(model, norm2, graphs), kernel.predict(model_before, task.norm, graphs)
    )
    # Overwriting an existing checkpoint works (atomic swap) and leaves no temporary dirs.
    checkpoint.save(ckpt, model_before, cfg.model, task.metadata())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert isinstance(kernel.load_model(ckpt).config, ModelConfig)


def test_load_checkpoint_errors(tmp_path):
    ckpt = _saved(tmp_path)
    cfg_file = ckpt / "config.json"
    meta = json.loads(cfg_file.read_text())
    other = {
        **meta,
        "model": {**meta["model"], "features": {**meta["model"]["features"], "layout": "0" * 64}},
    }
    cfg_file.write_text(json.dumps(other))
    with pytest.raises(ValueError, match="feature layout"):
        kernel.load_model(ckpt)
    cfg_file.write_text(json.dumps({**meta, "format_version": 1}))
    with pytest.raises(ValueError, match="config.json.*format_version"):
        kernel.load_model(ckpt)
    cfg_file.write_text(json.dumps({k: v for k, v in meta.items() if k != "norm"}))
    with pytest.raises(ValueError, match="norm"):
        kernel.load_model(ckpt)
    cfg_file.write_text(json.dumps(meta))
    kernel.load_model(ckpt)
    (ckpt / "params.msgpack").unlink()
    with pytest.raises(ValueError, match="params.msgpack"):
        kernel.load_model(ckpt)
    with pytest.raises(ValueError, match="config.json"):
        kernel.load_model(tmp_path / "nowhere")


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "a number"])
def test_corrupt_params_give_one_line_naming_the_file(tmp_path, damage):
    ckpt = _saved(tmp_path)
    params = ckpt / "params.msgpack"
    blob = params.read_bytes()
    params.write_bytes(
        {
            "garbage": b"\x93\x01\x02\x03 this is not msgpack" * 20,
            "truncated": blob[: len(blob) // 2],
            "empty": b"",
            "a number": b"\x05",
        }[damage]
    )
    _one_line_error(params, lambda: checkpoint.load(ckpt))


@pytest.mark.parametrize("damage", ["not json", "no model", "bad model field", "a list"])
def test_corrupt_config_gives_one_line_naming_the_file(tmp_path, damage):
    ckpt = _saved(tmp_path)
    cfg_file = ckpt / "config.json"
    meta = json.loads(cfg_file.read_text())
    text = {
        "not json": '{"model": ',
        "no model": json.dumps({k: v for k, v in meta.items() if k != "model"}),
        "bad model field": json.dumps({**meta, "model": {**meta["model"], "kind": "transformer"}}),
        "a list": "[1, 2]",
    }[damage]
    cfg_file.write_text(text)
    _one_line_error(cfg_file, lambda: checkpoint.load(ckpt))


def test_params_of_another_shape_are_refused(tmp_path):
    ckpt = _saved(tmp_path)
    cfg_file = ckpt / "config.json"
    meta = json.loads(cfg_file.read_text())
    cfg_file.write_text(json.dumps({**meta, "model": {**meta["model"], "hidden": 24}}))
    message = _one_line_error(ckpt / "params.msgpack", lambda: checkpoint.load(ckpt))
    assert "shape" in message


def test_cli_prints_one_line_for_a_corrupt_checkpoint(tmp_path, capsys):
    ckpt = _saved(tmp_path / "models", "gnn")
    (ckpt / "params.msgpack").write_bytes(b"\x01\x02garbage")
    hlo_file = tmp_path / "m.hlo"
    hlo_file.write_text("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n")
    assert cli.main(["predict", "--model", str(tmp_path / "models"), str(hlo_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and str(ckpt / "params.msgpack") in err, err


def test_bundled_checkpoints_carry_their_feature_spec():
    for method in ("gnn", "lstm"):
        path = kernel.default_model_dir("random") / method
        meta = json.loads((path / "config.json").read_text())
        assert meta["format_version"] == checkpoint.FORMAT_VERSION and "features" in meta["model"]
        loaded = kernel.load_model(path)
        assert loaded.config.model.features == features.TPUCOST_FEATURES
        assert checkpoint.load(path).task == "kernel"


def test_the_saved_task_names_the_model(tmp_path):
    """A bundled tile config says kind "gnn", like a kernel GraphSAGE's: the task in its metadata,
    not its feature widths, makes it a tile model."""
    tile_dir = checkpoint.bundled_checkpoints_dir() / "tile-random-hinge"
    if not tile_dir.is_dir():
        pytest.skip("no bundled tile checkpoint")
    meta = json.loads((tile_dir / "config.json").read_text())
    assert meta["task"] == "tile" and meta["model"]["kind"] == "gnn"
    assert type(checkpoint.load(tile_dir).model) is TileGraphSAGE
    assert type(checkpoint.load(kernel.default_model_dir("random") / "lstm").model) is LSTMBaseline
    relabelled = shutil.copytree(tile_dir, tmp_path / "relabelled")
    (relabelled / "config.json").write_text(json.dumps({**meta, "task": "kernel"}))
    message = _one_line_error(relabelled / "config.json", lambda: checkpoint.load(relabelled))
    assert "configuration features" in message


def test_a_model_of_another_feature_spec_is_refused(tmp_path, toy):
    spec = dataclasses.replace(TILE_FEATURES, num_config_features=0)
    ckpt = _saved(tmp_path, config=ModelConfig(opcode_embed=8, hidden=16, num_layers=1, features=spec))
    with pytest.raises(ValueError, match="feature layout") as caught:
        kernel.load_model(ckpt)
    assert "tpugraphs-tile-v0" in str(caught.value) and features.TPUCOST_FEATURES.layout[:12] in str(
        caught.value
    )
    checkpoint.load(ckpt, spec)  # the spec it was trained on
    other = TrainConfig.smoke(
        epochs=1, model=ModelConfig(opcode_embed=8, hidden=16, num_layers=1, features=spec)
    )
    with pytest.raises(ValueError, match="the kernel task's data"):
        fit(other, toy, np.arange(32), np.arange(32, 48), progress=False)


def test_feature_spec_and_model_config_round_trip():
    for spec in (features.TPUCOST_FEATURES, TILE_FEATURES):
        assert features.FeatureSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(ValueError, match="missing"):
        features.FeatureSpec.from_dict({"layout": "x"})
    cfg = ModelConfig(features=TILE_FEATURES, config_join="early")
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="config_join"):
        ModelConfig(config_join="middle")
    old = {k: v for k, v in ModelConfig().to_dict().items() if k not in ("features", "config_join")}
    assert ModelConfig.from_dict({**old, "num_features": 197, "num_opcodes": 134}) == ModelConfig()
    assert ModelConfig.from_dict({**old, "num_features": 140}).features.layout == "unknown"


def test_corrupt_train_state_is_refused_naming_the_file(tmp_path, toy):
    work = tmp_path / "work"
    cfg = TrainConfig.smoke(epochs=1, patience=100)
    fit(cfg, toy, np.arange(32), np.arange(32, 48), workdir=work, progress=False)
    state = work / train.TRAIN_STATE_FILE
    state.write_bytes(state.read_bytes()[:100])
    _one_line_error(
        state,
        lambda: fit(
            TrainConfig.smoke(epochs=2, patience=100),
            toy,
            np.arange(32),
            np.arange(32, 48),
            workdir=work,
            progress=False,
        ),
    )
