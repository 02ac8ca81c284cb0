"""k-means (Lloyd) of n samples in 8 dimensions into 8 clusters, from given centres.

Both libraries start from the same initial centres (the first 8 samples) and
run Lloyd's iterations to convergence, so they reach the same local optimum up
to rounding and stopping rule: the inertia (sum of squared distances to the
nearest centre) must lie within 1% of scikit-learn's.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import ml_workload, vector_error

CLUSTERS = 8
FEATURES = 8


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    centres = rng.uniform(-10, 10, (CLUSTERS, FEATURES))
    samples = centres[rng.integers(0, CLUSTERS, n)] + rng.standard_normal((n, FEATURES))
    return samples, samples[:CLUSTERS].copy()


def compute(ml, samples, initial):
    model = ml.KMeans(n_clusters=CLUSTERS, init=initial, n_init=1, max_iter=300, tol=1e-4)
    model.fit(samples)
    return {"inertia": model.inertia_}


SPEC = ml_workload(
    "kmeans",
    "k-means of n samples, 8 features, 8 clusters, given initial centres",
    make_inputs,
    compute,
    error=vector_error("inertia"),
    tolerance=1e-2,
    error_measure="relative difference of the inertia",
)
