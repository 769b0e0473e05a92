"""`della_linear`: DELLA's MAGPRUNE without sign election: each task vector keeps each element
with a probability from `density - epsilon` to `density + epsilon` by its magnitude's rank in
its row, rescaled to its L1 norm, and the vectors are added by weight. Masks come from the
merge's random stream (`--random-seed`); the ranks hold each task vector whole."""

from __future__ import annotations

from lazyparams.targets.merge.sparsify import check_della, della
from lazyparams.targets.merge.task_vectors import EPSILON, task_vector_method

METHOD = task_vector_method(
    "della_linear",
    "task vectors dropped at random with magnitude-ranked keep probabilities, added by weight",
    della,
    rescale=True,
    extra=(EPSILON,),
    check_model=check_della,
)
