"""Least-squares linear regression of n samples on 8 features, with intercept.

The features are independent standard normals (condition number near 1), so in
float64 any exact solver gives coefficients and intercept within 1e-6
(normwise relative) of scikit-learn's.
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


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    features = rng.standard_normal((n, FEATURES))
    weights = rng.uniform(-2, 2, FEATURES)
    return features, features @ weights + 1.5 + 0.1 * rng.standard_normal(n)


def compute(ml, features, targets):
    model = ml.LinearRegression()
    model.fit(features, targets)
    return {"coefficients": model.coef_, "intercept": [model.intercept_]}


def host_coefficients(result) -> dict[str, np.ndarray]:
    return {"coefficients": np.append(result["coefficients"], result["intercept"])}


def reference(features: np.ndarray, targets: np.ndarray) -> dict[str, np.ndarray]:
    return sklearn_library().to_host(compute(sklearn_library().api, features, targets))


def error(result, wanted) -> float:
    if result is None:
        return float("inf")
    return vector_error("coefficients")(host_coefficients(result), host_coefficients(wanted))


SPEC = WorkloadSpec(
    name="linreg",
    description="linear regression of n samples on 8 features",
    item="samples",
    make_inputs=make_inputs,
    reference=reference,
    error=error,
    tolerance=lambda n: 1e-6,
    error_measure="normwise relative error of coefficients and intercept",
    reference_name="scikit-learn",
    implementations=implementations(
        ("sklearn", sklearn_library, compute), ("cuml", cuml_library, compute)
    ),
)
