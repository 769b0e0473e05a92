"""`della`: DELLA-merging. Each task vector keeps each element with a probability from
`density - epsilon` to `density + epsilon` by its magnitude's rank in its row (MAGPRUNE),
rescaled to its L1 norm; signs are elected as in TIES and the agreeing elements averaged by
their weights. Masks come from the merge's random stream (`--random-seed`); the ranks hold
each task vector whole."""

from __future__ import annotations

from lazyparams.targets.merge.sparsify import check_della, della
from lazyparams.targets.merge.task_vectors import EPSILON, task_vector_method

METHOD = task_vector_method(
    "della",
    "task vectors dropped at random with magnitude-ranked keep probabilities, signs elected",
    della,
    consensus=True,
    normalize=True,
    rescale=True,
    extra=(EPSILON,),
    check_model=check_della,
)
