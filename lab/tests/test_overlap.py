"""`lab.overlap`: a program's kernels found in a kernel data set (`data kernel-overlap`)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lab import cli, overlap
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import features, hlo, kernels
from tpucost.method.measure import compile_fn


def _mlp(x, w):
    return jnp.tanh(x @ w).sum(axis=0)


def _other(x):
    return jnp.cumsum(jnp.sin(x) * 3.0, axis=1)


def _dataset_of(fn, args) -> kernel_data.KernelDataset:
    """A data set holding every kernel of ``fn(*args)``, as the collection would record them."""
    module = hlo.parse_module(compile_fn(fn, args).as_text())
    graphs = [features.featurize(k) for k in kernels.decompose(module)]
    meta = {
        "program_id": "mlp-forward-0-0",
        "family": "mlp",
        "form": "forward",
        "configuration": "default",
        "backend": jax.default_backend(),
        "device_kind": jax.devices()[0].device_kind,
        "jax_version": jax.__version__,
    }
    return kernel_data.from_graphs(graphs, [1000.0] * len(graphs), [1] * len(graphs), meta)


def test_a_program_overlaps_the_data_it_was_recorded_in_and_not_another():
    x, w = np.ones((37, 53), np.float32), np.ones((53, 29), np.float32)
    ds = _dataset_of(_mlp, (x, w))
    hashes = overlap.program_kernel_hashes(_mlp, (x, w))
    assert hashes and set(hashes) == set(ds.kernel_hash.tolist())
    seen = overlap.kernel_overlap(_mlp, (x, w), ds)
    assert seen["kernels"] == len(set(hashes)) and seen["in_data"] == seen["kernels"]
    assert seen["share_in_data"] == 1.0
    unseen = overlap.kernel_overlap(_other, (np.ones((41, 23), np.float32),), ds)
    assert unseen["kernels"] > 0 and unseen["in_data"] == 0 and unseen["share_in_training"] == 0.0


@pytest.mark.slow
@pytest.mark.newest_only
def test_bundled_examples_report_their_overlap_with_the_training_data(capsys, bundled_kernels):
    """A corpus program of the training part is wholly in it; the built-in examples' overlap is
    reported (docs/autotuning.md: ``example:transformer`` is in distribution, more than half its kernels
    trained on; the others, less than half). Marked ``newest_only``: the bundled kernels were
    compiled by jaxlib 0.10.2; another jaxlib cuts programs into other kernels."""
    from tpucost.experiments.programs import corpus

    ds = bundled_kernels
    train = kernel_data.split(ds, "random").train
    program = corpus.program_from_id(str(ds.program_id[train[0]]))
    inside = overlap.kernel_overlap(program.fn, program.args, ds)
    assert inside["share_in_data"] == 1.0 and inside["share_in_training"] == 1.0
    shares, lines = {}, []
    from tpucost.experiments.programs.examples import EXAMPLES, IN_DISTRIBUTION

    program_space = [name for name, fn in EXAMPLES.items() if hasattr(fn, "space")]
    assert len(set(program_space) - set(IN_DISTRIBUTION)) >= 3  # programs from outside the corpus
    for name in program_space:
        assert cli.main(["data", "kernel-overlap", f"example:{name}"]) == 0
        lines.append(capsys.readouterr().out.strip())
        assert cli.main(["data", "kernel-overlap", f"example:{name}", "--json"]) == 0
        shares[name] = json.loads(capsys.readouterr().out)["share_in_training"]
    print("\n".join(lines))  # the report, shown with pytest -s
    for name, share in shares.items():  # in distribution: more than half its kernels trained on
        assert (share > 0.5) == (name in IN_DISTRIBUTION), (name, shares)


def test_kernel_overlap_of_an_unknown_program_is_a_one_line_error(capsys):
    assert cli.main(["data", "kernel-overlap", "example:nope"]) == 2
    assert "no built-in example 'nope'" in capsys.readouterr().err
