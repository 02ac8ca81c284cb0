"""Least-squares linear regression of n samples on 8 features, with intercept.

The features are independent standard normals (condition number near 1), so in
float64 any exact solver gives coefficients and intercept within 1e-6
(normwise relative) of scikit-learn's.
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import coefficient_error, ml_workload

FEATURES = 8


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    features = rng.standard_normal((n, FEATURES))
    weights = rng.uniform(-2, 2, FEATURES)
    return features, features @ weights + 1.5 + 0.1 * rng.standard_normal(n)


def compute(ml, features, targets):
    model = ml.LinearRegression()
    model.fit(features, targets)
    return {"coefficients": model.coef_, "intercept": model.intercept_}


SPEC = ml_workload(
    "linreg",
    "linear regression of n samples on 8 features",
    make_inputs,
    compute,
    error=coefficient_error,
    tolerance=1e-6,
    error_measure="normwise relative error of coefficients and intercept",
)
