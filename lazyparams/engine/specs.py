"""SPEC resolved for a model folder: the transform to trace, its metadata and what `plan` shows.

A SPEC is a recipe expression, a `.py` file, a callable or a target object (such as `gguf`).
A file or callable may take the model's config (`transform(params, config)`) and a file may
define `metadata(config)` beside it; a target sees the whole model folder. Imports the frontend,
io, targets and the engine's recipes.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from lazyparams.engine.model_spec import ModelSpec
from lazyparams.engine.recipe_registry import recipe_target
from lazyparams.engine.recipes import gguf_target as gguf_target
from lazyparams.engine.recipes import load_spec, load_spec_file, spec_name
from lazyparams.errors import ConvertError
from lazyparams.frontend.tensor import Tensor
from lazyparams.io import CheckpointSource, TensorInfo
from lazyparams.io.model_config import ModelFolder
from lazyparams.ir import IRModule
from lazyparams.targets.source_steps import SourceStep, source_step

MERGED = "merged"
"""The SPEC that writes a stepped source's tensors as they are (`lazyparams merge` without a
recipe)."""


@runtime_checkable
class Target(Protocol):
    """A SPEC that knows a runtime's layout: a transform of the model folder, its metadata."""

    @property
    def name(self) -> str:
        """How reports name the SPEC."""

    @property
    def output_format(self) -> str:
        """The sink format the target writes."""

    def transform(self, params: Mapping[str, Tensor], folder: ModelFolder) -> dict[str, Any]:
        """The outputs, traced from the checkpoint's tensors."""

    def metadata(
        self, folder: ModelFolder, inputs: Mapping[str, Any], outputs: Sequence[TensorInfo]
    ) -> dict[str, Any]:
        """Metadata for the output file."""

    def describe(
        self, folder: ModelFolder, inputs: Mapping[str, Any], outputs: Sequence[TensorInfo]
    ) -> list[tuple[str, str]]:
        """Rows for `plan`."""


@dataclass(frozen=True, slots=True)
class ResolvedSpec:
    """A SPEC bound to a model folder: `fn` is what gets traced."""

    name: str
    folder: ModelFolder
    fn: Callable[[Mapping[str, Tensor]], Any] | ModelSpec
    metadata_fn: Callable[[Sequence[TensorInfo]], dict[str, Any]] | None = None
    describe_fn: Callable[[Sequence[TensorInfo]], list[tuple[str, str]]] | None = None
    output_format: str | None = None
    side_files: Callable[[Sequence[TensorInfo]], dict[str, bytes]] | None = None
    """The files a folder destination gets beside the tensors (a merge's config.json and
    tokenizer), as a function of the outputs."""

    def metadata(self, outputs: Sequence[TensorInfo]) -> dict[str, Any]:
        """The SPEC's metadata for these outputs (empty when it has none)."""
        return {} if self.metadata_fn is None else dict(self.metadata_fn(outputs))

    def describe(self, outputs: Sequence[TensorInfo]) -> tuple[tuple[str, str], ...]:
        """What `plan` shows of the target (nothing for a plain transform)."""
        return () if self.describe_fn is None else tuple(self.describe_fn(outputs))


def spec_with_options(spec: str, *, gguf_pre: str | None = None) -> Any:
    """SPEC as the CLI gives it, with the options that belong to one recipe (`--gguf-pre`)."""
    if gguf_pre is None:
        return spec
    target = target_of(spec)
    if target is None:
        raise ConvertError(f"--gguf-pre applies to the gguf recipe, not to {spec!r}")
    return gguf_target(getattr(target, "type_name", None), gguf_pre)


def resolve_spec(spec: Any, source: CheckpointSource, src: Any) -> ResolvedSpec:
    """Bind SPEC to the model folder of `src` (a path; else the folder of the source's path).

    When `source` brings a first step of its own (a merge configuration's models, a base
    with LoRA adapters: see `targets.source_steps`), SPEC follows it: it is bound to the stepped
    model (its header and folder) and traced over the stepped tensors."""
    seed, spec = split_seed(spec)
    step = source_step(source, seed)
    if step is not None:
        return _after_step(spec, step)
    if seed is not None:
        raise ConvertError(
            f"{MERGED}:{seed}: a random seed is for a merge; expected a merge configuration as SRC"
        )
    return _resolve(spec, source, model_folder(src, source))


