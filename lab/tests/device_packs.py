"""Synthetic device packs for tests: a few hundred kernels of the bundled data set, written as the
packs of made-up devices whose labels and descriptors differ (`write_fake_packs`).

Each fake device scales the bundled labels: compute-bound kernels (a dot or a convolution,
`tpucost.method.correction.kernel_class`) by ``compute`` and the others by ``memory``; its
descriptor's f32 and bf16 peaks are divided by ``compute`` and its bandwidths by ``memory``, so
the descriptor says what the labels show. A quarter of the kernels are in every pack; each pack
has a quarter of its own (so a held-out device has kernels no other pack holds). One family (``norm_softmax``) is renamed ``jraph_gnn``,
a family written by others, so that column of the leave-one-device-out table has rows. Every pack
has a ``noise.json`` that passes the gate and a ``log.jsonl`` of its measured pairs whose
``wall_s`` make 10 minutes about a third of them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from lab import descriptor
from tpucost.experiments.data import collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method.correction import kernel_class

#: (device id, compute scale, memory scale) of the fake devices.
DEVICES: tuple[tuple[str, float, float], ...] = (
    ("fakedev00001", 1.0, 1.0),
    ("fakedev00002", 0.4, 0.8),
    ("fakedev00003", 2.5, 1.6),
)
#: The family renamed, and its new name (one of `WRITTEN_BY_OTHERS`).
RENAMED = ("norm_softmax", "jraph_gnn")
#: Kernels taken per family (first occurrences in the bundled data set).
PER_FAMILY = {"mlp": 90, "norm_softmax": 70, "cnn": 60}
BASE_DESCRIPTOR = {
    "backend": "cpu",
    "cores": 1,
    "cpu_isa": ["avx2", "fma"],
    "peak_f32_flops": 8e10,
    "peak_bf16_flops": 4e10,
    "bandwidth_bytes_per_s": {"L1": 2e11, "L2": 1e11, "L3": 5e10, "DRAM": 1.5e10},
    "transcendentals_per_s": 2e9,
    "dispatch_ns": 3000.0,
    "label_mode": "one kernel at a time on one core",
    "seconds": 40.0,
}


def fake_descriptor(device_id: str, compute: float = 1.0, memory: float = 1.0) -> descriptor.DeviceDescriptor:
    """The descriptor of a fake device: `BASE_DESCRIPTOR`'s peaks / ``compute``, bandwidths / ``memory``."""
    d = json.loads(json.dumps(BASE_DESCRIPTOR))
    d["device_id"] = device_id
    d["peak_f32_flops"] /= compute
    d["peak_bf16_flops"] /= compute
    d["bandwidth_bytes_per_s"] = {k: v / memory for k, v in d["bandwidth_bytes_per_s"].items()}
    return descriptor.DeviceDescriptor.from_dict(d, source=f"fake {device_id}")


def small_subset(ds: kernel_data.KernelDataset) -> kernel_data.KernelDataset:
    """A few hundred kernels of ``ds`` (`PER_FAMILY`), with `RENAMED` renamed."""
    idx = np.concatenate([np.flatnonzero(ds.family == f)[:n] for f, n in PER_FAMILY.items()])
    sub = ds.subset(np.sort(idx))
    old, new = RENAMED
    rename = lambda a: np.where(a == old, new, a)  # noqa: E731
    source = sub.table.groups["source"]
    source = dataclasses.replace(
        source, columns={**source.columns, "source_family": rename(source.columns["source_family"])}
    )
    columns = {**sub.table.columns, "family": rename(sub.table.columns["family"])}
    return dataclasses.replace(
        sub, table=dataclasses.replace(sub.table, columns=columns, groups={"source": source})
    )


def _scaled(ds: kernel_data.KernelDataset, compute: float, memory: float) -> kernel_data.KernelDataset:
    is_compute = np.array([kernel_class(ds.graph(i)).endswith(":compute") for i in range(len(ds))])
    runtime = ds.runtime_ns * np.where(is_compute, compute, memory)
    columns = {**ds.table.columns, "runtime_ns": runtime}
    return dataclasses.replace(ds, table=dataclasses.replace(ds.table, columns=columns))


def _log_lines(ds: kernel_data.KernelDataset, device_id: str) -> list[dict]:
    pairs = sorted(set(zip(ds.source_program_id.tolist(), ds.source_configuration.tolist(), strict=True)))
    seconds = 1800.0 / len(pairs)  # 10 minutes: a third of the pairs
    return [
        {
            "program_id": p,
            "configuration": c,
            "status": "ok",
            "kernels": 4,
            "wall_ns": 40_000.0,
            "kernel_ns_per_run": 30_000.0,
            "wall_s": seconds,
            "device_id": device_id,
        }
        for p, c in pairs
    ]


def write_fake_packs(
    source: kernel_data.KernelDataset, root: Path, devices=DEVICES, descriptors: bool = True
) -> list[Path]:
    """Write one pack per fake device of ``devices`` under ``root`` from ``source`` (`small_subset`
    of the bundled data set); returns their folders."""
    folders = []
    quarter = np.arange(len(source)) % 4
    for j, (device_id, compute, memory) in enumerate(devices):
        folder = root / device_id
        fingerprint = {**(source.device or {}), "id": device_id, "cpu_model": f"Fake CPU {device_id}"}
        own = source.subset(np.flatnonzero((quarter == 3) | (quarter == j % 3)))
        ds = dataclasses.replace(_scaled(own, compute, memory), device=fingerprint)
        kernel_data.save_dataset(ds, folder)
        with (folder / collection.LOG).open("w") as fh:
            for line in _log_lines(ds, device_id):
                fh.write(json.dumps(line) + "\n")
        noise = {"median_rel_ge5us": 0.01, "p90_rel_ge5us": 0.1, "n_ge5us": 40}
        (folder / kernel_data.NOISE_FILE).write_text(json.dumps(noise))
        if descriptors:
            descriptor.write_descriptor(
                fake_descriptor(device_id, compute, memory), folder / descriptor.DESCRIPTOR_FILE
            )
        folders.append(folder)
    return folders
