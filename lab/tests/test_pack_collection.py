"""Tests of collecting a device pack: the steal and load gate, chunk commits, resuming a killed
collection, and `pack_collection.collect_pack`'s stages, all with fake measurements (nothing compiled)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import types
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import pretend_another_machine

from lab import cli, descriptor, pack_collection, packs
from tpucost import files
from tpucost.experiments.data import collection, kernel_collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.programs import FAMILIES, parse_program_id, program_ids
from tpucost.method import device, features

ROOT = Path(__file__).resolve().parents[2]


def _stat_line(busy: int, idle: int, steal: int) -> str:
    """A /proc/stat whose aggregate line has ``busy`` user ticks, ``idle`` idle ticks and ``steal``."""
    return f"cpu  {busy} 0 0 {idle} 0 0 0 {steal} 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 {steal} 0 0\nintr 1 2 3\n"


class FakeStat:
    """A fake /proc/stat whose counters advance by a given busy/steal share per step."""

    def __init__(self, path: Path) -> None:
        self.path, self.busy, self.idle, self.steal = path, 1000, 5000, 10
        self.write()

    def write(self) -> None:
        self.path.write_text(_stat_line(self.busy, self.idle, self.steal))

    def advance(self, steal_share: float, wanted: int = 1000, idle: int = 300) -> None:
        """``wanted`` ticks of wanted CPU time, ``steal_share`` of them stolen, plus idle ticks."""
        stolen = round(wanted * steal_share)
        self.busy, self.steal, self.idle = self.busy + wanted - stolen, self.steal + stolen, self.idle + idle
        self.write()


@pytest.fixture
def stat(tmp_path, monkeypatch) -> FakeStat:
    """A fake /proc/stat that `collection` reads; no busy probe while paused."""
    fake = FakeStat(tmp_path / "stat")
    monkeypatch.setattr(collection, "PROC_STAT", fake.path)
    monkeypatch.setattr(collection, "STEAL_PROBE_S", 0.0)
    return fake


def test_steal_share_reads_the_aggregate_line(tmp_path, stat):
    before = collection.cpu_times()
    assert before == collection.CpuTimes(busy=1000, idle=5000, steal=10)
    stat.advance(0.25, wanted=400, idle=10_000)  # idle time does not dilute the share
    assert collection.steal_share(before, collection.cpu_times(stat.path)) == 0.25
    assert collection.steal_share(before, before) is None  # no CPU time wanted in between
    assert collection.cpu_times(tmp_path / "missing") is None  # not Linux: no /proc/stat
    assert collection.steal_share(None, before) is None
    (tmp_path / "odd").write_text("intr 1 2 3\ncpu0 1 2 3 4 5 6 7 8\n")
    assert collection.cpu_times(tmp_path / "odd") is None  # no aggregate line
    meter = collection.StealMeter(stat.path)
    stat.advance(0.1)
    assert meter.read() == meter.last_share == 0.1
    assert meter.read() is None  # nothing happened since


def test_gate_pauses_while_steal_is_high_then_resumes(stat, monkeypatch):
    monkeypatch.setattr(collection, "load_average", lambda: 0.2)
    shares = iter([0.3, 0.02])  # the first poll still loses 30%, the second 2%
    sleeps = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        stat.advance(next(shares))

    monkeypatch.setattr(collection.time, "sleep", sleep)
    meter = collection.StealMeter()
    stat.advance(0.5)  # the last measurement lost half its time
    meter.read()
    bar = types.SimpleNamespace(set_description=lambda text: None)
    pause = collection.wait_until_quiet(None, bar, poll_s=10.0, max_steal=0.05, meter=meter)
    assert pause == collection.Pause(20.0, "steal 50.0% > 5.0%") and sleeps == [10.0, 10.0]
    sleeps.clear()
    assert collection.wait_until_quiet(None, bar, max_steal=0.05, meter=meter) == collection.Pause(0.0, None)
    assert collection.wait_until_quiet(None, bar, max_steal=None, meter=collection.StealMeter()).seconds == 0
    assert sleeps == []
    # A machine that never gets quiet: the gate gives up and says so.
    monkeypatch.setattr(collection.time, "sleep", lambda s: stat.advance(0.9))
    stat.advance(0.9)
    meter.read()
    stuck = collection.wait_until_quiet(None, bar, poll_s=10.0, give_up_s=30.0, max_steal=0.05, meter=meter)
    assert stuck.seconds == 30.0 and "gave up waiting after 30 s" in stuck.reason


def test_run_logs_steal_and_pauses(tmp_path, stat, monkeypatch):
    loads = iter([0.1, 3.0, 0.2])  # the start line, then busy, then quiet before the first item
    monkeypatch.setattr(collection, "load_average", lambda: next(loads, 0.2))
    monkeypatch.setattr(collection.time, "sleep", lambda s: stat.advance(0.0))
    stolen = iter([0.2, 0.0, 0.0])  # the first item loses 20% of its CPU time

    def measure(item: collection.Item) -> dict:
        stat.advance(next(stolen))
        return {"status": "ok"}

    items = [collection.Item(f"i{k}", {"k": k}, k) for k in range(3)]
    done = collection.run(
        tmp_path / "run",
        items,
        lambda e: f"i{e['k']}",
        measure,
        {},
        max_load=1.5,
        max_steal=0.05,
        progress=False,
    )
    lines = [e for e in collection.read_log(tmp_path / "run") if e["status"] == "ok"]
    assert [e["steal_share"] for e in lines] == [0.2, 0.0, 0.0]
    assert [e["paused_s"] for e in lines] == [15.0, 15.0, 0.0]
    assert lines[0]["pause_reason"].startswith("load average 3.00 > 1.5")
    assert lines[1]["pause_reason"] == "steal 20.0% > 5.0%" and lines[2]["pause_reason"] is None
    assert done["paused_s"] == 30.0 and done["pauses"] == {"load": 1, "steal": 1}
    assert done["steal_median"] == 0.0 and done["steal_max"] == 0.2 and done["stopped"] is False


def test_a_machine_that_stays_busy_costs_the_wait_once(tmp_path, stat, monkeypatch):
    loads = iter([0.1] + [3.0] * 8)  # the start line, then busy for good ... until the last item
    monkeypatch.setattr(collection, "load_average", lambda: next(loads, 0.2))
    sleeps = []
    monkeypatch.setattr(collection.time, "sleep", sleeps.append)
    items = [collection.Item(f"i{k}", {"k": k}, k) for k in range(5)]
    done = collection.run(
        tmp_path,
        items,
        lambda e: f"i{e['k']}",
        lambda item: {"status": "ok"},
        {},
        max_load=1.5,
        give_up_s=30.0,
    )
    lines = [e for e in collection.read_log(tmp_path) if e["status"] == "ok"]
    assert sleeps == [15.0, 15.0] and [e["paused_s"] for e in lines] == [30.0, 0.0, 0.0, 0.0, 0.0]
    assert "gave up waiting after 30 s" in lines[0]["pause_reason"] and "gave up" in lines[1]["pause_reason"]
    assert lines[-1]["pause_reason"] is None and done["paused_s"] == 30.0  # quiet again: the gate is back


def _git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for args in (
        ["init", "-q"],
        ["config", "user.name", "test"],
        ["config", "user.email", "test@example.com"],
        ["config", "commit.gpgsign", "false"],
    ):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _write_part(folder: Path, item: collection.Item) -> dict:
    """A fake measurement: its part first, then (returned) its log line's results."""
    (folder / "parts").mkdir(exist_ok=True)
    (folder / "parts" / f"{item.key}.npz").write_bytes(b"part %d" % item.payload)
    return {"status": "ok"}


