"""Comparison tables: rows and columns from what was measured, honest bold, marks, page width."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pandas as pd
import pytest
from test_offload import collect as collect_offload
from test_offload import hand_case

from accelbench.analysis import latex_pages, outputs, plain_tables, tables, tidy
from accelbench.families.kernel import KernelSettings
from accelbench.kernels import measure
from accelbench.studies.roofline import offload

from records import (
    GPU_TRAIN,
    NO_GPU,
    TORCH_CPU_KERNELS,
    TRAIN,
    kernel_record,
    scaled,
    steps,
    timed_kernel,
    train_record,
    write_records,
)

PAGE_PT = 6.5 * 72  # text width of a US letter page with 1 in margins
GLYPH_PT = 5.0  # an average glyph at 10 pt, a little wider than at 9 pt
SEPARATION_PT = 12.0  # \tabcolsep on both sides of a column


def collect(tmp_path, records):
    frame, problems = tidy.collect(write_records(tmp_path, records))
    assert problems == []
    return frame


def markdown_tables(markdown: str) -> list[list[list[str]]]:
    """Every pipe table of a Markdown file as rows of cells, the header first."""
    found, current = [], None
    for line in markdown.splitlines():
        if line.startswith("|") and not line.startswith("|:"):
            current = current if current is not None else []
            current.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif not line.startswith("|:"):
            if current:
                found.append(current)
            current = None
    return found + ([current] if current else [])


def tabular_widths(latex: str) -> list[float]:
    """Estimated width in points of every tabular: per column its widest visible text,
    from the LaTeX source alone (\\phantom counts, markup does not)."""
    widths = []
    for body in re.findall(r"\\begin\{tabular\}\{.*?\}\n(.*?)\\end\{tabular\}", latex, re.S):
        columns: dict[int, int] = {}
        for line in body.splitlines():
            if not line.endswith(r"\\"):
                continue
            text = re.sub(r"\\multicolumn\{(\d+)\}\{\w\}", "", line.removesuffix(r"\\"))
            text = re.sub(r"\\phantom\{([^}]*)\}", r"\1", text)
            text = re.sub(r"\\[a-zA-Z]+(\{\})?", "x", text.replace(r"\&", "&").replace("\\ ", " "))
            for index, cell in enumerate(re.split(r"(?<!\\)&", text)):
                visible = len(cell.replace("{", "").replace("}", "").replace("$", "").strip())
                columns[index] = max(columns.get(index, 0), visible)
        widths.append(sum(GLYPH_PT * chars + SEPARATION_PT for chars in columns.values()))
    return widths


MATMUL_ON_TWO_CPUS = [
    kernel_record("torch", device, size, samples=steps(base * size / 64, base / 100))
    for device, base in (("cpu1", 2e-4), ("cpu2", 1e-4))
    for size in (64, 128)
]
NUMBA_ON_CPU2_ONLY = [
    kernel_record("numba", "cpu2", size, samples=steps(3e-4 * size / 64, 3e-6))
    for size in (32, 64, 128, 256)
]


def test_rows_measured_on_other_devices_get_a_block_without_dash_columns(tmp_path):
    frame = collect(tmp_path, MATMUL_ON_TWO_CPUS + NUMBA_ON_CPU2_ONLY)
    table, footnotes = tables.comparison_table(frame, "kernel")
    # Each row in the unit of its largest time, named beside it: 1.2 ms, the others µs.
    numba = [f"matmul, numba, n={n} (µs)" for n in (32, 64, 128)] + ["matmul, numba, n=256 (ms)"]
    assert table.attrs["blocks"] == [
        [numba, ["cpu2"]],
        [["matmul, torch, n=64 (µs)", "matmul, torch, n=128 (µs)"], ["cpu1", "cpu2"]],
    ]
    markdown = tables.to_markdown(table, footnotes)
    printed = markdown_tables(markdown)
    assert [block[0] for block in printed] == [
        ["Kernel", "cpu2", ""],
        ["Kernel", "cpu1", "", "cpu2", ""],
    ]
    assert tables.MISSING not in markdown  # nothing left to explain: no dash, no dash note
    assert tables.MISSING_NOTE not in markdown


def test_a_lone_odd_row_joins_the_table_and_its_dash_is_explained(tmp_path):
    frame = collect(tmp_path, TRAIN)
    table, footnotes = tables.comparison_table(frame, "train")
    assert len(table.attrs["blocks"]) == 1
    markdown = tables.to_markdown(table, footnotes)
    for block in markdown_tables(markdown):
        body = block[1:]
        assert all(set(row[1:]) != {tables.MISSING} for row in body)
        for column in range(1, len(block[0])):
            assert {row[column] for row in body} != {tables.MISSING}
    assert tables.MISSING_NOTE in markdown


def test_rows_without_a_baseline_are_left_out_and_said_so(tmp_path):
    frame = collect(tmp_path, MATMUL_ON_TWO_CPUS + NUMBA_ON_CPU2_ONLY)
    table, footnotes = tables.speedup_table(frame, "kernel", "cpu1")
    assert list(table.index) == ["matmul, torch, n=64", "matmul, torch, n=128"]
    assert footnotes[0] == "Not shown, no baseline: no record on the baseline cpu1 (4 cells)"


@pytest.mark.parametrize(
    ("runner_up", "bold"),
    [(steps(0.60, 0.001), True), (steps(0.40, 0.025), False)],
    ids=["separate", "overlapping"],
)
def test_bold_only_where_the_intervals_separate(tmp_path, runner_up, bold):
    frame = collect(
        tmp_path,
        [
            train_record("resnet18", "cpu1", samples=runner_up),
            train_record("resnet18", "cpu2", samples=steps(0.49, 0.002)),
        ],
    )
    table, footnotes = tables.comparison_table(frame, "train")
    cells = {cell["column"]: cell for cell in table.attrs["cells"]}
    assert cells["cpu2"]["median"] < cells["cpu1"]["median"]
    overlap = cells["cpu2"]["ci_high"] >= cells["cpu1"]["ci_low"]
    assert overlap is not bold
    assert table.attrs["best"] == ([["resnet18", "cpu2"]] if bold else [])
    assert tables.BOLD_NOTE in tables.to_markdown(table, footnotes)


def test_separation_for_lower_and_higher_is_better():
    fast = {"ci_low": 1.0, "ci_high": 2.0}
    slow = {"ci_low": 2.5, "ci_high": 3.0}
    assert tables.separated(fast, slow, higher_is_better=False)
    assert tables.separated(slow, fast, higher_is_better=True)
    assert not tables.separated(fast, {"ci_low": 1.9, "ci_high": 3.0}, higher_is_better=False)


def wide_kernel_frame(tmp_path):
    """Six devices and long row labels: wider than a page in one tabular."""
    records = [
        kernel_record(backend, device, size, samples=steps(1.234e-4 * size, 1e-6))
        for backend in ("numba-parallel", "torch")
        for device in ("cpu1", "cpu2", "cpu4", "cpu8", "cpu16", "cuda1")
        for size in (1000, 4096)
    ]
    return collect(tmp_path, records)


def test_every_latex_table_fits_the_text_width(tmp_path, gpu_frame):
    frame = wide_kernel_frame(tmp_path / "kernels")
    for build in outputs.TABLES.values():
        for records in (frame, gpu_frame):
            table, footnotes = build(records, "cpu1")
            for width in tabular_widths(tables.to_latex(table, footnotes, "t")):
                assert width <= PAGE_PT
    numbers = offload.break_even_table(collect_offload(tmp_path / "offload", hand_case()))
    latex = offload.write_table(numbers, str(tmp_path / "offload" / "table"))[1].read_text()
    widths = tabular_widths(latex)
    assert len(widths) > 1 and all(width <= PAGE_PT for width in widths)
    assert latex.count("Kernel & dtype & GPU") == len(widths)  # each part names its rows


def test_a_table_too_wide_is_split_and_keeps_every_column(tmp_path):
    table, footnotes = tables.comparison_table(wide_kernel_frame(tmp_path), "kernel")
    latex = tables.to_latex(table, footnotes, "t")
    assert latex.count(r"\begin{tabular}") > 1
    for device in table.columns:
        assert rf"\multicolumn{{2}}{{c}}{{{device}}}" in latex


@pytest.fixture
def gpu_frame(tmp_path):
    return collect(tmp_path / "gpu", GPU_TRAIN)


def test_a_table_without_rows_is_one_line_that_says_why(tmp_path):
    frame = collect(tmp_path, TRAIN)
    table, footnotes = tables.comparison_table(frame, "train", across="precision")
    paths = tables.write_table(table, footnotes, tmp_path / "tables" / "train_precision")
    markdown, latex = (path.read_text(encoding="utf-8") for path in paths[:2])
    why = "No train configuration was measured in more than one precision."
    assert markdown == why + "\n"
    assert r"\begin{tabular}" not in latex and why in latex
    empty = offload.break_even_table(collect_offload(tmp_path / "cpu", []))
    markdown = offload.write_table(empty, str(tmp_path / "offload"))[0].read_text()
    assert markdown == "No kernel ran on a GPU: no break-even to compute.\n"


def test_numbers_line_up_at_the_decimal_point(tmp_path):
    records = TORCH_CPU_KERNELS
    table, footnotes = tables.comparison_table(collect(tmp_path, records), "kernel")
    latex = tables.to_latex(table, footnotes, "t").splitlines()
    # The median right-aligned in a column of its own, padded to the longest fraction.
    assert r"\begin{tabular}{lr@{\ }lr@{\ }l}" in latex
    rows = [line for line in latex if line.startswith("matmul")]
    # Each row in its own unit (1645 µs reads 1.645 ms), its bold median padded outside bold.
    assert rows[0].startswith(
        r"matmul, n=256 (\textmu{}s) & 204.5\phantom{45} & [201.0, 208.0] & "
        r"\textbf{114.5}\phantom{45} & \textbf{[111.0, 118.0]}"
    )
    assert rows[1].startswith(r"matmul, n=512 (ms) & 1.645 & [1.610, 1.680] & \textbf{0.945} & ")
    markdown = tables.to_markdown(table, footnotes)
    assert "|:---|---:|:---|---:|:---|" in markdown
    assert tables.decimal_pads(["1.25", "12", "3.5", "1,000"]) == ["", ".25", "5", ".25"]


def test_a_speedup_above_the_ideal_is_marked(tmp_path):
    frame = collect(
        tmp_path,
        [
            train_record("resnet18", "cpu1", samples=scaled(1.0, 1.0)),
            train_record("resnet18", "cpu4", samples=scaled(1.0, 0.2)),  # 5x on 4 threads
            train_record("resnet18", "cpu2", samples=scaled(1.0, 0.6)),  # 1.7x on 2
            train_record("resnet18", "cuda1", samples=scaled(1.0, 0.02)),  # 50x: no ideal
        ],
    )
    table, footnotes = tables.speedup_table(frame, "train", "cpu1")
    marked = {column for column in table.columns if table.loc["resnet18", column].endswith("‡")}
    assert marked == {"cpu4"}
    assert footnotes[-1] == f"‡ {tables.ABOVE_IDEAL_NOTE}"
    assert r"\textdaggerdbl{}" in tables.to_latex(table, footnotes, "t")
    cells = {cell["column"]: cell["above_ideal"] for cell in table.attrs["cells"]}
    assert cells == {"cpu2": False, "cpu4": True, "cuda1": False}

    table, footnotes = tables.scaling_table(frame)
    assert table.loc["resnet18", "cpu4"].endswith("‡")  # efficiency above 1
    assert not table.loc["resnet18", "cpu2"].endswith("‡")
    assert tables.ideal_speedups(["cpu1", "cpu8", "cuda2"], "cpu2") == {"cpu8": 4.0}


def test_markdown_medians_line_up_at_the_decimal_point_beside_their_intervals(tmp_path):
    records = [
        *TORCH_CPU_KERNELS,
        kernel_record("torch", "cuda1", 256, "unavailable", reason=NO_GPU),
    ]
    table, footnotes = tables.comparison_table(collect(tmp_path, records), "kernel")
    lines = tables.to_markdown(table, footnotes).splitlines()
    # A device with numbers is two columns: the median (right-aligned) and its interval
    # (left); one without (cuda1 did not run) stays one.
    assert "| Kernel | cpu1 |  | cpu2 |  | cuda1 |" in lines
    assert "|:---|---:|:---|---:|:---|---:|" in lines
    # A median lacking the longest fraction is padded with a figure space per digit (and a
    # punctuation space for a point), invisible, as wide as what they stand for; outside
    # the bold, which would otherwise not close.
    pad = "\u2007\u2007"
    assert lines[4] == (
        f"| matmul, n=256 (µs) | 204.5{pad} | [201.0, 208.0] | **114.5**{pad} "
        "| **[111.0, 118.0]** | n/a (a) |"
    )
    assert lines[5] == (
        "| matmul, n=512 (ms) | 1.645 | [1.610, 1.680] | **0.945** | **[0.910, 0.980]** | – |"
    )


def test_plain_markdown_tables_line_their_numbers_up_at_the_point():
    display = pd.DataFrame(
        {"Network": ["a", "b", "c"], "Seconds": ["13.178", "0.4", "n/a"], "Runs": ["3", "12", "3"]}
    )
    lines = plain_tables.to_markdown(display, "Times", [], text_columns=1).splitlines()
    pad = "\u2007" * 2
    assert lines[4:] == ["| a | 13.178 | 3 |", f"| b | 0.4{pad} | 12 |", "| c | n/a | 3 |"]


def numbers_in(text: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", text)


# saxpy from 2 µs to 44 ms a call on the CPU, matmul on both sides: 80 µs on the GPU, 46 ms
# on the CPU (each median about 4.5% above: timed_kernel's samples rise 1% apart).
SPREAD_TIMES = [
    *(timed_kernel("saxpy", "cpu16", "numpy", n, t) for n, t in ((4096, 2e-6), (2**24, 44e-3))),
    timed_kernel("matmul", "cpu16", "numpy", 2048, 46e-3),
    timed_kernel("matmul", "cuda1", "numpy", 2048, 80e-6),
]


def test_a_column_of_times_from_2_us_to_44_ms_reads_in_one_unit_without_five_digits(tmp_path):
    frame = collect(tmp_path, SPREAD_TIMES)
    table, footnotes = tables.energy_table(frame, "kernel")
    (column,) = [name for name in table.columns if name.startswith("time per call")]
    assert column == "time per call (ms)"
    medians = [text.split(" [")[0] for text in table[column]]
    assert all(float(median) < 1000 for median in medians)
    assert table.loc["saxpy, n=4096, cpu16", column].startswith("0.00209 [")  # 2.09 µs
    for block in markdown_tables(tables.to_markdown(table, footnotes)):
        assert not [
            number
            for row in block[1:]
            for number in numbers_in(" ".join(row[1:]))
            if len(number.split(".")[0]) >= 4
        ]


def test_a_row_reads_in_one_unit_named_in_its_label_or_the_caption(tmp_path):
    table, _ = tables.comparison_table(collect(tmp_path, SPREAD_TIMES), "kernel")
    # The GPU's 80 µs and the CPU's 46 ms side by side, in ms; each row in its own unit.
    assert table.loc["matmul, n=2048 (ms)"].str.split(" ").str[0].tolist() == ["48.1", "0.0836"]
    assert list(table.index) == [
        "matmul, n=2048 (ms)",
        "saxpy, n=4096 (µs)",
        "saxpy, n=2²⁴ (ms)",
    ]
    assert "(ms)" not in table.attrs["caption"] and "(µs)" not in table.attrs["caption"]
    # Rows that share a unit have it named once, in the caption.
    alike = collect(tmp_path / "alike", TORCH_CPU_KERNELS[::2])  # 200 and 110 µs at n=256
    table, _ = tables.comparison_table(alike, "kernel")
    assert table.attrs["caption"].startswith("Kernel time (µs), median")
    assert list(table.index) == ["matmul"]  # n=256 in the caption too


def test_every_block_has_a_caption_in_markdown_latex_and_html(tmp_path):
    blocks = collect(tmp_path / "blocks", MATMUL_ON_TWO_CPUS + NUMBA_ON_CPU2_ONLY)
    for frame in (blocks, wide_kernel_frame(tmp_path / "wide")):
        table, footnotes = tables.comparison_table(frame, "kernel")
        caption = table.attrs["caption"]
        lines = tables.to_markdown(table, footnotes).splitlines()
        heads = [index for index, line in enumerate(lines) if line.startswith("| Kernel |")]
        assert [lines[index - 2] for index in heads] == [f"Table: {caption}"] + [
            f"Table: {caption} (continued)"
        ] * (len(heads) - 1)
        page = tables.to_html(table, footnotes)
        assert page.count("<table>") == page.count("<caption>") == len(heads)
        latex = tables.to_latex(table, footnotes, "t").splitlines()
        starts = [index for index, line in enumerate(latex) if line.startswith(r"\begin{tabular}")]
        assert len(starts) > 1
        assert latex[starts[0] - 1] == r"\label{tab:t}"
        assert all(latex[index - 1] == latex_pages.CONTINUED_LINE for index in starts[1:])


def test_bold_parses_as_bold_in_a_commonmark_style_parser(tmp_path):
    """Python-Markdown closes bold as CommonMark does: not after white space, so the
    padding that lines medians up (figure spaces) must stay outside the `**`."""
    import markdown

    table, footnotes = tables.comparison_table(collect(tmp_path, TORCH_CPU_KERNELS), "kernel")
    page = markdown.markdown(tables.to_markdown(table, footnotes), extensions=["tables"])
    strong = re.findall(r"<strong>(.*?)</strong>", page)
    expected = [
        part for row, column in table.attrs["best"] for part in table.loc[row, column].split(" ", 1)
    ]
    assert strong == expected == ["114.5", "[111.0, 118.0]", "0.945", "[0.910, 0.980]"]
    html, latex = tables.to_html(table, footnotes), tables.to_latex(table, footnotes, "t")
    assert html.count("<strong>") == len(table.attrs["best"])
    assert latex.count(r"\textbf{") == len(strong)


def test_the_notes_say_in_words_what_settings_mean(tmp_path):
    slow = measure.too_slow(
        SimpleNamespace(first_call=3.78), "numpy", None, KernelSettings(max_call_s=1)
    )
    records = [
        *MATMUL_ON_TWO_CPUS,
        kernel_record("torch", "cpu1", 512, "skipped", reason=f"run 2 of 3: {slow}"),
        kernel_record(
            "torch", "cpu2", 512, "skipped", reason="skipped: above naive size limit (n=512 > 64)"
        ),
    ]
    table, footnotes = tables.comparison_table(collect(tmp_path, records), "kernel")
    notes = " ".join([*footnotes, *table.attrs["legend"]])
    assert (
        "(a) skipped: run 2 of 3: one call takes 3.78 s, more than the limit of 1 s per call"
        in notes
    )
    assert "the size limit of the plain Python loops" in notes
    settings = {"max_call_s", "naive", "budget", "half_width", "half-width", "min_run_time"}
    assert not {name for name in settings if name in notes}


def test_less_than_and_greater_than_are_set_as_math_in_latex():
    assert tables.latex_escape("< 1.2 mJ, > 2") == "$<$ 1.2 mJ, $>$ 2"
    assert tables.latex_escape("n = 2²⁰") == r"n = 2\textsuperscript{20}"
