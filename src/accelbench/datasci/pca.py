"""PCA of n samples in 16 dimensions to 4 components (full SVD).

The 16 features have distinct scales, so the leading variances are well
separated; in float64 any exact decomposition gives explained-variance ratios
within 1e-6 (normwise relative) of scikit-learn's.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import ml_workload, vector_error

FEATURES = 16
COMPONENTS = 4


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray]:
    scales = np.geomspace(10.0, 0.1, FEATURES)
    mixing = np.linalg.qr(rng.standard_normal((FEATURES, FEATURES)))[0]
    return ((rng.standard_normal((n, FEATURES)) * scales) @ mixing,)


def compute(ml, samples):
    model = ml.PCA(n_components=COMPONENTS, svd_solver="full")
    model.fit(samples)
    return {"explained_variance_ratio": model.explained_variance_ratio_}


SPEC = ml_workload(
    "pca",
    "PCA of n samples, 16 features, to 4 components",
    make_inputs,
    compute,
    error=vector_error("explained_variance_ratio"),
    tolerance=1e-6,
    error_measure="normwise relative error of the explained-variance ratios",
)