def test_chunks_commit_the_folder_and_nothing_else(tmp_path):
    repo = _git_repo(tmp_path / "repo")
    (repo / "elsewhere.txt").write_text("staged by someone else\n")
    _git(repo, "add", "elsewhere.txt")
    out = repo / "packs" / "here"
    chunks = []

    def on_chunk(folder: Path, summary: dict) -> None:
        chunks.append(summary["measured"])
        pack_collection.git_commit_chunk(folder, f"chunk {summary['chunks']}")

    items = [collection.Item(f"i{k}", {"k": k}, k) for k in range(4)]
    done = collection.run(
        out,
        items,
        lambda e: f"i{e['k']}",
        lambda item: _write_part(out, item),
        {},
        commit_every_s=0.0,
        on_chunk=on_chunk,
        progress=False,
    )
    assert chunks == [1, 2, 3, 4] and done["chunks"] == 4
    assert _git(repo, "log", "--format=%s").split("\n")[:4] == ["chunk 4", "chunk 3", "chunk 2", "chunk 1"]
    for back, n in ((3, 1), (0, 4)):  # each commit holds the log and the parts of its lines
        files = _git(repo, "ls-tree", "-r", "--name-only", f"HEAD~{back}").split()
        assert sorted(f for f in files if "/parts/" in f) == [f"packs/here/parts/i{k}.npz" for k in range(n)]
        log = _git(repo, "show", f"HEAD~{back}:packs/here/log.jsonl").splitlines()
        assert [json.loads(line).get("k") for line in log if '"ok"' in line] == list(range(n))
    assert "elsewhere.txt" not in _git(repo, "log", "--name-only", "--format=")
    assert _git(repo, "diff", "--cached", "--name-only").split() == ["elsewhere.txt"]  # still staged
    assert pack_collection.git_commit_chunk(out, "nothing new") is None
    # A chunk run without a commit interval is committed once, at its end.
    more = [collection.Item(f"i{k}", {"k": k}, k) for k in range(6)]
    collection.run(
        out,
        more,
        lambda e: f"i{e['k']}",
        lambda item: _write_part(out, item),
        {},
        on_chunk=on_chunk,
        progress=False,
    )
    assert chunks[-1] == 2 and len(chunks) == 5


