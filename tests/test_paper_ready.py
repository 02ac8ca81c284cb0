"""Paper-ready output, checked by the tools that read it: pdflatex and a browser.

The default grid and the Shi et al. (2016) grid are each run from planted records
(tests/planted.py: one per planned experiment, nothing measured), so their tables,
figures, summary and report are the files the workflow's own rules make. Then:

- every LaTeX table is compiled by pdflatex inside a minimal one-column and a
  two-column paper, and fails on an error, a line wider than its column or a float
  taller than the page; every figure is set in the same papers at the width of what it
  was drawn for (a column, or the text width), and the smallest font in its PDF, scaled
  as the paper scales the figure, must stay legible;
- the summary page and the Snakemake report (its first view and every table, figure and
  page it shows) are opened in headless Chromium at 800 and 1400 px and fail on a page
  that scrolls sideways or an element cut off (tests/data/layout_problems.js says what
  counts). One screenshot per page and width is kept, under the pytest base temporary
  directory: <basetemp>/paper-ready0/<grid>/screenshots/<page>-<width>.png (by default
  <basetemp> is /tmp/pytest-of-<user>/pytest-<n>; pytest keeps the last three).

Without pdflatex or Chromium the tests skip, except in CI (CI=true), where they fail;
tools/paper-tools/install.sh installs both (`make test` runs it as root).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from accelbench import config as accelbench_config
from accelbench import studies
from accelbench.analysis import fillable, outputs, style
from accelbench.grid import expand

import planted
from chromium import Chromium, executable
from conftest import REPO_ROOT, copy_workflow, missing, snakemake

pytestmark = pytest.mark.workflow

GRIDS = {"default": (), "shi2016": ("src/accelbench/studies/shi2016/config.yaml",)}
WIDTHS = (800, 1400)
WINDOW_HEIGHT = 900
LAYOUT_PROBLEMS = (REPO_ROOT / "tests" / "data" / "layout_problems.js").read_text()
INSTALL = "install it with tools/paper-tools/install.sh (as root; `make test` does)"

# Papers: US letter, 10 pt article, 9 in of text height; one column 6.5 in wide, or two
# of 3.33 in (7 in of text, 0.33 in between), as in the common two-column styles.
PAPERS = {
    "one-column": (r"\documentclass[10pt]{article}", "textwidth=6.5in"),
    "two-column": (r"\documentclass[10pt,twocolumn]{article}", "textwidth=7in,columnsep=0.33in"),
}
# An overfull box TeX reports by less than this is not visible on paper.
OVERFULL_TOLERANCE_PT = 1.0
# The smallest type a figure may set on paper; journals ask for 6 to 8 pt. Exponents of
# log-axis tick labels are scripts, which mathtext (like TeX) sets at 70% of their text:
# they are held to 70% of it.
MIN_FONT_PT = 6.0
SCRIPT_SHRINK = 0.7
STYLE_SIZES = {size for key, size in style.RC.items() if key.endswith("size")}
# A figure drawn for one column (style.SINGLE_COLUMN) may come out a little wider than
# asked, from a tight bounding box; anything wider is drawn for the text width.
COLUMN_FIGURE_BP = style.SINGLE_COLUMN * 72 * 1.1
TEX_PER_BP = 72.27 / 72  # TeX points (1/72.27 in) per PostScript point (1/72 in)


def tool(name: str, path: str | None) -> str:
    if path is None:
        missing(f"{name} not found: {INSTALL}")
    return path


def planned_rules(output: str) -> set[str]:
    """The rules of a run's 'Job stats' table."""
    stats = output.split("Job stats:", 1)[-1]
    return set(re.findall(r"^(\w+)\s+\d+$", stats, flags=re.MULTILINE)) - {"total"}


def made_grid(root: Path, configfiles: tuple[str, ...]) -> Path:
    """results/ of one grid, with its report: planted records, then the workflow's rules."""
    root.mkdir()
    copy_workflow(root)
    planted.plant(root / "results", [root / path for path in configfiles])
    options = [option for path in configfiles for option in ("--configfile", path)]
    done = snakemake(root, "--cores", "2", *options)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert not {rule for rule in planned_rules(output) if rule.endswith("_benchmark")}
    problems = (root / "results" / "record_problems.csv").read_text().splitlines()
    assert problems[1:] == [], problems  # every planted record is a valid one
    report = snakemake(root, "--report", "results/report.html", *options)
    assert report.returncode == 0, (report.stdout + report.stderr)[-3000:]
    return root / "results"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """results/ of each grid, with its report. The grids are made side by side: each run
    spends most of its time on its slowest rule (the figures), which uses one core."""
    base = tmp_path_factory.mktemp("paper-ready")
    with ThreadPoolExecutor(len(GRIDS)) as pool:
        making = {
            grid: pool.submit(made_grid, base / grid, configfiles)
            for grid, configfiles in GRIDS.items()
        }
    return {grid: future.result() for grid, future in making.items()}


