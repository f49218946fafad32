"""Sphinx configuration of the tpucost book (`make docs`; see docs/contributing.md).

`tools/build_docs.py` copies this folder to build/docs-src, adds the executed notebooks of
`make demo`, the bundled data's provenance pages and one API page per module, and runs Sphinx
there. Nothing is executed here: the notebooks' outputs are the ones `make demo` recorded.
"""

import os
import sys
from pathlib import Path

# The checkout this book documents (build_docs.py sets it; pyproject.toml names the repository).
ROOT = Path(os.environ.get("TPUCOST_ROOT", Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(ROOT / "tools"))
from notebook_header import repository_url  # noqa: E402

REPOSITORY = repository_url(ROOT / "pyproject.toml")

project = "tpucost"
author = "the tpucost authors"
copyright = "2026, the tpucost authors"

extensions = ["myst_nb", "sphinx.ext.autodoc"]
nb_execution_mode = "off"  # the outputs are make demo's; the book never runs a notebook
nb_merge_streams = True
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3  # [Tested versions](setup.md#tested-versions)

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_mock_imports = ["keras", "diffrax", "equinox"]  # the corpus extra: not needed to read the API

exclude_patterns = ["_build"]
html_theme = "sphinx_book_theme"
html_title = "tpucost"
html_static_path = ["_static"]
html_favicon = "_static/favicon.svg"
html_theme_options = {
    "repository_url": REPOSITORY,
    "repository_branch": "main",
    "use_repository_button": True,
    "show_toc_level": 2,
}
html_last_updated_fmt = None
html_context = {"default_mode": "light"}  # the theme logs a console error when no mode is set
