"""The book in a real browser (`make docs-check`, and `make test`): tools/check_site.py in headless Chromium.

The checker first runs on a small site of two pages, sound and then broken, so that these tests
show it can fail. The built book is checked when it exists, whole and then with one figure and one
link broken: ``build/site/`` (`make demo`, then `make docs`), or the site ``TPUCOST_SITE`` names.
`make test` builds ``build/tested-site/`` from the notebooks `tests/test_wheel.py` executed and
points ``TPUCOST_SITE`` at it.

Where Chromium, its driver or the book is missing these tests skip, saying why; with
``TPUCOST_REQUIRE_BROWSER=1`` (set by `make test` and `make docs-check`) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import zlib
from pathlib import Path

import project_tools
import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / os.environ.get("TPUCOST_SITE", str(Path("build") / "site"))
#: Set by `make test` and `make docs-check`: a missing browser or book fails these tests.
REQUIRED = os.environ.get("TPUCOST_REQUIRE_BROWSER") == "1"

check_site = project_tools.load("check_site")

pytestmark = pytest.mark.browser


def _missing(why: str | None, required: bool = REQUIRED) -> None:
    """Skip, or fail where the run requires the browser check, when ``why`` says what is missing."""
    if why:
        (pytest.fail if required else pytest.skip)(f"{why} (TPUCOST_REQUIRE_BROWSER={int(required)})")


@pytest.fixture(scope="module")
def driver():
    """One headless Chromium for the tests of this module (each test opens its own pages)."""
    _missing(check_site.browser_missing())
    with check_site.chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def book() -> Path:
    """The built book to check (`SITE`)."""
    how = "make demo, then make docs; make test builds build/tested-site"
    why = None if (SITE / "index.html").is_file() else f"{SITE} is not built ({how})"
    _missing(why)
    return SITE


def test_a_missing_browser_fails_where_required(monkeypatch):
    """Under ``TPUCOST_REQUIRE_BROWSER=1`` a missing browser is a failure, not a skip."""
    monkeypatch.setattr(check_site, "CHROMEDRIVER", "/nonexistent/chromedriver")
    why = check_site.browser_missing()
    assert "/nonexistent/chromedriver not installed" in why
    with pytest.raises(pytest.fail.Exception, match="not installed"):
        _missing(why, required=True)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        _missing(why, required=False)


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


def test_a_sound_site_passes(tmp_path, driver):
    site = small_site(tmp_path / "site")
    assert check_site.check_site(site, whole_site=False, driver=driver) == []


def test_a_broken_figure_and_broken_links_are_each_named(tmp_path, driver):
    site = small_site(tmp_path / "site")
    (site / "figure.png").unlink()
    text = (site / "index.html").read_text()
    (site / "index.html").write_text(
        text.replace('"other.html"', '"gone.html"').replace("#results", "#nowhere")
    )
    problems = check_site.check_site(site, whole_site=False, driver=driver)
    assert any(p.startswith("index.html: image ") and "figure.png did not load" in p for p in problems), (
        problems
    )
    assert "index.html: broken link to gone.html: no such file" in problems, problems
    assert "index.html: broken link to other.html#nowhere: no anchor #nowhere there" in problems, problems
    assert any(p.startswith("index.html: console error:") and "figure.png" in p for p in problems), problems


def test_an_image_that_is_not_a_picture_is_named(tmp_path, driver):
    site = small_site(tmp_path / "site")
    (site / "figure.png").write_bytes(b"not a png")
    problems = check_site.check_site(site, whole_site=False, driver=driver)
    assert any("figure.png did not load (0x0)" in p for p in problems), problems


def test_the_built_book_passes(book, driver):
    """Every page: no console error, every image, every internal link; the search; the badges."""
    problems = check_site.check_site(book, driver=driver)
    assert not problems, "\n".join(problems)


def test_the_built_book_with_a_figure_and_a_link_broken_fails(book, driver, tmp_path):
    """Delete the first figure of notebook 03's page and point a link of the landing page at a page
    that does not exist: the checker names both. (The copy links to the book's files rather than
    copying them: the two it changes are replaced, not written through.)"""
    site = Path(shutil.copytree(book, tmp_path / "site", copy_function=os.symlink))
    page = "notebooks/03_train_cost_model.html"
    figure = next(p for p in (site / "_images").iterdir() if p.name in (site / page).read_text())
    figure.unlink()
    index = (site / "index.html").read_text()
    assert 'href="workshop.html"' in index
    (site / "index.html").unlink()
    (site / "index.html").write_text(index.replace('href="workshop.html"', 'href="no-such-page.html"', 1))
    problems = check_site.check_site(site, pages=[page, "index.html"], whole_site=False, driver=driver)
    assert any(p.startswith(f"{page}: image ") and figure.name in p for p in problems), problems
    assert "index.html: broken link to no-such-page.html: no such file" in problems, problems
    assert (book / "index.html").read_text() == index and (book / "_images" / figure.name).is_file()


def test_the_built_books_search_finds_no_made_up_word(book, driver):
    """(That it finds "Kendall" is part of `test_the_built_book_passes`.)"""
    with check_site.serve(book) as base:
        missing = check_site.search_problems(driver, base, "Zyzzogeton", timeout=3)
        assert missing == ["the search for 'Zyzzogeton' found no page within 3 s"], missing
