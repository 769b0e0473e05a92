"""Sources that bring their own first step: a merge configuration's models, a base model with
LoRA adapters. The engine traces `SPEC(step(params))` over such a source.

A `SourceStep` maps the source's tensors to a model's (`transform`), describes that model
without data (`header`: names, shapes, dtypes), gives its folder (config.json, tokenizer) and
the files a Hugging Face folder of it holds beside the weights. `source_step` finds the step a
source carries: each kind registers a finder in `STEP_FINDERS`. Imports the io layer and the
targets that define steps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from lazyparams.frontend.tensor import Tensor
from lazyparams.io.base import TensorInfo
from lazyparams.io.model_config import ModelFolder


class StepHeader(Protocol):
    """The stepped model's tensors, without data."""

    def names(self) -> list[str]: ...
    def info(self, name: str) -> TensorInfo: ...


class SourceStep(Protocol):
    """The first step a source brings (see the module docstring)."""

    @property
    def name(self) -> str:
        """How reports name the step ("linear merge", "LoRA merge")."""

    def transform(self, params: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The stepped model's tensors, traced from the source's."""

    def header(self) -> StepHeader:
        """The stepped model's tensors as a header."""

    def folder(self) -> ModelFolder:
        """The stepped model's folder: config.json (updated) and tokenizer files."""

    def side_files(self, outputs: Sequence[TensorInfo]) -> dict[str, bytes]:
        """The files a folder destination of `outputs` holds beside the weights."""


StepFinder = Callable[[Any, "int | None"], "SourceStep | None"]
"""`finder(source, seed)`: the step `source` brings (`seed`: a merge's random seed, None when
not given), else None."""
STEP_FINDERS: list[StepFinder] = []
"""Each kind of stepped source's finder, asked in order."""


def register_step_finder(finder: StepFinder) -> StepFinder:
    """Add a finder of stepped sources (a decorator)."""
    STEP_FINDERS.append(finder)
    return finder


def source_step(source: Any, seed: int | None = None) -> SourceStep | None:
    """The first step `source` brings, or None for a plain checkpoint; `seed` seeds a merge's
    random masks."""
    import lazyparams.targets.lora.target  # registers its finder
    import lazyparams.targets.merge.target  # noqa: F401 - registers its finder

    for finder in STEP_FINDERS:
        found = finder(source, seed)
        if found is not None:
            return found
    return None
