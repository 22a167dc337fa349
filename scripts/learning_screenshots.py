"""Screenshots of the README's learning path: docs/learn-*.png.

Each step's command is run as the README writes it, with ``--svg`` (the
terminal view at 100 columns, as a terminal shows it, and the head view where
there are weights between tokens), and headless Chromium draws the SVG as a
PNG; step 3's page (``--html``) is drawn too, at a temperature of 0.25, to show
its sliders. The trace step needs a model file and is docs/trace.md's.

    python scripts/learning_screenshots.py            # writes docs/learn-*.png
    python scripts/learning_screenshots.py --check    # only says which would change size by > 20 %

Needs Chromium (``apt-get install chromium``), as tests/test_headview.py does.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MAX_HEIGHT = 1800  # pixels: a long walk-through is shown from its start

STEPS = {  # picture -> the README's command (its learning path, in order)
    "learn-1-softmax.png": "attn softmax 4.0 -1.0 2.1",
    "learn-2-lookup.png": "attn lookup fruit --keys apple,banana,chair --values 10,5,2",
    "learn-3-explain.png": "attn explain samples/colors.yaml",
    "learn-4-self.png": "attn self samples/three_spaces.yaml --explain --query like",
}
PAGE = ("learn-3-page.png", "attn explain samples/colors.yaml", "#temperature=0.25")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("needs Chromium: apt-get install chromium")


def attn(args: list[str], env: dict[str, str]) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "attncli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    if run.returncode != 0:
        sys.exit(f"attn {' '.join(args)}: {run.stderr.strip()}")


def screenshot(url: str, png: Path, width: int, height: int, profile: str) -> None:
    subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--window-size={width},{min(height, MAX_HEIGHT)}",
            f"--screenshot={png}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def svg_size(svg: Path) -> tuple[int, int]:
    """The SVG's width and height in pixels, from its outer viewBox or size attributes."""
    head = svg.read_text()[:2000]
    box = re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', head)
    assert box, f"{svg}: no viewBox"
    return int(float(box.group(1))) + 2, int(float(box.group(2))) + 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; say which pictures differ")
    options = parser.parse_args()
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        made: dict[str, Path] = {}
        for name, command in STEPS.items():
            svg = out / (name + ".svg")
            attn([*shlex.split(command)[1:], "--svg", str(svg), "-f", "json"], env)
            page = out / (name + ".html")  # Chromium draws an SVG file best inside a page of its own size
            width, height = svg_size(svg)
            page.write_text(
                f'<!DOCTYPE html><html><body style="margin:0;background:#fff">'
                f'<img src="{svg.name}" width="{width}" height="{height}"></body></html>'
            )
            screenshot(page.as_uri(), out / name, width, height, str(out / "profile"))
            made[name] = out / name
        name, command, fragment = PAGE
        html = out / "page.html"
        attn([*shlex.split(command)[1:], "--html", str(html), "-f", "json"], env)
        screenshot(html.as_uri() + fragment, out / name, 1100, 620, str(out / "profile"))
        made[name] = out / name
        for name, png in made.items():
            target = DOCS / name
            if options.check:
                old = target.stat().st_size if target.exists() else 0
                new = png.stat().st_size
                if not old or abs(new - old) > 0.2 * old:
                    print(f"{name}: {old:,} bytes now, {new:,} made")
            else:
                shutil.copyfile(png, target)
                print(f"wrote {target.relative_to(ROOT)} ({png.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
