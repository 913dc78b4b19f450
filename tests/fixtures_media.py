"""Generators for media test files (PDF, images, audio, video), written at test time into a directory.

Nothing binary is committed: every file is built here from code (hand-written PDF objects, Pillow,
the stdlib `wave` module, and imageio-ffmpeg's bundled ffmpeg for MP3/MP4).
"""

from __future__ import annotations

import math
import struct
import subprocess
import wave
import zlib
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_text_pdf(path: Path, pages: list[str], title: str | None = "Lev Test Document",
                  author: str | None = "Lev Tests", rotated: bool = False) -> Path:
    """A PDF with a real text layer (Helvetica, one paragraph of lines per page), xref offsets exact; `rotated`:
    the lines run up the page, one beside the other."""
    n = len(pages)
    # object numbers: 1 catalog, 2 pages, 3 font, 4 info, then per page: page, content
    objects: dict[int, bytes] = {}
    kids = " ".join(f"{5 + 2 * i} 0 R" for i in range(n))
    objects[1] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objects[2] = f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode()
    objects[3] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    info = []
    if title:
        info.append(f"/Title ({_pdf_escape(title)})")
    if author:
        info.append(f"/Author ({_pdf_escape(author)})")
    objects[4] = ("<< " + " ".join(info) + " >>").encode()
    for i, text in enumerate(pages):
        page_no, content_no = 5 + 2 * i, 6 + 2 * i
        lines = ["BT", "/F1 14 Tf", "16 TL", "0 1 -1 0 100 72 Tm" if rotated else "72 740 Td"]
        for line in text.split("\n"):
            lines.append(f"({_pdf_escape(line)}) Tj T*")
        lines.append("ET")
        stream = "\n".join(lines).encode("latin-1")
        objects[page_no] = (f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content_no} 0 R >>").encode()
        objects[content_no] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for num in sorted(objects):
        offsets[num] = len(out)
        out += f"{num} 0 obj\n".encode() + objects[num] + b"\nendobj\n"
    xref = len(out)
    size = max(objects) + 1
    out += f"xref\n0 {size}\n".encode() + b"0000000000 65535 f \n"
    for num in range(1, size):
        out += f"{offsets[num]:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {size} /Root 1 0 R /Info 4 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def text_image(lines: list[str], size: int = 48, width: int = 1000) -> Image.Image:
    """Black text on white, large enough for OCR (Pillow's scalable default font)."""
    font = ImageFont.load_default(size=size)
    height = 40 + len(lines) * int(size * 1.6)
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        draw.text((30, 20 + i * int(size * 1.6)), line, fill="black", font=font)
    return img


def make_text_png(path: Path, lines: list[str]) -> Path:
    text_image(lines).save(path, format="PNG")
    return path


def make_image_pdf(path: Path, lines: list[str]) -> Path:
    """An image-only (scanned-like) one-page PDF with no text layer."""
    img = text_image(lines, size=40, width=1200)
    page = Image.new("RGB", (1700, 2200), "white")
    page.paste(img, (100, 150))
    page.save(path, format="PDF", resolution=200.0)
    return path


def make_wav(path: Path, seconds: float = 2.0, rate: int = 16000, freq: float = 440.0) -> Path:
    frames = int(seconds * rate)
    step = 2 * math.pi * freq / rate
    data = b"".join(struct.pack("<h", int(12000 * math.sin(step * i))) for i in range(frames))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data)
    return path


def file_bytes(path: Path) -> bytes:
    """The bytes of a generated file (a plain helper so async tests need no blocking Path call)."""
    with open(path, "rb") as fh:
        return fh.read()


def _ffmpeg(*args: str) -> None:
    import imageio_ffmpeg

    exe = imageio_ffmpeg.get_ffmpeg_exe()
    cmd = [exe, "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args]
    subprocess.run(cmd, check=True, timeout=60)


def make_mp3(path: Path, seconds: float = 1.0) -> Path:
    _ffmpeg("-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}",
            "-c:a", "libmp3lame", "-b:a", "64k", str(path))
    return path


def make_mp4(path: Path, seconds: float = 1.0) -> Path:
    """A small H.264 (or MPEG-4 part 2 if libx264 is absent) video with an AAC sine track."""
    common = ["-f", "lavfi", "-i", f"testsrc=duration={seconds}:size=160x120:rate=10",
              "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}", "-shortest"]
    try:
        _ffmpeg(*common, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", str(path))
    except subprocess.CalledProcessError:
        _ffmpeg(*common, "-c:v", "mpeg4", "-c:a", "aac", str(path))
    return path


def make_corrupt_pdf(path: Path) -> Path:
    path.write_bytes(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R\n garbage \x00\x01\x02 no xref\n")
    return path


def make_exe(path: Path) -> Path:
    """A DOS/Windows executable header (MZ ... PE)."""
    head = bytearray(b"MZ" + b"\x90\x00" + b"\x00" * 56)
    head[0x3C:0x40] = struct.pack("<I", 64)
    path.write_bytes(bytes(head) + b"PE\x00\x00" + b"\x00" * 200)
    return path


def make_bomb_png(path: Path, width: int = 30000, height: int = 30000) -> Path:
    """A 1-bit PNG whose header claims width x height pixels; the file itself is a few hundred KB at most."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    comp = zlib.compressobj(9)
    body = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    path.write_bytes(png)
    return path


def make_all(directory: Path) -> dict[str, Path]:
    """Every fixture by name (used by tests that need several)."""
    d = Path(directory)
    return {
        "text_pdf": make_text_pdf(d / "text.pdf", [f"Page {i} about lighthouses and tides." for i in (1, 2)]),
        "png": make_text_png(d / "text.png", ["Hello Lev knowledge", "second line here"]),
        "wav": make_wav(d / "tone.wav"),
        "mp3": make_mp3(d / "tone.mp3"),
        "mp4": make_mp4(d / "clip.mp4"),
        "corrupt_pdf": make_corrupt_pdf(d / "corrupt.pdf"),
        "exe": make_exe(d / "evil.exe"),
    }
