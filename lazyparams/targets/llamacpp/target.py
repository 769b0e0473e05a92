"""The `gguf[:TYPE]` target: a Hugging Face model folder -> the GGUF file llama.cpp loads.

`GGUFTarget.transform` is the traced transform (names, rotary permutation, stacked experts,
per-tensor types); `metadata` the KV pairs (`general.*`, hyperparameters, tokenizer) in the
order llama.cpp's converter writes them; `describe` what `plan` shows. Everything is decided
from config.json and the checkpoint's header. Imports the frontend, io and this package; gguf
(its value types) and the tokenizer's libraries only once `metadata` is asked for: by a
conversion, and by a plan, which checks what a conversion would refuse.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.errors import ConvertError
from lazyparams.frontend import ops
from lazyparams.frontend.tensor import Tensor
from lazyparams.io.model_config import ModelFolder
from lazyparams.targets.llamacpp.architectures import architecture_of
from lazyparams.targets.llamacpp.from_gguf import (
    Retyped,
    as_quantized,
    gguf_source,
    in_load_order,
)
from lazyparams.targets.llamacpp.hparams import HIDDEN_KEYS, first_present, text_model_config
from lazyparams.targets.llamacpp.mixtures import tensor_types
from lazyparams.targets.llamacpp.outtype import OutputType, converter_dtype, output_type
from lazyparams.targets.llamacpp.rope_freqs import ROPE_FREQS, llama3_rope_factors
from lazyparams.targets.llamacpp.tables import Architecture
from lazyparams.targets.llamacpp.tensors import (
    ModelShape,
    Planned,
    build_tensor,
    converter_name,
    model_shape,
    plan_tensors,
)

if TYPE_CHECKING:
    from gguf import GGUFValue

DEFAULT_TYPE = "auto"


@dataclass(frozen=True, slots=True)
class Model:
    """A model folder resolved against the tables: architecture, config facts, output type."""

    folder: ModelFolder
    hf_name: str
    arch: Architecture
    shape: ModelShape
    out: OutputType


@dataclass(frozen=True, slots=True)
class GGUFTarget:
    """`gguf:TYPE`, with `pre` naming the BPE pre-tokenizer where the folder's is unknown."""

    type_name: str = DEFAULT_TYPE
    pre: str | None = None
    output_format = "gguf"

    @property
    def name(self) -> str:
        """How reports name the recipe."""
        return f"gguf:{self.type_name}"

    def resolve(self, folder: ModelFolder, inputs: Mapping[str, Any]) -> Model:
        """The model behind `folder`, with `inputs` (name -> info with shape and dtype)."""
        config, path = _text_config(folder)
        hf_name, arch = architecture_of(config, path)
        shape = model_shape(arch, config, path)
        matrices = [info.dtype for info in inputs.values() if len(info.shape) >= 2]
        return Model(folder, hf_name, arch, shape, output_type(self.type_name, matrices))

    def retyped(self, folder: ModelFolder, inputs: Mapping[str, Any]) -> Retyped | None:
        """The GGUF file being re-typed, when the source is one (and not a model folder)."""
        path = gguf_source(folder)
        return None if path is None else Retyped.read(path, self.type_name, inputs)

    def transform(self, params: Mapping[str, Tensor], folder: ModelFolder) -> dict[str, Any]:
        """llama.cpp's tensors, transformed and typed, from the checkpoint's tensors."""
        retyped = self.retyped(folder, params)
        if retyped is not None:
            return retyped.transform(params)
        model = self.resolve(folder, params)
        planned = plan_tensors(model.arch, list(params), model.shape)
        _check_embeddings(model, params)
        built = {p.name: build_tensor(p, params, model.shape) for p in planned}
        if model.out.dtype is None:  # a llama-quantize type
            built = {name: as_llama_quantize_writes(t) for name, t in built.items()}
        dtypes = output_dtypes(model, planned, built)
        out: dict[str, Any] = dict(_extra_tensors(model))
        for name, tensor in built.items():
            out[name] = tensor if tensor.dtype == dtypes[name] else tensor.astype(dtypes[name])
        # a llama-quantize type writes the file llama-quantize would, tensors in its order
        return out if model.out.dtype is not None else in_load_order(out)

    def metadata(
        self, folder: ModelFolder, inputs: Mapping[str, Any], outputs: Sequence[Any]
    ) -> dict[str, GGUFValue]:
        """Every KV pair llama.cpp's converter writes for this model, in its order."""
        from lazyparams.targets.llamacpp.metadata import (
            early_hparams,
            general_metadata,
            model_hparams,
            parameter_counts,
        )
        from lazyparams.targets.llamacpp.tokenizer import tokenizer_metadata

        retyped = self.retyped(folder, inputs)
        if retyped is not None:
            return retyped.metadata(outputs)
        model = self.resolve(folder, inputs)
        config, path = _text_config(folder)
        shapes = [(info.name, tuple(info.shape)) for info in outputs]
        counts = parameter_counts(shapes)
        early = early_hparams(model.arch, config, path)
        meta = general_metadata(folder.path, model.arch.gguf_arch, counts, early)
        meta.update(model_hparams(model.arch, config, path, model.out.file_type))
        read = _as_converter_reads(model.arch, config)
        meta.update(tokenizer_metadata(folder.path, read, model.arch.gguf_arch, pre=self.pre))
        return meta if model.out.dtype is not None else as_quantized(meta, model.out.file_type)

    def describe(
        self, folder: ModelFolder, inputs: Mapping[str, Any], outputs: Sequence[Any]
    ) -> list[tuple[str, str]]:
        """Rows for `plan`: the architecture, the type, and each tensor group's types."""
        retyped = self.retyped(folder, inputs)
        if retyped is not None:
            rows = retyped.rows()
        else:
            model = self.resolve(folder, inputs)
            rows = [
                ("architecture", f"{model.hf_name} -> {model.arch.gguf_arch}"),
                ("output type", f"{model.out.name} (general.file_type {model.out.file_type})"),
            ]
        groups: dict[str, Counter[str]] = {}
        for info in outputs:
            groups.setdefault(tensor_group(info.name), Counter())[info.dtype] += 1
        for group, counts in groups.items():
            rows.append((group, ", ".join(f"{d} x{n}" for d, n in counts.items())))
        return rows


