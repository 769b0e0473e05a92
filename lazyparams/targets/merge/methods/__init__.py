"""The merge methods, one module each, each declaring `METHOD` (see `targets.merge`).

A new method is a new module here: the registry finds it by listing this package. Shared steps
(weighted sums, task vectors) are in `targets.merge.steps`. Imports the frontend and the
registry's types.
"""
