"""k-nearest neighbours: the 8 nearest of n samples (8 features) for 256 queries.

Brute-force Euclidean distances in float64. Neighbours at equal distance may
come in either order, so the check compares the distances, not the indices:
within 1e-6 (normwise relative) of scikit-learn's, ample for the cancellation
of |x|^2 + |q|^2 - 2 x.q that GPU libraries compute them by.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import ml_workload, vector_error

FEATURES = 8
NEIGHBOURS = 8
QUERIES = 256


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    samples = rng.standard_normal((max(n, NEIGHBOURS), FEATURES))
    return samples, rng.standard_normal((QUERIES, FEATURES))


def compute(ml, samples, queries):
    model = ml.NearestNeighbors(n_neighbors=NEIGHBOURS, algorithm="brute")
    model.fit(samples)
    distances, _ = model.kneighbors(queries)
    return {"distances": distances}


SPEC = ml_workload(
    "knn",
    "8 nearest neighbours among n samples of 256 queries",
    make_inputs,
    compute,
    error=vector_error("distances"),
    tolerance=1e-6,
    error_measure="normwise relative error of the neighbour distances",
)
