"""``python -m tpucost.experiments.programs``: kernel counts per program and configuration (`corpus.survey`)."""

from tpucost.experiments.programs.corpus import survey

survey()