def test_commits_refuse_a_folder_git_would_not_commit(tmp_path):
    with pytest.raises(ValueError, match="not in a git work tree"):
        pack_collection.git_commit_chunk(tmp_path, "x")
    repo = _git_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text("ignored/\n*/parts/\n")
    (repo / "ignored").mkdir()
    with pytest.raises(ValueError, match=r"git ignores .*log\.jsonl.*collect it into a folder"):
        pack_collection.require_git_folder(repo / "ignored")
    (repo / "pack").mkdir()
    with pytest.raises(ValueError, match=r"git ignores parts/probe\.npz"):
        pack_collection.require_git_folder(repo / "pack")


_KILLED_RUN = textwrap.dedent(
    """
    import sys, time
    from tpucost.experiments.data import collection
    def measure(item):
        time.sleep(0.1)
        return {"status": "ok"}
    items = [collection.Item(f"i{k}", {"k": k}, k) for k in range(int(sys.argv[2]))]
    collection.run(sys.argv[1], items, lambda e: f"i{e['k']}", measure, {}, progress=False)
    """
)


def test_a_killed_collection_resumes_on_its_device_and_refuses_another(tmp_path, monkeypatch):
    out, n = tmp_path / "killed", 40
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(out), str(n)], env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline and len([e for e in collection.read_log(out) if e["status"] == "ok"]) < 3
    ):
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with open(out / collection.LOG, "a") as fh:
        fh.write('{"k": 39, "status": "o')  # a line torn by the kill
    before = {e["k"] for e in collection.read_log(out) if e["status"] == "ok"}
    assert 3 <= len(before) < n
    measured = []
    items = [collection.Item(f"i{k}", {"k": k}, k) for k in range(n)]
    collection.run(
        out, items, lambda e: f"i{e['k']}", lambda item: measured.append(item.payload) or {"status": "ok"}, {}
    )
    assert not before & set(measured), "an item was measured twice"
    done = [e["k"] for e in collection.read_log(out) if e["status"] == "ok"]
    assert sorted(done) == list(range(n))  # none lost, none twice, the torn line left out
    # Another device may not add to this folder: the error names the folder and both devices.
    here = device.fingerprint()
    other = pretend_another_machine(monkeypatch)
    with pytest.raises(ValueError) as refused:
        collection.run(out, items, lambda e: f"i{e['k']}", lambda item: {"status": "ok"}, {}, progress=False)
    message = str(refused.value)
    assert str(out / collection.DEVICE) in message and here["id"] in message and other["id"] in message


