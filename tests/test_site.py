"""The book in a real browser (`make docs-check`): tools/check_site.py in headless Chromium.

The checker first runs on a small site of two pages, sound and then broken, so that these tests
show it can fail. The built book (build/site/, from `make demo` then `make docs`) is checked when
it exists, whole and then with one figure and one link broken.
"""

from __future__ import annotations

import shutil
import zlib
from pathlib import Path

import project_tools
import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "build" / "site"

check_site = project_tools.load("check_site")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(bool(check_site.browser_missing()), reason=str(check_site.browser_missing())),
]
needs_the_book = pytest.mark.skipif(
    not (SITE / "index.html").is_file(), reason="build/site/ is not built (make demo, then make docs)"
)


def png(width: int, height: int) -> bytes:
    """A grey PNG image of the given size (written here: no image library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def small_site(folder: Path) -> Path:
    """Two pages: one with a figure and links to the other page and to an anchor on it."""
    folder.mkdir()
    (folder / "figure.png").write_bytes(png(40, 30))
    (folder / "index.html").write_text(
        '<!doctype html><html><head><title>home</title><link rel="icon" href="data:,"></head><body>'
        '<img src="figure.png" alt="a figure"><a href="other.html">other</a>'
        '<a href="other.html#results">results</a><a href="https://example.org/">outside</a></body></html>'
    )
    (folder / "other.html").write_text(
        '<!doctype html><html><head><title>other</title><link rel="icon" href="data:,"></head><body>'
        '<h2 id="results">Results</h2><a href="index.html">home</a></body></html>'
    )
    return folder


def test_a_sound_site_passes(tmp_path):
    site = small_site(tmp_path / "site")
    assert check_site.check_site(site, whole_site=False) == []


def test_a_broken_figure_and_broken_links_are_each_named(tmp_path):
    site = small_site(tmp_path / "site")
    (site / "figure.png").unlink()
    text = (site / "index.html").read_text()
    (site / "index.html").write_text(
        text.replace('"other.html"', '"gone.html"').replace("#results", "#nowhere")
    )
    problems = check_site.check_site(site, whole_site=False)
    assert any(p.startswith("index.html: image ") and "figure.png did not load" in p for p in problems), (
        problems
    )
    assert "index.html: broken link to gone.html: no such file" in problems, problems
    assert "index.html: broken link to other.html#nowhere: no anchor #nowhere there" in problems, problems
    assert any(p.startswith("index.html: console error:") and "figure.png" in p for p in problems), problems


def test_an_image_that_is_not_a_picture_is_named(tmp_path):
    site = small_site(tmp_path / "site")
    (site / "figure.png").write_bytes(b"not a png")
    problems = check_site.check_site(site, whole_site=False)
    assert any("figure.png did not load (0x0)" in p for p in problems), problems


@needs_the_book
def test_the_built_book_passes():
    """Every page: no console error, every image, every internal link; the search; the badges."""
    problems = check_site.check_site(SITE)
    assert not problems, "\n".join(problems)


@needs_the_book
def test_the_built_book_with_a_figure_and_a_link_broken_fails(tmp_path):
    """Delete the first figure of notebook 03's page and point a link of the landing page at a page
    that does not exist: the checker names both."""
    site = Path(shutil.copytree(SITE, tmp_path / "site"))
    page = "notebooks/03_train_cost_model.html"
    figure = next(p for p in (site / "_images").iterdir() if p.name in (site / page).read_text())
    figure.unlink()
    index = (site / "index.html").read_text()
    assert 'href="workshop.html"' in index
    (site / "index.html").write_text(index.replace('href="workshop.html"', 'href="no-such-page.html"', 1))
    problems = check_site.check_site(site, pages=[page, "index.html"], whole_site=False)
    assert any(p.startswith(f"{page}: image ") and figure.name in p for p in problems), problems
    assert "index.html: broken link to no-such-page.html: no such file" in problems, problems


@needs_the_book
def test_the_built_books_search_finds_kendall_and_not_a_made_up_word():
    with check_site.serve(SITE) as base, check_site.chromium() as driver:
        assert check_site.search_problems(driver, base, "Kendall") == []
        missing = check_site.search_problems(driver, base, "Zyzzogeton", timeout=3)
        assert missing == ["the search for 'Zyzzogeton' found no page within 3 s"], missing
