"""`breadcrumbs`: Model Breadcrumbs. Each task vector loses its `gamma` share of largest
magnitudes (outliers) and its smallest, keeping the `density` share; the vectors are added by
weight. The selection holds each task vector whole."""

from __future__ import annotations

from lazyparams.targets.merge.sparsify import outliers
from lazyparams.targets.merge.task_vectors import GAMMA, task_vector_method

METHOD = task_vector_method(
    "breadcrumbs",
    "task vectors without their largest outliers and smallest magnitudes, added by weight",
    outliers,
    extra=(GAMMA,),
)