# ------------------------------------------------------------------------------------ collect_pack


def _fake_measure_program(calls: list[str]):
    """`kernel_collection.measure_program` without compiling: kernels drawn from the pair's name
    (the same kernels each time, one shared by every pair), labels of 10 to 50 us within 1%."""

    def measure(program, config: str, repeats: int = 5):
        calls.append(f"{program.program_id}/{config}")
        rng = np.random.default_rng(zlib.crc32(f"{program.program_id}/{config}".encode()))
        shared = np.random.default_rng(7)
        graphs = [_graph(rng, f"k{i}") for i in range(3)] + [_graph(shared, "shared")]
        labels = [float(rng.uniform(10_000, 50_000)) * (1 + 0.01 * np.random.random()) for _ in graphs]
        meta = {
            "program_id": program.program_id,
            "family": program.family,
            "form": "forward",
            "configuration": config,
            "backend": "cpu",
            "device_kind": "cpu",
            "jax_version": "0.0",
        }
        records = kernel_data.from_graphs(graphs, labels, [1] * len(graphs), meta)
        entry = {"status": "ok", "kernels": len(records), "repeats": repeats, "rounds": 1, "unsettled": 0}
        return records, {**entry, "wall_ns": 1e6, "kernel_ns_per_run": 9e5, "hparams": {}}

    return measure


def _graph(rng: np.random.Generator, name: str) -> features.KernelGraph:
    n = 3
    return features.KernelGraph(
        rng.integers(0, 50, n).astype(np.int32),
        rng.normal(size=(n, features.NUM_NODE_FEATURES)).astype(np.float32),
        np.arange(n - 1, dtype=np.int32),
        np.arange(1, n, dtype=np.int32),
        name,
        "kLoop",
    )


@pytest.fixture
def fake_pack(monkeypatch) -> dict[str, list]:
    """collect_pack with fake measurements and a fake descriptor; what each was called with."""
    calls: dict[str, list] = {"measured": [], "descriptor": []}
    monkeypatch.setattr(kernel_collection, "measure_program", _fake_measure_program(calls["measured"]))
    monkeypatch.setattr(
        kernel_collection,
        "program_from_id",
        lambda pid: types.SimpleNamespace(program_id=pid, family=pid.rsplit("-", 3)[0]),
    )

    def load_or_measure():
        calls["descriptor"].append(1)
        return "the descriptor"

    monkeypatch.setattr(descriptor, "load_or_measure", load_or_measure)
    monkeypatch.setattr(
        descriptor, "write_descriptor", lambda desc, path: Path(path).write_text(json.dumps({"d": desc}))
    )
    return calls


PACK_KW = dict(
    families=("mlp", "cnn", "gru"),
    configurations=("default", "no_fusion"),
    noise_sample=6,
    max_load=None,
    max_steal=None,
    progress=False,
)


