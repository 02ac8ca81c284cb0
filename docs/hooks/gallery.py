"""MkDocs hook: the figures of the committed references on the site, without a copy.

Each `reference/<machine>/figures/<name>.png` is served as `gallery/<machine>/<name>.png`,
where the gallery page shows it; the reference folder stays the one place it lives, so
redrawing a reference (`make redraw`) updates the page at the next build.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ROOT / "reference"


def on_files(files, config):
    for figure in sorted(REFERENCES.glob("*/figures/*.png")):
        machine = figure.parent.parent.name
        files.append(
            File.generated(config, f"gallery/{machine}/{figure.name}", abs_src_path=str(figure))
        )
    return files
