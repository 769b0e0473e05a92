"""LoRA adapters from Python and the command line: `merge_lora` (a base model and PEFT adapters
into one model) and `extract_lora` (a PEFT adapter from a base and a fine-tuned model).

Both are conversions: the sources open as one source set, the engine plans, budgets, resumes
and runs them like any other. They live here, above the engine, because they join io's
openers to `convert`; `lazyparams.merge_lora` and `lazyparams.extract_lora` name them.
Imports the io, targets and engine layers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lazyparams.errors import ConvertError

Paths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

ADAPTER_WEIGHTS = "adapter_model.safetensors"


def merge_lora(
    base: str | os.PathLike[str],
    adapters: Paths,
    dst: Any,
    weights: Sequence[float] | None = None,
    spec: Any = "merged",
    **options: Any,
) -> Any:
    """Merge PEFT LoRA `adapters` (folders, applied in order, adapter k scaled by
    `weights[k]`) into the model at `base` and convert the result with `spec` into `dst`.

    The default SPEC writes the merged tensors as they are (a folder `dst` becomes a Hugging
    Face folder with the base's config.json and tokenizer); any recipe (`gguf:Q8_0`) runs in
    the same pass. `options` are `convert`'s (budget, workers, resume, ...), not a cluster:
    the source set is open in this process. Returns convert's report.
    """
    from lazyparams.engine.convert import convert
    from lazyparams.io.lora_adapter import open_lora_sources

    _one_machine(options)
    with open_lora_sources(base, _listed(adapters), weights) as sources:
        return convert(spec, sources, dst, **options)


def extract_lora(
    base: str | os.PathLike[str],
    finetuned: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    rank: int,
    *,
    embed_lora: bool = False,
    save_modules: Sequence[str] = (),
    **options: Any,
) -> Any:
    """Write into the folder `dst` the PEFT adapter (adapter_model.safetensors and
    adapter_config.json) of rank `rank` that leads from `base` to `finetuned`, as
    mergekit-extract-lora makes it (see `targets.lora.extract`). `embed_lora` decomposes the
    embeddings and the output head too; `save_modules` are stored whole. `options` are
    `convert`'s; a run stopped part-way resumes with `resume=True`. Returns convert's report.
    """
    from lazyparams.engine.convert import convert
    from lazyparams.io.lora_adapter import open_extraction_sources
    from lazyparams.targets.lora.extract import plan_extraction

    _one_machine(options)
    folder = Path(dst)
    with open_extraction_sources(base, finetuned) as sources:
        plan = plan_extraction(
            sources, rank, embed_lora=embed_lora, save_modules=save_modules, base_name=str(base)
        )
        made = _adapter_folder(folder, bool(options.get("resume")))

        def lora_extraction(params: Any) -> Any:  # how reports name the run
            return plan.transform(params)

        try:
            report = convert(lora_extraction, sources, folder / ADAPTER_WEIGHTS, **options)
        except BaseException:
            if made and not any(folder.iterdir()):
                folder.rmdir()
            raise
    _write_whole(folder / "adapter_config.json", json.dumps(plan.config, indent=2) + "\n")
    return report


def _listed(adapters: Paths) -> list[str | os.PathLike[str]]:
    if isinstance(adapters, str | os.PathLike):
        return [adapters]
    return list(adapters)


def _one_machine(options: dict[str, Any]) -> None:
    for key in ("cluster", "part_size"):
        if options.get(key) is not None:
            raise ConvertError(
                f"{key}: a LoRA merge or extraction runs on one machine (its sources are opened "
                "here); expected no cluster"
            )


def _adapter_folder(folder: Path, resume: bool) -> bool:
    """Make the destination folder; True when this call made it. An existing one is refused,
    unless resuming (the interrupted run's partial output is inside)."""
    if folder.suffix:
        raise ConvertError(f"{folder}: expected a folder for the adapter, not a file name")
    if folder.exists() and not resume:
        raise ConvertError(
            f"{folder}: already exists; expected a destination that does not exist (remove it "
            "or choose another)"
        )
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    return made


def _write_whole(path: Path, text: str) -> None:
    """`text` into `path`, through a temporary name, so that no half-written file is seen."""
    temporary = path.with_name(f".{path.name}.partial")
    temporary.write_text(text)
    os.replace(temporary, path)
