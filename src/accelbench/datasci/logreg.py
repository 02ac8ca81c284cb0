"""L2-regularised logistic regression (C = 1) of n samples on 8 features.

The solvers differ (L-BFGS in scikit-learn, quasi-Newton in cuML) and stop at
a gradient tolerance of 1e-8, so their optima agree to far better than the
check's 1e-3 (normwise relative error of coefficients and intercept).
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import coefficient_error, ml_workload

FEATURES = 8


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    features = rng.standard_normal((n, FEATURES))
    logits = features @ rng.uniform(-1, 1, FEATURES) + 0.5
    labels = (rng.uniform(0, 1, n) < 1 / (1 + np.exp(-logits))).astype(np.float64)
    labels[:2] = (0.0, 1.0)  # both classes, whatever n
    return features, labels


def compute(ml, features, labels):
    model = ml.LogisticRegression(C=1.0, tol=1e-8, max_iter=1000)
    model.fit(features, labels)
    return {"coefficients": model.coef_, "intercept": model.intercept_}


SPEC = ml_workload(
    "logreg",
    "logistic regression of n samples on 8 features",
    make_inputs,
    compute,
    error=coefficient_error,
    tolerance=1e-3,
    error_measure="normwise relative error of coefficients and intercept",
)
