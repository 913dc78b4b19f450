"""Draws Lev's icon with Pillow: a white bookmark on Lev's blue, the same shape as web/static/icon.svg. Run it
(`python web/make_icons.py`) when the icon changes; it writes the favicon, the web app's icons (PWA manifest,
apple-touch) and the browser extension's icons."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parent.parent
BLUE, WHITE = (36, 86, 199, 255), (255, 255, 255, 255)
SCALE = 8  # drawn large, then scaled down: smooth edges


def draw(size: int, *, maskable: bool = False) -> Image.Image:
    """The icon at `size` px; `maskable` fills the whole square (the platform cuts its own shape) and keeps the
    bookmark inside the central safe zone."""
    big = size * SCALE
    img = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    if maskable:
        d.rectangle((0, 0, big, big), fill=BLUE)
    else:
        d.rounded_rectangle((0, 0, big - 1, big - 1), radius=int(big * 0.22), fill=BLUE)
    shrink = 0.7 if maskable else 1.0
    cx, cy = big / 2, big / 2

    def at(x: float, y: float) -> tuple[float, float]:  # a point of the 100x100 design, shrunk about the centre
        return cx + (x - 50) / 100 * big * shrink, cy + (y - 50) / 100 * big * shrink

    d.polygon([at(31, 18), at(69, 18), at(69, 84), at(50, 68), at(31, 84)], fill=WHITE)
    d.rectangle((*at(39, 31), *at(61, 36)), fill=BLUE)  # two lines of "text" on the bookmark
    d.rectangle((*at(39, 42), *at(55, 47)), fill=BLUE)
    return img.resize((size, size), Image.Resampling.LANCZOS)


def main() -> None:
    static, ext = ROOT / "web" / "static", ROOT / "extension" / "icons"
    ext.mkdir(parents=True, exist_ok=True)
    for size in (16, 32, 48, 128):
        draw(size).save(ext / f"icon-{size}.png", optimize=True)
    for size in (192, 512):
        draw(size).save(static / f"icon-{size}.png", optimize=True)
    draw(512, maskable=True).save(static / "icon-maskable-512.png", optimize=True)
    draw(180, maskable=True).save(static / "apple-touch-icon.png", optimize=True)
    draw(48).save(static / "favicon.ico", sizes=[(16, 16), (32, 32), (48, 48)])


if __name__ == "__main__":
    main()
