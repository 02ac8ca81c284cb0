"""Several machines side by side: `accelbench compare-machines` joins the records of results
and reference folders on the cells of work they share, and a CPU-only run's summary cites
what a committed reference's GPU did for its cells, as another machine."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from accelbench import cli
from accelbench import config as accelbench_config
from accelbench.analysis import machines, summary, tables, tidy

from conftest import missing
from records import scaled, timed_kernel, train_record, write_records


def on_machine(record, host, started, commit="0" * 40, cpu="Test CPU", gpu=None):
    """(id, record) as measured on another machine: its host, CPU, GPU, day and commit."""
    exp_id, found = copy.deepcopy(record)
    provenance = found["provenance"]
    provenance.update(host=host, cpu_model=cpu, started=f"{started}T10:00:00.000+00:00")
    provenance["finished"] = f"{started}T10:00:05.000+00:00"
    provenance["git"] = {"commit": commit, "dirty": False}
    provenance["accelerator"]["gpus"] = [gpu] if gpu else []
    return exp_id, found


H200 = {"host": "gpu01", "started": "2026-11-28", "commit": "302a446" + "b" * 33}
H200_GPU = {**H200, "cpu": "Intel(R) Xeon(R) Processor", "gpu": "NVIDIA H200"}
LAPTOP = {"host": "laptop", "started": "2026-12-01", "cpu": "AMD Ryzen 7"}


def reference_h200():
    """A GPU machine's records, its GPU and its 16 CPUs at matmul n=1024 (torch 10x ahead of
    numpy there), and saxpy on the GPU alone."""
    return [
        on_machine(timed_kernel("matmul", "cpu16", "numpy", 1024, 5e-3), **H200_GPU),
        on_machine(timed_kernel("matmul", "cpu16", "torch", 1024, 6e-3), **H200_GPU),
        on_machine(timed_kernel("matmul", "cuda1", "torch", 1024, 5e-4), **H200_GPU),
        on_machine(timed_kernel("saxpy", "cuda1", "torch", 10**7, 1e-3), **H200_GPU),
    ]


def laptop_run():
    """A CPU-only run on two threads: matmul n=1024 in numpy and torch, and n=256."""
    return [
        on_machine(timed_kernel("matmul", "cpu2", "numpy", 1024, 1.6e-2), **LAPTOP),
        on_machine(timed_kernel("matmul", "cpu2", "torch", 1024, 2e-2), **LAPTOP),
        on_machine(timed_kernel("matmul", "cpu2", "numpy", 256, 4e-4), **LAPTOP),
    ]


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A results folder (records at its top) and a reference folder (records/ below it),
    named as given from the folder above them."""
    monkeypatch.chdir(tmp_path)
    results, reference = Path("results"), Path("nvidia-h200")
    write_records(results, laptop_run())
    write_records(reference / "records", reference_h200())
    return results, reference


def joined_table(*paths):
    joined = machines.join(machines.load_all(paths))
    return joined, *tables.machines_table(joined)


def test_a_row_is_a_cell_of_work_and_a_column_a_machine_and_device(folders):
    results, reference = folders
    joined, table, notes = joined_table(results, reference)
    assert list(table.index) == ["matmul, numpy, float32, n=1024", "matmul, torch, float32, n=1024"]
    laptop, cpu16, cuda1 = (name.split(tables.HEADER_BREAK) for name in table.columns)
    assert laptop == ["laptop, AMD Ryzen 7", "cpu2, 2026-12-01", str(results)]
    assert cpu16 == ["gpu01, Intel Xeon Processor", "cpu16, 2026-11-28", f"{reference} at 302a446"]
    assert cuda1 == [
        "gpu01, Intel Xeon Processor",
        "NVIDIA H200",
        "cuda1, 2026-11-28",
        f"{reference} at 302a446",
    ]
    # Each number is its own machine's (samples from 16 and 5 ms up by 1% a step), with its
    # interval; numpy never ran on the GPU.
    assert table.iloc[0].tolist()[:2] == ["16.7 [16.2, 17.3]", "5.23 [5.05, 5.40]"]
    assert table.iloc[0, 2] == tables.MISSING and table.iloc[1, 2].startswith("0.523 [")
    assert "(ms)" in table.attrs["caption"]
    assert (
        f"Not shown: 2 cells of work measured on one machine only ({results} 1; {reference} 1)."
        in notes
    )
    assert any(note.startswith("Each row: one cell of work") for note in notes)


