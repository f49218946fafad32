"""lab: the research around tpucost that no notebook needs (``python -m lab <command> ...``).

The book's library is `tpucost` (the wheel); lab holds the protocol variants, experiments and
diagnostics behind the bundled results: collecting a device pack (``collect-pack``), the data
tools the book does not use (``data merge|progress|spread|coverage|kernel-overlap|packs|additivity``),
Mosaic's verdict on block shapes (``tiles-legal``), the experiments (``experiment ...``), the device
descriptor (``device describe``), fine-tuning to a device (``adapt``) and a model scored on families
its training data never ran (``new-families``), with the modules only they use: the multi-device
study (`lab.descriptor`, `lab.packs`, `lab.pack_collection`, `lab.precompile`, `lab.adaptation`,
`lab.device_cost_model`, `lab.device_experiments`, `lab.lodo`, and the measurements waiting to join
a pack, ``lab/pending/``), `lab.new_families` and `lab.overlap`.

The rule: lab imports `tpucost`; `tpucost` never imports lab (``tests/test_packaging.py`` checks it),
and lab is not in the wheel (pyproject.toml packages ``tpucost*`` only). It runs from a checkout of
the repository, like ``tools/`` and ``benchmarks/``. ``python -m lab --help`` lists its commands;
they take the arguments and print the ``--json`` that ``python -m tpucost`` did before they moved.
"""
