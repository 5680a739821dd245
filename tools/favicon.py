"""Writes static/favicon.png: the four token colours' first three (accepted, rejected, target)
as bars, 32 x 32 px. A PNG and not an SVG: the browser decodes the favicon again after every
change of the address bar, and an SVG is a whole document to build each time.

    python tools/favicon.py
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

SIZE = 32
# (x from, x to) in a 16-unit grid, as the old SVG drew them; y from 5 to 11.
BARS = (((1, 5), (0x00, 0x9E, 0x73)), ((6, 10), (0xD5, 0x5E, 0x00)),
        ((11, 15), (0x00, 0x72, 0xB2)))


def pixel(x: int, y: int) -> bytes:
    gx, gy = x / 2, y / 2
    if 5 <= gy < 11:
        for (left, right), rgb in BARS:
            if left <= gx < right:
                return bytes(rgb) + b"\xff"
    return b"\x00\x00\x00\x00"


def png() -> bytes:
    rows = b"".join(b"\x00" + b"".join(pixel(x, y) for x in range(SIZE)) for y in range(SIZE))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", SIZE, SIZE, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    out = Path(__file__).resolve().parent.parent / "static" / "favicon.png"
    out.write_bytes(png())
    print(f"{out}: {out.stat().st_size} bytes")
