"""Checks the pkgdown site `make site` built: every internal link and anchor on every page
resolves, and headless Chromium renders the home page and gpu_fit()'s reference: their
screenshots are read back (a real image, not a blank one) and so is the DOM Chromium built
(the page's heading is in it).

Standard library only, so it runs with the system's python3 before any environment exists.

    python3 python/check_site.py docs --screenshots site-check
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

# The pages rendered in the browser, and a heading each must show.
RENDERED = {"index.html": "gpukeras", "reference/gpu_fit.html": "Train a Keras model on the GPU"}
LINK_ATTRIBUTES = {"href", "src"}


class Page(HTMLParser):
    """A page's links (href/src), the anchors it defines, and the text of its headings."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.anchors: set[str] = set()
        self.headings: list[str] = []
        self._heading_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in LINK_ATTRIBUTES:
                self.links.append(value)
            elif name == "id" or (tag == "a" and name == "name"):
                self.anchors.add(value)
        if tag == "h1":
            self._heading_depth += 1
            self.headings.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1" and self._heading_depth:
            self._heading_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._heading_depth:
            self.headings[-1] += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def broken_links(site: Path) -> tuple[list[str], int, int]:
    """Broken internal links as 'page: link (why)', the number of internal links checked, and
    the number of references off the site (not followed: the build machine has no network)."""
    site = site.resolve()
    pages = {path: parse(path.read_text(encoding="utf-8")) for path in site.rglob("*.html")}
    broken, internal, offsite = [], 0, 0
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                offsite += 1
                continue
            if not parts.path and not parts.fragment:
                continue
            internal += 1
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(site)}: {link}"
            if not target.is_relative_to(site) or not target.exists():
                broken.append(f"{where} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                anchors = pages[target].anchors if target in pages else set()
                if unquote(parts.fragment) not in anchors:
                    broken.append(f"{where} (no such anchor)")
    return broken, internal, offsite


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and a sample of the pixels (every 4th in each direction, as RGB bytes)
    of an 8-bit RGB or RGBA PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    chunks, pos = {}, 8
    idat = b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IDAT":
            idat += body
        chunks.setdefault(kind, body)
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    if depth != 8 or colour not in (2, 6):
        raise ValueError(f"unexpected PNG format: bit depth {depth}, colour type {colour}")
    size = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * size
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = row[i - size] if i >= size else 0
            up, corner = previous[i], previous[i - size] if i >= size else 0
            if kind == 1:
                row[i] = (row[i] + left) & 255
            elif kind == 2:
                row[i] = (row[i] + up) & 255
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                row[i] = (row[i] + best) & 255
        rows.append(bytes(row))
        previous = row
    return width, height, [r[i : i + 3] for r in rows[::4] for i in range(0, stride, 4 * size)]


def chromium() -> str:
    for name in ("chromium", "chromium-headless-shell", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("check_site: no Chromium found (make site installs the Debian package chromium)")


def render(browser: str, page: Path, screenshot: Path) -> str:
    """Screenshot of the page (1280 x 2000) and the DOM Chromium built, as it would be shown
    offline: every host name fails to resolve, so nothing off the site is waited for."""
    with tempfile.TemporaryDirectory() as profile:
        common = [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1280,2000",
        ]
        url = page.resolve().as_uri()
        subprocess.run(
            [*common, f"--screenshot={screenshot}", url],
            check=True,
            capture_output=True,
            timeout=120,
        )
        return subprocess.run(
            [*common, "--dump-dom", url], check=True, capture_output=True, text=True, timeout=120
        ).stdout


def check_render(browser: str, site: Path, page: str, heading: str, out: Path) -> list[str]:
    screenshot = out / (page.replace("/", "_").removesuffix(".html") + ".png")
    dom = parse(render(browser, site / page, screenshot))
    problems = []
    if not any(heading in h for h in dom.headings):
        problems.append(f"{page}: Chromium's DOM has no heading with {heading!r} ({dom.headings})")
    width, height, pixels = png_pixels(screenshot.read_bytes())
    background = max(set(pixels), key=pixels.count)
    inked = sum(p != background for p in pixels) / len(pixels)
    print(
        f"{page}: screenshot {screenshot} {width}x{height}, {len(set(pixels))} colours, "
        f"{inked:.1%} of pixels not background; heading in the DOM: {dom.headings[:1]}"
    )
    if (width, height) != (1280, 2000) or len(set(pixels)) < 16 or inked < 0.02:
        problems.append(f"{page}: the screenshot looks blank or the wrong size")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the site's folder (pkgdown's docs/)")
    parser.add_argument("--screenshots", type=Path, default=Path("site-check"))
    args = parser.parse_args()
    site: Path = args.site
    broken, internal, offsite = broken_links(site)
    print(
        f"{len(list(site.rglob('*.html')))} pages, {internal} internal links checked, "
        f"{len(broken)} broken; {offsite} references off the site not followed"
    )
    problems = list(broken)
    args.screenshots.mkdir(parents=True, exist_ok=True)
    browser = chromium()
    for page, heading in RENDERED.items():
        problems += check_render(browser, site, page, heading, args.screenshots)
    for problem in problems:
        print("  " + problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
