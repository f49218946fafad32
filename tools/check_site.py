"""Check the built book in a real browser (`make docs-check`; `tests/test_site.py` calls this).

    python tools/check_site.py [build/site]

It serves the site on localhost and opens every page in headless Chromium (Debian's ``chromium``
and ``chromium-driver``, driven by Selenium). It reports each problem as one line naming its page:
an error in the browser console, an image that did not load or has no size, a link to a page or
anchor of the site that does not exist, a search that does not find "Kendall", and a notebook page
whose Colab badge does not point at that notebook. Exit status 1 when there is any.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import html.parser
import os
import sys
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from notebook_header import colab_url, repository_url  # noqa: E402

#: Debian's Chromium and its driver; TPUCOST_CHROMIUM and TPUCOST_CHROMEDRIVER name others (a
#: GitHub runner's Chrome, say).
CHROMIUM = os.environ.get("TPUCOST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TPUCOST_CHROMEDRIVER", "/usr/bin/chromedriver")
#: Headless, and nothing that reaches for the network on its own (a closed network refuses it).
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def browser_missing() -> str | None:
    """Why the browser check cannot run here, or None when Chromium and its driver are installed."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        return f"{' and '.join(missing)} not installed (make browser installs Debian's chromium and chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[docs]')"
    return None


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Serve without printing a line per request."""


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve ``site`` on a free localhost port for the duration; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A headless Chromium driven by Selenium, logging the browser console."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class _Anchors(html.parser.HTMLParser):
    """The ``id`` and ``name`` attributes of one HTML file: where a ``#fragment`` can point."""

    def __init__(self) -> None:
        super().__init__()
        self.anchors: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.anchors |= {value for key, value in attrs if key in ("id", "name") and value}


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors of the HTML file at ``path``."""
    parser = _Anchors()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.anchors)


def site_file(site: Path, base: str, url: str) -> Path | None:
    """The file of ``site`` that an internal ``url`` names (None for an outside address)."""
    if not url.startswith(base):
        return None
    path = unquote(urlparse(url).path).lstrip("/")
    target = site / path
    return target / "index.html" if target.is_dir() or not path else target


def link_problems(site: Path, base: str, links: list[str]) -> list[str]:
    """A line for each internal link whose page, file or anchor is not in the site."""
    problems = []
    for link in sorted(set(links)):
        address, fragment = urldefrag(link)
        target = site_file(site, base, address)
        if target is None:
            continue
        if not target.is_file():
            problems.append(f"broken link to {link.removeprefix(base)}: no such file")
        elif fragment and target.suffix == ".html" and unquote(fragment) not in anchors(target):
            problems.append(f"broken link to {link.removeprefix(base)}: no anchor #{fragment} there")
    return problems


_IMAGES = """
const images = [...document.images];
images.forEach(i => { i.loading = 'eager'; });
return images.map(i => [i.currentSrc || i.src, i.complete, i.naturalWidth, i.naturalHeight]);
"""


def image_problems(driver: object, timeout: float = 10.0) -> list[str]:
    """A line for each image of the open page that did not load or has a zero size."""
    deadline = time.monotonic() + timeout
    while True:
        images = driver.execute_script(_IMAGES)
        if all(complete for _, complete, _, _ in images) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return [
        f"image {src} did not load ({width}x{height})"
        for src, complete, width, height in images
        if not complete or width == 0 or height == 0
    ]


def console_problems(driver: object) -> list[str]:
    """A line for each error the browser console logged since the last call."""
    return [
        f"console error: {entry['message']}"
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE"
    ]


def check_page(driver: object, site: Path, base: str, page: str, repository: str | None = None) -> list[str]:
    """Open one page; its console errors, broken images and broken internal links, and, given the
    ``repository``, a notebook page's Colab badge."""
    driver.get(base + page)
    links = driver.execute_script("return [...document.querySelectorAll('a[href]')].map(a => a.href)")
    problems = image_problems(driver) + link_problems(site, base, links)
    if repository and page.startswith("notebooks/"):
        problems += badge_problems(driver, page, repository)
    return problems + console_problems(driver)


def search_problems(driver: object, base: str, word: str = "Kendall", timeout: float = 20.0) -> list[str]:
    """Type ``word`` into the search box of the site's search page; a line when it finds no page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.get(f"{base}search.html")
    boxes = [box for box in driver.find_elements(By.CSS_SELECTOR, "input[name='q']") if box.is_displayed()]
    if not boxes:
        return ["the search page shows no search box"]
    boxes[0].send_keys(word, Keys.ENTER)
    deadline = time.monotonic() + timeout
    found = 0
    while time.monotonic() < deadline:
        found = driver.execute_script("return document.querySelectorAll('#search-results li').length")
        if found:
            break
        time.sleep(0.2)
    return [] if found else [f"the search for {word!r} found no page within {timeout:.0f} s"]


def badge_problems(driver: object, page: str, repository: str) -> list[str]:
    """On the open notebook ``page``: a line when its Colab badge is missing or points at another
    notebook than this one in ``repository``."""
    links = driver.execute_script(
        "return [...document.querySelectorAll('a[href]')]"
        ".filter(a => a.querySelector('img[src*=\"colab-badge\"]')).map(a => a.href)"
    )
    expected = colab_url(repository, f"{Path(page).stem}.ipynb")
    return [] if links == [expected] else [f"Colab badge links {links}, expected [{expected!r}]"]


def pages_of(site: Path) -> list[str]:
    """Every HTML page of the site, relative to it (theme assets under ``_static`` left out)."""
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html") if "_static" not in p.parts)


def check_site(
    site: Path, pages: list[str] | None = None, whole_site: bool = True, driver: object | None = None
) -> list[str]:
    """Every problem of ``site``, a line each, prefixed by its page. ``pages`` limits the pages
    opened; ``whole_site`` adds the search and the notebook pages' Colab badges. ``driver``: a
    browser from `chromium` to use (its console log so far is dropped first); default a new one."""
    pages = pages_of(site) if pages is None else pages
    repository = repository_url() if whole_site else None
    problems = []
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(serve(site))
        if driver is None:
            driver = stack.enter_context(chromium())
        else:
            driver.get_log("browser")
        for page in pages:
            problems += [f"{page}: {line}" for line in check_page(driver, site, base, page, repository)]
        if whole_site:
            if not any(page.startswith("notebooks/") for page in pages):
                problems.append("no notebook pages under notebooks/")
            problems += [f"search.html: {line}" for line in search_problems(driver, base)]
            problems += [f"search.html: {line}" for line in console_problems(driver)]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "build" / "site")
    args = parser.parse_args()
    if not (args.site / "index.html").is_file():
        print(f"error: {args.site / 'index.html'} does not exist: run `make docs` first", file=sys.stderr)
        return 2
    if why := browser_missing():
        print(f"error: {why}", file=sys.stderr)
        return 2
    start = time.time()
    problems = check_site(args.site)
    for line in problems:
        print(line)
    pages = len(pages_of(args.site))
    print(f"{pages} pages checked in {time.time() - start:.0f} s: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