def test_collect_pack_stages_resume_and_commit(tmp_path, fake_pack):
    repo = _git_repo(tmp_path / "repo")
    out = repo / "packs" / device.fingerprint()["id"]
    first = pack_collection.collect_pack(
        repo / "packs" / "{device_id}", 6, minutes=0.0, commit_every_s=0.0, **PACK_KW
    )
    assert first["out"] == str(out)
    # --minutes 0 measures one pair (the first chunk), the start's noise floor, then stops.
    assert first["stopped"] and first["pairs"] == first["pairs_this_run"] == 1
    noise = json.loads((out / "noise.json").read_text())
    assert set(noise) == {"start", "end"} and noise["start"]["pairs"] == noise["end"]["pairs"] == 1
    for stage in ("start", "end"):
        assert (
            noise[stage]["matched"] >= 1 and noise[stage]["median_rel_ge5us"] < 0.05 and noise[stage]["rows"]
        )
    assert first["noise_start"]["pairs"] == 1 and "rows" not in first["noise_start"]
    assert fake_pack["descriptor"] == [1] and (out / descriptor.DESCRIPTOR_FILE).exists()
    assert first["kernels"] == len(kernel_data.load_dataset(out)) == first["new_kernels"] == 4
    assert first["kernels_per_hour"] >= 3600 * 4 / max(first["measuring_s"] + 0.05, 1e-9)
    subjects = _git(repo, "log", "--format=%s").splitlines()
    assert any("device descriptor" in s for s in subjects) and any(
        "noise floor at the start" in s for s in subjects
    )
    assert len(first["commits"]) == len(subjects) and _git(repo, "status", "--porcelain") == ""
    started = noise["start"]["time"]

    with pytest.raises(FileExistsError, match="resume"):
        pack_collection.collect_pack(out, 6, **PACK_KW)
    fake_pack["measured"].clear()
    again = pack_collection.collect_pack(out, 6, resume=True, commit_every_s=0.0, **PACK_KW)
    pairs = 6 * 2  # 6 programs of mlp, cnn and gru in turn, two configurations each
    assert again["pairs"] == pairs and again["pairs_this_run"] == pairs - 1 and not again["stopped"]
    log = collection.read_log(out)
    keys = [f"{e['program_id']}/{e['configuration']}" for e in log if e.get("status") == "ok"]
    assert len(keys) == len(set(keys)) == pairs
    assert {e["program_id"].split("-")[0] for e in log if "program_id" in e} == {"mlp", "cnn", "gru"}
    noise = json.loads((out / "noise.json").read_text())
    assert noise["start"]["time"] == started and noise["end"]["pairs"] == pairs  # start kept, end again
    assert (out / "noise_runs" / f"end-{pairs}" / collection.LOG).exists()
    assert fake_pack["descriptor"] == [1]  # the descriptor was there
    assert again["kernels"] == len(kernel_data.load_dataset(out)) == pairs * 3 + 1
    assert again["new_kernels"] == again["kernels"] - first["kernels"]
    assert (out / "pack.json").exists() and _git(repo, "status", "--porcelain") == ""
    assert _git(repo, "show", "--stat", "HEAD").count(f"packs/{out.name}/") >= 1

    # An end floor that compared labels the old way (no "comparison") is measured again on a resume,
    # its old log lines (no "comparison" either) not reused.
    noise["end"].pop("comparison")
    (out / "noise.json").write_text(json.dumps(noise))
    runs = out / "noise_runs" / f"end-{pairs}" / collection.LOG
    old = [{k: v for k, v in e.items() if k != "comparison"} for e in collection.read_log(runs.parent)]
    runs.write_text("".join(json.dumps(e) + "\n" for e in old))
    fake_pack["measured"].clear()
    pack_collection.collect_pack(out, 6, resume=True, commit_every_s=0.0, **PACK_KW)
    redone = json.loads((out / "noise.json").read_text())["end"]
    assert redone["comparison"] == kernel_collection.NOISE_COMPARISON and redone["pairs"] == pairs
    assert fake_pack["measured"] and _git(repo, "status", "--porcelain") == ""


