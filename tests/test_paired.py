"""Paired ratios of two cells measured in the same rounds: the host's drift from round to
round cancels, and an independent rerun's ratio lands inside the interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accelbench.analysis import paired, ratios, tidy
from accelbench.analysis.tables import builders, to_markdown

from records import timed_kernel, write_records


def rounds(rng, base_a, base_b, n, drift, noise, between=0.0):
    """Run medians of two cells over n rounds: one host drift a round, shared, each cell's
    own noise, and what the host did to the first cell alone during this measurement
    (`between`: its spread from one measurement to the next)."""
    host = np.exp(rng.normal(0.0, drift, n))
    apart = np.exp(rng.normal(0.0, between))
    return (
        list(base_a * apart * host * np.exp(rng.normal(0.0, noise, n))),
        list(base_b * host * np.exp(rng.normal(0.0, noise, n))),
    )


def test_the_normal_constants_of_three_rounds_are_the_textbook_ones():
    three = paired.constants(3)
    assert three.median_range == pytest.approx(1.588, abs=0.01)
    assert three.median_variance == pytest.approx(0.449, abs=0.01)
    assert three.own_limit == pytest.approx(2.59, abs=0.05)


def test_a_rerun_of_the_group_lands_in_the_paired_interval_whatever_the_host_drifted():
    """A host that moves every round by +-20% (as this project's 2-core VMs do) and cells
    whose own run-to-run noise is 3%: the paired interval is about as wide as the noise
    allows, a tenth of what the drift would make it, and a rerun's ratio lands inside."""
    rng = np.random.default_rng(5)
    pairs = [rounds(rng, 2.0, 1.0, 3, drift=0.2, noise=0.03) for _ in range(60)]
    pooled = paired.pooled_spread(paired.log_ratios(a, b) for a, b in pairs)
    assert pooled == pytest.approx(0.03 * math.sqrt(2), rel=0.3)
    inside, widths = 0, []
    for a, b in pairs:
        _, low, high = paired.ratio(paired.log_ratios(a, b), pooled)
        widths.append(math.log(high / low) / 2)
        rerun, _, _ = paired.ratio(paired.log_ratios(*rounds(rng, 2.0, 1.0, 3, 0.2, 0.03)), pooled)
        inside += low <= rerun <= high
    assert inside / len(pairs) >= 0.9
    assert np.median(widths) < 0.15  # +-15%, under a drift of +-20% a round


def test_the_interval_holds_what_the_host_does_to_one_cell_between_measurements():
    """Each measurement of the pair also meets a change of the host that falls on one cell
    alone, as large as BETWEEN_MEASUREMENTS says: rounds seconds apart cannot see it, and
    the interval still holds a rerun's ratio, at its stated width."""
    rng = np.random.default_rng(11)
    noise = 0.1
    between = paired.BETWEEN_MEASUREMENTS * noise * math.sqrt(2)

    def measured():
        return paired.log_ratios(*rounds(rng, 2.0, 1.0, 3, 0.2, noise, between))

    pairs = [measured() for _ in range(400)]
    pooled = paired.pooled_spread(pairs)
    inside = 0
    for ratios_round_by_round in pairs:
        _, low, high = paired.ratio(ratios_round_by_round, pooled)
        inside += low <= paired.ratio(measured(), pooled)[0] <= high
    assert inside / len(pairs) >= 0.92


def test_the_half_width_adds_the_between_measurements_term_to_the_rounds():
    estimate, _, high = paired.ratio([0.0, 0.01, -0.01], 0.02)
    variance = 2 * paired.constants(3).median_variance + 2 * paired.BETWEEN_MEASUREMENTS**2
    assert math.log(high / estimate) == pytest.approx(paired.Z * 0.02 * math.sqrt(variance))


def test_a_pair_noisier_than_its_kind_keeps_its_own_spread():
    calm = [[0.0, 0.01, -0.01]] * 20
    pooled = paired.pooled_spread(calm)
    noisy = [0.0, 0.5, -0.5]
    _, low, high = paired.ratio(noisy, pooled)
    assert (low, high) == paired.ratio(noisy, None)[1:]
    assert high / low > 2


def test_one_round_in_common_pairs_nothing():
    assert paired.ratio([0.1], 0.02) is None
    assert paired.pooled_spread([[0.1]]) is None
    assert paired.log_ratios([1.0, 2.0, 3.0], [1.0, 0.0]) == [0.0]


def grouped(found, measurement, runs):
    """A record (id, record) as measured in a comparison group's measurement, with these
    run medians."""
    exp_id, record = found
    group = {"id": "g", "measurement": measurement, "cells": ["a", "b"]}
    record["conditions"] = {"busy": False, "group": {**group, "rounds": [["a", "b"]] * 3}}
    record["series"] = {"time_run_medians": {"unit": "s", "values": [float(x) for x in runs]}}
    return exp_id, record


KERNELS = ("matmul", "saxpy")


def test_a_speedup_of_two_cells_measured_together_has_the_paired_interval(tmp_path):
    """cpu2 against cpu1 measured in one group's rounds, each round the host 20% off: the
    paired interval is narrow and named; a cell measured apart keeps the wide one, marked."""
    rng = np.random.default_rng(3)
    drift = np.exp(rng.normal(0.0, 0.2, 3))
    records = [
        grouped(timed_kernel("matmul", "cpu1", "numpy", 256, 2e-3), "m1", 2e-3 * drift),
        grouped(timed_kernel("matmul", "cpu2", "numpy", 256, 1e-3), "m1", 1e-3 * drift * 1.01),
        timed_kernel("saxpy", "cpu1", "numpy", 4096, 2e-5),
        timed_kernel("saxpy", "cpu2", "numpy", 4096, 1e-5),
    ]
    write_records(tmp_path, records)
    frame, _ = tidy.collect(sorted(str(path) for path in tmp_path.rglob("*.json")))
    cells, _ = ratios.speedup(frame, "kernel", "cpu1")
    matmul, saxpy = (cells[cells["label"].str.startswith(kernel)].iloc[0] for kernel in KERNELS)
    assert bool(matmul["paired"]) and not bool(saxpy["paired"])
    assert matmul["median"] == pytest.approx(2 / 1.01, rel=1e-9)
    assert matmul["ci_level"] == pytest.approx(0.95)
    table, notes = builders.speedup_table(frame, "kernel", "cpu1")
    text = to_markdown(table, notes)
    assert "interval from the two cells' ratios round by round" in text
    assert "°" in text and "not measured together" in text
