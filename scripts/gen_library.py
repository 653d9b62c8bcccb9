#!/usr/bin/env python3
"""Generates a small, deterministic, media-like library for the lifeos demo.

Real PNG images, real WAV recordings, Markdown notes, JSON records and a large binary,
all from the standard library. `edit` applies a round of realistic edits.

usage: gen_library.py create DIR | gen_library.py edit DIR
"""
import json
import math
import os
import random
import struct
import sys
import wave
import zlib


def png(path, width, height, pixel):
    """Writes an RGB PNG whose pixel (x, y) is pixel(x, y) -> (r, g, b)."""
    raw = bytearray()
    for y in range(height):
        raw.append(0)
        for x in range(width):
            raw.extend(pixel(x, y))

    def chunk(tag, data):
        c = struct.pack(">I", len(data)) + tag + data
        return c + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    data = b"\x89PNG\r\n\x1a\n"
    data += chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    data += chunk(b"IDAT", zlib.compress(bytes(raw), 6))
    data += chunk(b"IEND", b"")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def photo(path, seed, mark=None):
    rnd = random.Random(seed)
    noise = [rnd.randrange(0, 40) for _ in range(64)]

    def pixel(x, y):
        if mark and mark[0] <= x < mark[2] and mark[1] <= y < mark[3]:
            return (255, 32, 32)
        n = noise[(x * 7 + y * 13) % 64]
        return ((x + seed * 17 + n) % 256, (y * 2 + n) % 256, (x + y + seed) % 256)

    png(path, 320, 240, pixel)


def recording(path, seconds, freq, seed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rate = 16000
    rnd = random.Random(seed)
    frames = bytearray()
    for i in range(int(seconds * rate)):
        t = i / rate
        v = 0.4 * math.sin(2 * math.pi * freq * t) * (0.6 + 0.4 * math.sin(2 * math.pi * 0.5 * t))
        v += rnd.uniform(-0.02, 0.02)
        frames.extend(struct.pack("<h", int(max(-1.0, min(1.0, v)) * 32767)))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(frames))


WORDS = ("budget plan launch meeting trip photo family garden invoice quarterly review "
         "notes project friday design release archive music recipe travel camera").split()


def text(path, seed, lines):
    rnd = random.Random(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(f"# Note {seed}\n\n")
        for _ in range(lines):
            f.write(" ".join(rnd.choice(WORDS) for _ in range(12)) + "\n")


def create(root):
    for i in range(12):
        photo(f"{root}/photos/2026-11/img_{i:03}.png", i)
    for i, freq in enumerate((220, 330, 440)):
        recording(f"{root}/recordings/memo_{i}.wav", 4, freq, i)
    for i in range(40):
        text(f"{root}/notes/n{i:02}.md", i, 30)
    with open(f"{root}/notes/plan.md", "w") as f:
        f.write("# Plan\n\nThe quarterly budget is 12,000.\nLaunch on Friday.\n")
    os.makedirs(f"{root}/records", exist_ok=True)
    for i in range(25):
        with open(f"{root}/records/contact_{i:02}.json", "w") as f:
            json.dump({"type": "contact", "id": i, "name": f"Person {i}", "tags": ["friend"] if i % 2 else []}, f, indent=2)
    os.makedirs(f"{root}/raw", exist_ok=True)
    with open(f"{root}/raw/sensor.bin", "wb") as f:
        f.write(random.Random(99).randbytes(24 * 1024 * 1024))


def edit(root):
    photo(f"{root}/photos/2026-11/img_003.png", 3, mark=(100, 80, 160, 140))
    recording(f"{root}/recordings/memo_1.wav", 5, 330, 1)
    with open(f"{root}/notes/plan.md", "a") as f:
        f.write("Update: the budget moved to 15,000.\n")
    os.remove(f"{root}/records/contact_07.json")
    photo(f"{root}/photos/2026-11/img_100.png", 100)
    with open(f"{root}/raw/sensor.bin", "r+b") as f:
        f.seek(10 * 1024 * 1024)
        f.write(b"recalibrated" * 10)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("create", "edit"):
        sys.exit(__doc__)
    {"create": create, "edit": edit}[sys.argv[1]](sys.argv[2])
