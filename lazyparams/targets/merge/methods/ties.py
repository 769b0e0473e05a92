"""`ties`: TIES-merging. Each task vector keeps its `density` share of largest magnitudes,
signs are elected by the weighted vectors' sum, and the agreeing elements are averaged by their
weights (`normalize`, the default). The selection holds each task vector whole."""

from __future__ import annotations

from lazyparams.targets.merge.sparsify import magnitude
from lazyparams.targets.merge.task_vectors import task_vector_method

METHOD = task_vector_method(
    "ties",
    "task vectors trimmed to their largest magnitudes, signs elected, the agreeing parts averaged",
    magnitude,
    consensus=True,
    normalize=True,
)
