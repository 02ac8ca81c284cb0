"""k-nearest neighbours: the 8 nearest of n samples (8 features) for 256 queries.

Brute-force Euclidean distances in float64. Neighbours at equal distance may
come in either order, so the check compares the distances, not the indices:
within 1e-6 (normwise relative) of scikit-learn's, ample for the cancellation
of |x|^2 + |q|^2 - 2 x.q that GPU libraries compute them by.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import (
    WorkloadSpec,
    cuml_library,
    implementations,
    sklearn_library,
    vector_error,
)

FEATURES = 8
NEIGHBOURS = 8
QUERIES = 256


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((max(n, NEIGHBOURS), FEATURES)), rng.standard_normal(
        (QUERIES, FEATURES)
    )


def compute(ml, samples, queries):
    model = ml.NearestNeighbors(n_neighbors=NEIGHBOURS, algorithm="brute")
    model.fit(samples)
    distances, _ = model.kneighbors(queries)
    return {"distances": distances}


def reference(samples: np.ndarray, queries: np.ndarray) -> dict[str, np.ndarray]:
    return sklearn_library().to_host(compute(sklearn_library().api, samples, queries))


SPEC = WorkloadSpec(
    name="knn",
    description="8 nearest neighbours among n samples of 256 queries",
    item="samples",
    make_inputs=make_inputs,
    reference=reference,
    error=vector_error("distances"),
    tolerance=lambda n: 1e-6,
    error_measure="normwise relative error of the neighbour distances",
    reference_name="scikit-learn",
    implementations=implementations(
        ("sklearn", sklearn_library, compute), ("cuml", cuml_library, compute)
    ),
)