def test_the_command_prints_the_table_and_writes_it_and_its_figure(folders, tmp_path, capsys):
    results, reference = folders
    out = tmp_path / "out"
    assert cli.main(["compare-machines", str(results), str(reference), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.startswith("| Cell of work"))
    assert "gpu01, Intel Xeon Processor, NVIDIA H200, cuda1, 2026-11-28, " in header
    assert "| matmul, torch, float32, n=1024 |" in printed
    written = sorted(path.name for path in out.iterdir())
    assert written == [f"machines.{ext}" for ext in ("csv", "html", "md", "pdf", "png", "tex")]
    lines = pd.read_csv(out / "machines.csv")
    assert len(lines) == 5  # the records shown: 2 of the laptop, 3 of the reference
    cuda = lines[lines["device"] == "cuda1"].iloc[0]
    assert (cuda["gpu"], cuda["date"], cuda["commit"]) == ("NVIDIA H200", "2026-11-28", "302a446")
    assert cuda["record"] == "kernels/matmul/cuda1/torch/float32/n1024" and cuda["unit"] == "s"
    assert r"\begin{tabular}[b]{@{}c@{}}gpu01, Intel Xeon Processor \\ NVIDIA H200" in (
        out / "machines.tex"
    ).read_text(encoding="utf-8")


def options_record(model, options, **machine):
    """A ResNet-50 record on cpu16 whose model options are `options`."""
    exp_id, record = train_record(model, "cpu16", samples=scaled(0.4, 1.0), batch=32)
    record["params"]["options"] = options
    return on_machine((exp_id, record), **machine)


def test_training_cells_with_different_model_options_are_not_joined(tmp_path):
    write_records(tmp_path / "a", [options_record("resnet50", {"depth": 50, "lr": 0.1}, **H200)])
    write_records(tmp_path / "b", [options_record("resnet50", {"depth": 18, "lr": 0.1}, **LAPTOP)])
    joined = machines.join(machines.load_all([tmp_path / "a", tmp_path / "b"]))
    assert joined.cells.empty and joined.alone == {str(tmp_path / "a"): 1, str(tmp_path / "b"): 1}
    assert joined.unlike == ["resnet50, fp32, single, batch 32"]
    said = machines.nothing_shared(joined)
    assert "not the same work: resnet50, fp32, single, batch 32" in said
    # The same options in another order are the same work.
    write_records(tmp_path / "c", [options_record("resnet50", {"lr": 0.1, "depth": 50}, **LAPTOP)])
    joined = machines.join(machines.load_all([tmp_path / "a", tmp_path / "c"]))
    assert list(joined.cells["label"].unique()) == ["resnet50, fp32, single, batch 32"]


def test_machines_that_share_no_cell_are_told_so_and_nothing_is_drawn(tmp_path, capsys):
    write_records(tmp_path / "a", laptop_run())
    write_records(tmp_path / "b", reference_h200()[3:])
    out = tmp_path / "out"
    arguments = ["compare-machines", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]
    assert cli.main(arguments) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("No cell of work is shared: none was measured ok on two of ")
    assert f"{tmp_path / 'a'} 3; {tmp_path / 'b'} 1" in printed
    assert not out.exists()


def test_a_path_without_records_or_that_does_not_exist_is_named(folders, tmp_path, capsys):
    results, _ = folders
    (tmp_path / "empty").mkdir()
    for bad, said in (
        (tmp_path / "nowhere", "no such file or directory"),
        (tmp_path / "empty", "no result records"),
        (results, "given twice"),
    ):
        assert cli.main(["compare-machines", str(results), str(bad)]) == 2
        error = capsys.readouterr().err
        assert str(bad) in error and said in error
    assert cli.main(["compare-machines", str(results)]) == 2
    assert "two or more folders" in capsys.readouterr().err


def test_the_latex_table_compiles(folders, tmp_path):
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        missing("pdflatex not found: install it with tools/paper-tools/install.sh")
    _, table, notes = joined_table(*folders)
    (tmp_path / "machines.tex").write_text(tables.to_latex(table, notes, "machines"))
    (tmp_path / "paper.tex").write_text(
        "\n".join(
            [
                r"\documentclass[10pt]{article}",
                r"\usepackage[T1]{fontenc}",
                # The one-column paper of the paper-ready checks: 6.5 in of text width.
                r"\usepackage[letterpaper,textheight=9in,textwidth=6.5in]{geometry}",
                r"\usepackage{booktabs}",
                r"\begin{document}",
                r"\input{machines.tex}",
                r"\end{document}",
            ]
        )
    )
    done = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "paper"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert "Overfull" not in (tmp_path / "paper.log").read_text(errors="replace")


@pytest.fixture
def workflow_root(tmp_path, monkeypatch):
    """A workflow folder of its own, whose reference/ holds an H200's records."""
    root = tmp_path / "workflow"
    (root / "config").mkdir(parents=True)
    (root / "Snakefile").write_text("")
    (root / "config" / "config.yaml").write_text("")
    write_records(root / "reference" / "nvidia-h200" / "records", reference_h200())
    (root / "reference" / "no-records").mkdir()
    monkeypatch.setenv(accelbench_config.WORKFLOW_ENV, str(root))
    return root


def run_frame(tmp_path, records):
    frame, problems = tidy.collect(write_records(tmp_path / "run", records))
    assert problems == []
    return frame


def test_a_cpu_only_summary_quotes_a_committed_reference_as_another_machine(
    workflow_root, tmp_path
):
    references = machines.committed_references(accelbench_config.workflow_root())
    assert [reference.name for reference in references] == ["reference/nvidia-h200"]
    frame = run_frame(tmp_path, laptop_run())
    quote, advice = summary.headline(frame, references)
    assert quote == (
        "This run measured CPUs only. On another machine — NVIDIA H200 on host gpu01 (Intel "
        "Xeon Processor), measured 2026-11-28 at commit 302a446 (reference/nvidia-h200) — the "
        "same cells: matmul, float32, n=1024: that GPU (torch) took 523 µs, this run's CPU "
        "(numpy, 2 threads) 16.7 ms; on that machine the GPU (torch) is 10.0x [9.4, 10.7] "
        "faster than the best CPU (numpy, 16 threads)."
    )
    assert advice.startswith("Those are numbers of other machines.") and "cuda1" in advice
    page = summary.summary_html(frame, "cpu1", references)
    section = page[page.index("<h2>Other machines</h2>") : page.index("<h2>Cells that need")]
    assert "another machine, at its own date and commit" in section
    assert "NVIDIA H200 on host gpu01 (Intel Xeon Processor), measured 2026-11-28 at commit" in (
        section
    )
    assert (
        "<td>matmul, float32, n=1024</td><td>reference/nvidia-h200</td>"
        "<td>cpu16 (numpy) 5.23 ms; cuda1 (torch) 523 µs</td><td>cpu2 (numpy) 16.7 ms</td>"
    ) in section


def test_a_summary_no_reference_shares_a_cell_with_says_so_and_what_they_have(
    workflow_root, tmp_path
):
    references = machines.committed_references(accelbench_config.workflow_root())
    other = [on_machine(timed_kernel("stencil", "cpu2", "numpy", 64, 1e-4), **LAPTOP)]
    frame = run_frame(tmp_path, other)
    (answer,) = summary.headline(frame, references)
    assert answer.startswith("This run measured CPUs only, so it cannot tell where a GPU pays off")
    page = summary.summary_html(frame, "cpu1", references)
    assert (
        "<h2>Other machines</h2>\n<p>No reference shares a cell of work with this run. "
        "reference/nvidia-h200 has matmul, float32, n=1024; saxpy, float32, n=10M.</p>"
    ) in page
    assert "No committed reference to set beside this run" in summary.summary_html(frame, "cpu1")


def test_a_reference_kept_from_this_run_is_not_another_machine(tmp_path):
    records = reference_h200()
    frame = run_frame(tmp_path, records)
    write_records(tmp_path / "reference" / "records", records)
    (kept,) = [machines.load(tmp_path / "reference", "reference/kept")]
    assert summary.other_machines(frame, [kept])[0].empty
