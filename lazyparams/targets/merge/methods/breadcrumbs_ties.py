"""`breadcrumbs_ties`: Model Breadcrumbs with TIES' sign election: each task vector loses its
`gamma` share of largest magnitudes and its smallest, keeping the `density` share; signs are
elected as in TIES. The selection holds each task vector whole."""

from __future__ import annotations

from lazyparams.targets.merge.sparsify import outliers
from lazyparams.targets.merge.task_vectors import GAMMA, task_vector_method

METHOD = task_vector_method(
    "breadcrumbs_ties",
    "task vectors without their largest outliers and smallest magnitudes, signs elected",
    outliers,
    consensus=True,
    extra=(GAMMA,),
)