def fillable_outputs(grid: str) -> tuple[set[str], set[str]]:
    """The outputs (by file name) the grid's default target asks for: (those of its
    tables and rules, the figures among them drawn). A figure is drawn where the grid plans
    what it compares (outputs.Output.fills) with this host's energy counters, as the
    workflow run here decides."""
    config = accelbench_config.load([REPO_ROOT / path for path in GRIDS[grid]])
    plan = fillable.Planned.of(expand(config), fillable.Counters.here(config))
    baseline = config["report"]["baseline_device"]
    found = {out.name for out in outputs.OUTPUTS if out.needs(plan, baseline)}
    found |= {name for name, need in studies.needs().items() if need(plan, baseline)}
    figures_not_drawn = {
        out.name
        for out in outputs.OUTPUTS
        if out.kind == outputs.FIGURE and not out.fills(plan, baseline)
    }
    return found, found - figures_not_drawn


def paper(layout: str, body: str) -> str:
    document_class, geometry = PAPERS[layout]
    return "\n".join(
        [
            document_class,
            r"\usepackage[T1]{fontenc}",
            rf"\usepackage[letterpaper,textheight=9in,{geometry}]{{geometry}}",
            r"\usepackage{booktabs}",
            r"\usepackage{graphicx}",
            r"\begin{document}",
            body,
            r"\end{document}",
            "",
        ]
    )


# Written to the log before each item of a document, so that what TeX says is told of it.
ITEM_MARK = "PAPER-READY-ITEM="


def compile_latex(
    directory: Path, name: str, layout: str, items: dict[str, str]
) -> dict[str, tuple[str, list[str]]]:
    """Compile `items` (name -> body) in one `layout` paper, each on pages of its own; per
    item, (what pdflatex logged of it, what is wrong with it on paper). One document for
    many items: a pdflatex start costs more than most items."""
    pdflatex = tool("pdflatex", shutil.which("pdflatex"))
    bodies = [
        rf"\typeout{{{ITEM_MARK}{item}}}" + f"\n{text}\n" + r"\clearpage"
        for item, text in items.items()
    ]
    (directory / f"{name}.tex").write_text(paper(layout, "\n".join(bodies)), encoding="utf-8")
    done = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", name],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "max_print_line": "10000"},  # one log line per message
    )
    logged: dict[str, list[str]] = {}
    current: list[str] = []  # the lines of the item last marked (none before the first)
    for line in (
        (directory / f"{name}.log").read_text(encoding="utf-8", errors="replace").splitlines()
    ):
        if line.startswith(ITEM_MARK):
            current = logged[line.removeprefix(ITEM_MARK)] = []
        else:
            current.append(line)
    last = list(logged)[-1] if logged else None
    found = {}
    for item in items:
        log, problems = "\n".join(logged.get(item, [])), []
        if item not in logged:
            problems.append(f"{item}: pdflatex stopped before it")
        elif done.returncode != 0 and item == last:
            errors = [line for line in logged[item] if line.startswith("!")]
            problems.append(f"{item}: pdflatex failed: {errors or done.stdout[-1000:]}")
        for wider, where in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)(.*)", log):
            if float(wider) > OVERFULL_TOLERANCE_PT:
                problems.append(f"{item}: a line {wider} pt wider than its column{where}")
        for taller in re.findall(r"Float too large for page by ([\d.]+)pt", log):
            problems.append(f"{item}: a float {taller} pt taller than the page")
        found[item] = (log, problems)
    return found


