"""python/check_site.py, which `make site` runs on the built site: it finds broken internal
links and anchors, and reads a PNG back pixel for pixel (every PNG row filter)."""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

from check_site import broken_links, png_pixels


def test_broken_links_and_anchors_are_found(tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "a.html").write_text(
        '<h1 id="top">A</h1><a href="../index.html#intro">home</a><a href="../">home</a>'
    )
    (tmp_path / "site.css").write_text("")
    (tmp_path / "index.html").write_text(
        '<link href="site.css"><h2 id="intro">Intro</h2>'
        '<a href="reference/a.html">a</a><a href="reference/a.html#top">a</a>'
        '<a href="#intro">intro</a><a href="https://example.org/">out</a>'
        '<a href="missing.html">gone</a><a href="reference/a.html#nowhere">no anchor</a>'
        '<img src="../outside.png">'
    )
    broken, internal, offsite = broken_links(tmp_path)
    assert sorted(broken) == [
        "index.html: ../outside.png (no such file)",
        "index.html: missing.html (no such file)",
        "index.html: reference/a.html#nowhere (no such anchor)",
    ]
    assert (internal, offsite) == (9, 1)


def png(width: int, height: int, rows: list[bytes], size: int) -> bytes:
    """An 8-bit RGB (size 3) or RGBA (size 4) PNG whose row y uses filter y % 5."""
    body, previous = b"", bytes(width * size)
    for y, row in enumerate(rows):
        kind, out = y % 5, bytearray()
        for i, value in enumerate(row):
            left = row[i - size] if i >= size else 0
            up, corner = previous[i], previous[i - size] if i >= size else 0
            p = left + up - corner
            # Paeth: the nearest of the three to p, ties to left, then up.
            paeth = min(
                (abs(p - left), 0, left), (abs(p - up), 1, up), (abs(p - corner), 2, corner)
            )[2]
            predicted = [0, left, up, (left + up) // 2, paeth][kind]
            out.append((value - predicted) & 255)
        body += bytes([kind]) + bytes(out)
        previous = row

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2 if size == 3 else 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(body))
        + chunk(b"IEND", b"")
    )


def test_png_pixels_undo_every_row_filter() -> None:
    rng = random.Random(1)
    for size in (3, 4):
        width, height = 9, 10
        rows = [bytes(rng.randrange(256) for _ in range(width * size)) for _ in range(height)]
        got_width, got_height, pixels = png_pixels(png(width, height, rows, size))
        expected = [r[x * size : x * size + 3] for r in rows[::4] for x in range(0, width, 4)]
        assert (got_width, got_height, pixels) == (width, height, expected)