def _resolve(spec: Any, source: CheckpointSource, folder: ModelFolder) -> ResolvedSpec:
    target = target_of(spec)
    if target is not None:
        return _bind_target(target, folder, source)
    if isinstance(spec, IRModule):
        return ResolvedSpec("model module", folder, ModelSpec(spec))
    metadata = None
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and spec.endswith(".py")):
        fn, metadata = load_spec_file(Path(spec))
        if isinstance(fn, IRModule):
            return ResolvedSpec(spec_name(spec), folder, ModelSpec(fn, os.fspath(spec)))
    else:
        fn = load_spec(spec)
    return ResolvedSpec(
        spec_name(spec), folder, _with_config(fn, folder), _metadata_of(spec, metadata, folder)
    )


def split_seed(spec: Any) -> tuple[int | None, Any]:
    """(seed, the rest) of a SPEC that starts with `merged:SEED` (the random seed of a merge,
    which the CLI's --random-seed writes so that workers get it with the SPEC), else (None,
    SPEC)."""
    if not isinstance(spec, str) or not spec.startswith(f"{MERGED}:"):
        return None, spec
    head, _, rest = spec.partition("+")
    text = head.removeprefix(f"{MERGED}:")
    if not text.isdigit():
        raise ConvertError(f"{head!r}: expected {MERGED}:SEED with SEED a non-negative integer")
    return int(text), rest or MERGED


def _after_step(spec: Any, step: SourceStep) -> ResolvedSpec:
    """SPEC bound to the stepped model, its function composed after the step's."""
    folder = step.folder()
    if spec is None or spec == MERGED:
        return ResolvedSpec(step.name, folder, step.transform, side_files=step.side_files)
    inner = _resolve(spec, step.header(), folder)  # type: ignore[arg-type]
    fn = inner.fn
    if isinstance(fn, ModelSpec):
        raise ConvertError(
            f"{inner.name}: a model module cannot follow a {step.name}; expected a recipe, a "
            "target or a transform function"
        )

    def stepped(params: Mapping[str, Tensor]) -> Any:
        return fn(step.transform(params))

    name = f"{step.name} + {inner.name}"
    return replace(inner, name=name, fn=stepped, side_files=step.side_files)


def target_of(spec: Any) -> Target | None:
    """The target SPEC names (a target recipe such as `gguf[:TYPE]`, or a target object), else
    None."""
    if isinstance(spec, Target):
        return spec
    if not isinstance(spec, str) or spec.endswith(".py"):
        return None
    found: Target | None = recipe_target(spec)
    return found


def _bind_target(target: Target, folder: ModelFolder, source: CheckpointSource) -> ResolvedSpec:
    inputs = {name: source.info(name) for name in source.names()}
    return ResolvedSpec(
        target.name,
        folder,
        lambda params: target.transform(params, folder),
        lambda outputs: target.metadata(folder, inputs, outputs),
        lambda outputs: target.describe(folder, inputs, outputs),
        target.output_format,
    )


def model_folder(src: Any, source: CheckpointSource) -> ModelFolder:
    """The folder a checkpoint lives in, with its config.json when it has one."""
    path = src if isinstance(src, str | os.PathLike) else getattr(source, "path", None)
    if path is None:
        return ModelFolder(Path.cwd(), None)
    target = Path(path)
    if target.name.endswith(".index.json"):
        target = target.parent
    return ModelFolder.at(target)


def _with_config(fn: Callable[..., Any], folder: ModelFolder) -> Callable[..., Any]:
    """`fn` as a function of params alone: a `transform(params, config)` gets the config."""
    if _arity(fn) < 2:
        return fn
    config = dict(folder.config or {})

    def with_config(params: Mapping[str, Tensor]) -> Any:
        return fn(params, config)

    with_config.__name__ = getattr(fn, "__name__", "transform")
    return with_config


def _arity(fn: Callable[..., Any]) -> int:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in positional and p.default is p.empty)


def _metadata_of(
    spec: Any, fn: Callable[..., Any] | None, folder: ModelFolder
) -> Callable[[Sequence[TensorInfo]], dict[str, Any]] | None:
    """A spec file's `metadata(config)` as a function of the outputs (None without one)."""
    if fn is None:
        return None
    config = dict(folder.config or {})

    def metadata(outputs: Sequence[TensorInfo]) -> dict[str, Any]:
        result = fn(config)
        if not isinstance(result, Mapping):
            raise ConvertError(
                f"{spec}: metadata(config) must return a mapping of key -> value, "
                f"got {type(result).__name__}"
            )
        return dict(result)

    return metadata