def test_one_document_tells_each_items_problems_apart(tmp_path):
    """The checks below compile many items in one document: what TeX says of one must not be
    told of another; an error is told of the item that made it, and the items after it as
    not compiled."""
    items = {
        "fits": r"\begin{table}[h]\centering\begin{tabular}{ll}a & b\\\end{tabular}\end{table}",
        "too wide": r"\noindent\rule{9in}{1pt}",
        "too tall": r"\begin{figure}[p]\rule{1in}{12in}\end{figure}",
        "also fits": "Text.",
        "fails": r"\undefinedcommand",
        "after the failure": "Text.",
    }
    found = {
        item: problems
        for item, (_, problems) in compile_latex(tmp_path, "planted", "one-column", items).items()
    }
    assert found["fits"] == found["also fits"] == []
    assert len(found["too wide"]) == 1 and "wider than its column" in found["too wide"][0]
    assert len(found["too tall"]) == 1 and "taller than the page" in found["too tall"][0]
    assert len(found["fails"]) == 1 and "Undefined control sequence" in found["fails"][0]
    assert found["after the failure"] == ["after the failure: pdflatex stopped before it"]


def latex_tables(results: Path) -> list[Path]:
    return sorted(results.glob("tables/*.tex")) + sorted(results.glob("*.tex"))


def test_every_latex_table_fits_a_one_and_a_two_column_paper(made, tmp_path):
    problems = []
    for grid, results in made.items():
        inputs = {table.stem: rf"\input{{{table}}}" for table in latex_tables(results)}
        for layout in PAPERS:
            name = f"{grid}-tables-{layout}"
            items = {f"{name}: {table}": body for table, body in inputs.items()}
            compiled = compile_latex(tmp_path, name, layout, items)
            problems += [problem for _, found in compiled.values() for problem in found]
    assert problems == []
    for grid, results in made.items():
        with_tex = {*outputs.TABLES, "offload_break_even", "shi2016_comparison"}
        expected = (fillable_outputs(grid)[0] & with_tex) | {"provenance"}
        assert {table.stem for table in latex_tables(results)} == expected


def pdf_width_and_font_sizes(pdf: Path) -> tuple[float, list[float]]:
    """(page width in PostScript points, the size of every font the page sets text in),
    read from the PDF itself: its MediaBox and each content stream's Tf operators."""
    data = pdf.read_bytes()
    box = re.search(rb"/MediaBox\s*\[\s*([-\d.]+)\s+[-\d.]+\s+([-\d.]+)\s+[-\d.]+\s*\]", data)
    sizes = []
    for stream in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.DOTALL):
        try:
            content = zlib.decompress(stream[1])
        except zlib.error:
            content = stream[1]
        sizes += [float(size) for size in re.findall(rb"/F\d+ ([\d.]+) Tf", content)]
    return float(box[2]) - float(box[1]), sizes


def figure_body(pdf: Path, environment: str) -> str:
    """A figure float that includes `pdf` at the line width and logs the width it got."""
    return "\n".join(
        [
            rf"\begin{{{environment}}}[p]",
            r"\centering",
            rf"\sbox0{{\includegraphics[width=\linewidth]{{{pdf}}}}}",
            r"\typeout{FIGURE-WIDTH=\the\wd0}",
            r"\usebox0",
            rf"\caption{{{pdf.stem.replace('_', ' ')}}}",
            rf"\end{{{environment}}}",
        ]
    )


def test_every_figure_is_legible_at_the_width_a_paper_sets_it(made, tmp_path):
    problems = []
    for grid, results in made.items():
        measured = {}
        for pdf in sorted(results.glob("figures/*.pdf")):
            width, sizes = pdf_width_and_font_sizes(pdf)
            assert sizes, f"{pdf.name}: no text found in the PDF"
            measured[pdf] = width, sizes
        for layout in PAPERS:
            name = f"{grid}-figures-{layout}"
            # A column's figure in a column, a wider one across the text (figure*).
            bodies = {
                f"{name}: {pdf.stem}": figure_body(
                    pdf, "figure" if width <= COLUMN_FIGURE_BP else "figure*"
                )
                for pdf, (width, _) in measured.items()
            }
            compiled = compile_latex(tmp_path, name, layout, bodies)
            for (item, (log, found)), (width, sizes) in zip(
                compiled.items(), measured.values(), strict=True
            ):
                problems += found
                if found:
                    continue
                included = float(re.search(r"FIGURE-WIDTH=([\d.]+)pt", log)[1]) / TEX_PER_BP
                for size in sorted(set(sizes)):
                    on_paper, least = size * included / width, MIN_FONT_PT
                    if any(math.isclose(size, SCRIPT_SHRINK * base) for base in STYLE_SIZES):
                        least *= SCRIPT_SHRINK
                    if on_paper < least:
                        problems.append(
                            f"{item}: {size:g} pt type in a {width / 72:.2f} in figure set "
                            f"{included / 72:.2f} in wide is {on_paper:.1f} pt on paper, "
                            f"under {least:.1f} pt"
                        )
    assert problems == []
    for grid, results in made.items():
        drawn = {pdf.stem for pdf in results.glob("figures/*.pdf")}
        by_rules = {"roofline", "kernel_crossover", "offload_break_even", "shi2016_comparison"}
        expected = fillable_outputs(grid)[1] & {*outputs.FIGURES, *by_rules}
        if "shi2016_comparison" in expected:  # its rule draws the thread scaling too
            expected.add("shi2016_scaling")
        assert drawn == expected