def test_a_pack_takes_every_family_in_turn():
    ids = program_ids(62, pack_collection.PACK_SEED, pack_collection.PACK_FAMILIES)
    families = [parse_program_id(pid)[0] for pid in ids]
    assert len(pack_collection.PACK_FAMILIES) == len(FAMILIES) == 31  # not only the default families
    assert families[:31] == families[31:] == list(FAMILIES)  # a pack cut short is still broad


def test_collect_pack_cli(tmp_path, monkeypatch, capsys):
    pinned = []
    monkeypatch.setattr(device, "pin_to_one_core", lambda: pinned.append(1))
    assert cli.main(["collect-pack", "--out", str(tmp_path / "p"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert pinned == [1] and err.startswith("error: ") and "not in a git work tree" in err
    assert err.count("\n") == 1
    seen = {}
    monkeypatch.setattr(
        pack_collection, "collect_pack", lambda out, n, **kw: seen.update(kw, n=n) or {"ok": 1}
    )
    args = ["collect-pack", "--out", "x", "--minutes", "30", "--commit-every", "20", "--max-steal", "0.1"]
    assert cli.main([*args, "--no-commit", "--resume"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": 1}
    assert seen["minutes"] == 30.0 and seen["commit_every_s"] == 1200.0 and seen["max_steal"] == 0.1
    assert seen["commit"] is False and seen["resume"] is True and seen["n"] == pack_collection.PACK_PROGRAMS
    assert seen["max_load"] == pack_collection.PACK_MAX_LOAD


def test_a_device_with_a_bundled_pack_gets_no_second_one(tmp_path, monkeypatch):
    first = packs.bundled_packs()[0]
    owner = files.read_json_object(first / collection.DEVICE)
    bundled = tmp_path / "bundled"  # the bundled folder's layout, with the first pack's device files
    (bundled / first.name).mkdir(parents=True)
    for name in (collection.DEVICE, kernel_data.SCHEMA_FILE):
        (bundled / first.name / name).write_bytes((first / name).read_bytes())
    monkeypatch.setenv(files.DATA_DIR_ENV, str(bundled))
    monkeypatch.setattr(device, "fingerprint", lambda: dict(owner))  # this host: the first pack's device

    def went_on(*args, **kwargs):
        raise AssertionError("collect_pack went past the check")

    monkeypatch.setattr(collection, "claim_device", went_on)
    out = bundled / packs.PACKS_DIR / pack_collection.DEVICE_ID_FIELD
    with pytest.raises(
        ValueError, match=rf"this device \({owner['id']}\) already has a bundled pack, .*{first.name}"
    ):
        pack_collection.collect_pack(out, commit=False)
    assert not (bundled / packs.PACKS_DIR).exists()  # refused before writing
    with pytest.raises(AssertionError, match="went past"):  # a folder outside the bundled data: no check
        pack_collection.collect_pack(tmp_path / "elsewhere", commit=False, families=("mlp",))


def test_missing_families_are_those_the_devices_pack_never_ran(bundled_kernels):
    first = packs.bundled_packs()[0]
    assert first == kernel_data.default_data_dir()  # the data set of the bundled_kernels fixture
    owner = packs.pack_device_id(first)
    measured = set(bundled_kernels.source_family.astype(str).tolist())
    missing = pack_collection.missing_families(owner)
    assert missing and not set(missing) & measured
    assert set(missing) | measured == set(pack_collection.PACK_FAMILIES)
    assert pack_collection.missing_families("no-such-device") == pack_collection.PACK_FAMILIES


def test_collect_pack_names_an_unknown_family(tmp_path, capsys):
    assert cli.main(["collect-pack", "--out", str(tmp_path / "p"), "--families", "mlp,nope"]) == 2
    assert "--families: unknown families ['nope']" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
