"""Random forest: 32 trees of depth 8 fitted on n samples (8 features, two classes), then
predicting 2000 held-out samples.

The libraries grow different forests (scikit-learn searches exact splits,
cuML splits on 128-bin histograms, and they bootstrap differently), so no
tree can be compared; what must agree is what the forest is for: the held-out
accuracy, within 5% (relative) of scikit-learn's. On the CPU the trees are
grown on the device's threads (joblib, pinned with the other thread pools).
"""

from __future__ import annotations

import numpy as np

from accelbench.datasci import ml_workload, vector_error

FEATURES = 8
HELD_OUT = 2000


def _labelled(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((count, FEATURES))
    score = x[:, 0] * x[:, 1] + np.sin(2 * x[:, 2]) + 0.5 * x[:, 3]
    return x, (score > 0).astype(np.int32)


def make_inputs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    return (*_labelled(rng, n), *_labelled(rng, HELD_OUT))


def compute(ml, samples, labels, held_out, truth):
    model = ml.RandomForestClassifier(n_estimators=32, max_depth=8, random_state=0)
    model.fit(samples, labels)
    return {"accuracy": (model.predict(held_out) == truth).mean()}


SPEC = ml_workload(
    "random_forest",
    "random forest of 32 trees on n samples, accuracy on 2000 held out",
    make_inputs,
    compute,
    error=vector_error("accuracy"),
    tolerance=5e-2,
    error_measure="relative difference of the held-out accuracy",
)