def report_lists(browser: Chromium) -> Iterator[list[str]]:
    """Show, one after another, every list of items the report has, from its first view;
    yield the menu entries clicked to reach each, while it is on screen."""
    menu = (
        "[...document.querySelectorAll('a')].filter(a => a.querySelector('svg') && "
        "a.textContent.trim()).map(a => a.textContent.trim())"
    )
    general = {"Workflow", "Statistics", "About"}
    for category in [entry for entry in browser.evaluate(menu) if entry not in general]:
        _click(browser, [category])
        subcategories = [entry for entry in browser.evaluate(menu) if entry != category]
        if not subcategories:
            yield [category]
        for index, subcategory in enumerate(subcategories):
            if index:  # back to the category's menu, which the last list replaced
                _click(browser, [category])
            _choose(browser, subcategory)
            yield [category, subcategory]


# The report's rows of items it shows itself: their first button (the eye) opens the item
# in the report, where another item's is a link that downloads the file.
ROWS = (
    "[...document.querySelectorAll('tr')].filter(tr => "
    "tr.querySelector('a[type=button]')?.getAttribute('href') === '#')"
)


def _click(browser: Chromium, path: list[str]) -> None:
    """From the report's first view, click the menu entries named in `path`."""
    browser.reload()
    for entry in path:
        _choose(browser, entry)


def _choose(browser: Chromium, entry: str) -> None:
    """Click the menu entry `entry` once the report has drawn it."""
    find = (
        "[...document.querySelectorAll('a, button')]"
        f".find(element => element.textContent.trim() === {json.dumps(entry)})"
    )
    deadline = time.monotonic() + 10
    while not browser.evaluate(f"{find} !== undefined"):
        assert time.monotonic() < deadline, f"no menu entry {entry!r} in the report"
        time.sleep(0.1)
    browser.evaluate(f"{find}.click()")
    time.sleep(0.2)


def page_problems(browser: Chromium, name: str) -> list[str]:
    """What is cut off or too wide in the page, and in each frame it shows."""
    found = [f"{name}: {problem}" for problem in browser.evaluate(LAYOUT_PROBLEMS)]
    for frame in browser.child_frames():
        found += [f"{name}, its frame: {p}" for p in browser.evaluate(LAYOUT_PROBLEMS, frame)]
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_the_summary_and_the_report_fit_the_window_in_a_browser(made, tmp_path, width):
    tool("chromium", executable())
    problems = []
    with Chromium(tmp_path / "profile", tmp_path / "chromium.log") as browser:
        for grid, results in made.items():
            shots = results.parent / "screenshots"
            shots.mkdir(exist_ok=True)
            for page in ("summary", "report"):
                browser.open((results / f"{page}.html").as_uri(), width, WINDOW_HEIGHT)
                problems += page_problems(browser, f"{grid} {page}.html at {width} px")
                browser.screenshot(shots / f"{page}-{width}.png")
            if width != min(WIDTHS):
                continue  # each item opened at the narrowest width, where it has least room
            # An item opens beside its list, which stays: the next row's eye is clicked
            # there, and the report shows that item as it would from a fresh list.
            opened = []
            for path in report_lists(browser):
                for row in range(browser.evaluate(ROWS + ".length")):
                    title = browser.evaluate(
                        f"{ROWS}[{row}].querySelector('td').textContent.trim()"
                    )
                    browser.evaluate(f"{ROWS}[{row}].querySelector('a[type=button]').click()")
                    time.sleep(0.3)
                    where = f"{grid} report.html, {' > '.join(path)} > {title!r} at {width} px"
                    problems += page_problems(browser, where)
                    opened.append(where)
            assert len(opened) >= 5, opened
    assert problems == []
