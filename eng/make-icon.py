#!/usr/bin/env python3
"""Draws eng/icon.png, the packages' icon (128x128): a spindle of thread on a blue tile. Standard library only."""
import math
import struct
import zlib
from pathlib import Path

SIZE = 128
BACK = (43, 76, 126)
THREAD = (236, 242, 250)
ROD = (250, 196, 84)


def tile_alpha(x, y):
    # A square with rounded corners (radius 24), anti-aliased over one pixel.
    r = 24
    cx = min(max(x, r), SIZE - 1 - r)
    cy = min(max(y, r), SIZE - 1 - r)
    d = math.hypot(x - cx, y - cy)
    return max(0.0, min(1.0, r + 0.5 - d))


def in_spindle(x, y):
    # A lens: the wound thread, wide at the middle, pointed at both ends.
    half_height, half_width = 46, 30
    t = (y - SIZE / 2) / half_height
    if abs(t) >= 1:
        return False
    width = half_width * (1 - t * t)
    return abs(x - SIZE / 2) <= width


def pixel(x, y):
    a = tile_alpha(x, y)
    color = BACK
    if abs(x - SIZE / 2) <= 3 and 10 <= y <= SIZE - 10:
        color = ROD
    if in_spindle(x, y):
        # Windings: darker bands every 7 pixels, slanted.
        color = THREAD if ((y + (x - SIZE / 2) * 0.35) % 7) >= 2 else (190, 205, 228)
    return (*color, round(255 * a))


def main():
    rows = b"".join(b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(SIZE)) for y in range(SIZE))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", SIZE, SIZE, 8, 6, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")
    Path(__file__).with_name("icon.png").write_bytes(png)


if __name__ == "__main__":
    main()
