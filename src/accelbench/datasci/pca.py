"""PCA of n samples in 16 dimensions to 4 components (full SVD).

The 16 features have distinct scales, so the leading variances are well
separated; in float64 any exact decomposition gives explained-variance ratios
within 1e-6 (normwise relative) of scikit-learn's.
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


def reference(samples: np.ndarray) -> dict[str, np.ndarray]:
    return sklearn_library().to_host(compute(sklearn_library().api, samples))


SPEC = WorkloadSpec(
    name="pca",
    description="PCA of n samples, 16 features, to 4 components",
    item="samples",
    make_inputs=make_inputs,
    reference=reference,
    error=vector_error("explained_variance_ratio"),
    tolerance=lambda n: 1e-6,
    error_measure="normwise relative error of the explained-variance ratios",
    reference_name="scikit-learn",
    implementations=implementations(
        ("sklearn", sklearn_library, compute), ("cuml", cuml_library, compute)
    ),
)
