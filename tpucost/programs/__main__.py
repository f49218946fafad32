"""``python -m tpucost.programs``: kernel counts per program and configuration (`corpus.survey`)."""

from tpucost.programs.corpus import survey

survey()
