"""`dare_ties`: DARE with TIES' sign election. Each task vector keeps each element with
probability `density`, rescaled to its L1 norm (`rescale`, the default); signs are elected as
in TIES. Masks come from the merge's random stream (`--random-seed`)."""

from __future__ import annotations

from lazyparams.targets.merge.sparsify import check_random, random
from lazyparams.targets.merge.task_vectors import task_vector_method

METHOD = task_vector_method(
    "dare_ties",
    "task vectors with random elements dropped and the rest rescaled, signs elected",
    random,
    consensus=True,
    rescale=True,
    check_model=check_random,
)
