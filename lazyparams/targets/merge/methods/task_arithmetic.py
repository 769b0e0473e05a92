"""`task_arithmetic`: the base plus the weighted sum of the models' task vectors (model - base),
scaled by `lambda`; divided by the sum of the weights when `normalize`."""

from __future__ import annotations

from lazyparams.targets.merge.task_vectors import task_vector_method

METHOD = task_vector_method(
    "task_arithmetic", "base + lambda * weighted sum of the task vectors (model - base)"
)