def tensor_group(name: str) -> str:
    """A GGUF tensor's kind, layers folded: `blk.3.attn_q.weight` -> `blk.*.attn_q.weight`."""
    parts = name.split(".")
    if len(parts) > 2 and parts[0] == "blk" and parts[1].isdigit():
        parts[1] = "*"
    return ".".join(parts)


def output_dtypes(
    model: Model, planned: Sequence[Planned], built: Mapping[str, Tensor]
) -> dict[str, str]:
    """Each output's dtype: the converter's rule, then llama-quantize's for a mixture."""
    base = model.out.dtype or "bfloat16"
    chosen = {
        p.name: converter_dtype(p.name, built[p.name].shape, base, _keep_f32(p)) for p in planned
    }
    if model.out.dtype is not None:
        return chosen
    listed = [(name, built[name].shape, dtype) for name, dtype in chosen.items()]
    shape = model.shape
    types: dict[str, str] = tensor_types(
        model.out.name,
        listed,
        n_head=shape.heads,
        n_head_kv=shape.kv_heads,
        n_expert=shape.experts,
        n_layer=shape.layers + shape.extra_layers,  # block_count, kept layers included
        arch=model.arch.gguf_arch,
    )
    return types


def as_llama_quantize_writes(tensor: Tensor) -> Tensor:
    """`tensor` with the dims llama-quantize writes: it keeps `ggml_n_dims` of each tensor,
    dropping trailing GGUF dims of 1 (leading numpy axes of 1: Qwen2-MoE's [1, hidden]
    shared-expert gate becomes [hidden]), which the converter writes as they are."""
    shape = tuple(tensor.shape)
    lead = 0
    while lead < len(shape) - 1 and shape[lead] == 1:
        lead += 1
    return tensor if lead == 0 else ops.reshape(tensor, shape[lead:])


def _keep_f32(planned: Planned) -> bool:
    return bool(getattr(planned.rule, "keep_f32", False))


def _text_config(folder: ModelFolder) -> tuple[Mapping[str, Any], Path]:
    """config.json as the converter reads it for the text model, and its path."""
    config, path = folder.require_config("the gguf recipe")
    return text_model_config(config), path


def _as_converter_reads(arch: Architecture, config: Mapping[str, Any]) -> Mapping[str, Any]:
    """`config` after the family's config hook (transformers' defaults, which the converter
    sees: a vocabulary size config.json leaves out)."""
    return arch.config_hook(config) if arch.config_hook is not None else config


def _check_embeddings(model: Model, params: Mapping[str, Tensor]) -> None:
    """The embedding must be vocab_size x hidden_size, as llama.cpp will load it."""
    config, path = _text_config(model.folder)
    config = _as_converter_reads(model.arch, config)
    rule = next((r.hf for r in model.arch.tensors if r.gguf == "token_embd.weight"), None)
    embed = next((name for name in params if converter_name(name) == rule), None)
    if embed is None:
        return
    rows_cols = tuple(params[embed].shape)
    expected = (config.get("vocab_size"), first_present(config, HIDDEN_KEYS))
    if rows_cols != expected:
        raise ConvertError(
            f"tensor {embed!r} is {rows_cols[0]} x {rows_cols[1]}, but {path} says "
            f"vocab_size={expected[0]} and hidden_size={expected[1]}"
        )


def _extra_tensors(model: Model) -> dict[str, Any]:
    """Tensors llama.cpp generates from the config: llama 3's rope frequency factors (llama,
    and the families whose table asks for them), then the family's `extra_tensors`."""
    config, path = _text_config(model.folder)
    wanted = model.arch.llama3_rope_freqs or model.arch.gguf_arch == "llama"
    factors = llama3_rope_factors(config, path) if wanted else None
    out: dict[str, Any] = {} if factors is None else {ROPE_FREQS: factors}
    if model.arch.extra_tensors is not None:
        out.update(model.arch.extra_tensors(config, path))
    return out
