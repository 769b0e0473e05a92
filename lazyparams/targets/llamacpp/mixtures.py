"""llama.cpp's quantization mixtures: which GGML type each tensor of a GGUF file gets per file type.

The rules are those of `llama-quantize` run without an importance matrix and without per-tensor
overrides: which tensors stay as they are, which get more bits by layer, and the fallback types
for rows that do not fill a block. Plain data and functions; imports nothing of the package but
its errors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lazyparams.errors import ConvertError

QUANTIZATION_VERSION = 2
"""The `general.quantization_version` llama.cpp writes into every file it quantizes."""

FILE_TYPES: dict[str, int] = {
    "F32": 0,
    "F16": 1,
    "Q4_0": 2,
    "Q4_1": 3,
    "Q8_0": 7,
    "Q5_0": 8,
    "Q5_1": 9,
    "Q2_K": 10,
    "Q3_K_S": 11,
    "Q3_K_M": 12,
    "Q3_K": 12,
    "Q3_K_L": 13,
    "Q4_K_S": 14,
    "Q4_K_M": 15,
    "Q4_K": 15,
    "Q5_K_S": 16,
    "Q5_K_M": 17,
    "Q5_K": 17,
    "Q6_K": 18,
    "BF16": 32,
}
"""File type names as `llama-quantize` takes them (aliases included) -> `general.file_type`."""

_ALIASES = {"Q3_K": "Q3_K_M", "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M"}

_DEFAULT_TYPES = {
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "Q4_0": "q4_0",
    "Q4_1": "q4_1",
    "Q5_0": "q5_0",
    "Q5_1": "q5_1",
    "Q8_0": "q8_0",
    "Q2_K": "q2_k",
    "Q3_K_S": "q3_k",
    "Q3_K_M": "q3_k",
    "Q3_K_L": "q3_k",
    "Q4_K_S": "q4_k",
    "Q4_K_M": "q4_k",
    "Q5_K_S": "q5_k",
    "Q5_K_M": "q5_k",
    "Q6_K": "q6_k",
}

_NEEDS_IMATRIX = {"Q2_K_S", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS"}

BLOCK_SIZES: dict[str, int] = {
    "q8_0": 32,
    "q4_0": 32,
    "q4_1": 32,
    "q5_0": 32,
    "q5_1": 32,
    "q2_k": 256,
    "q3_k": 256,
    "q4_k": 256,
    "q5_k": 256,
    "q6_k": 256,
}
"""Elements per block of each quantized type: a row's length must be a multiple of it."""

_FALLBACKS = {"q2_k": "q4_0", "q3_k": "q4_0", "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}
_FLOAT_TYPES = ("float32", "float16", "bfloat16")
_INPUT_TYPES = frozenset((*_FLOAT_TYPES, *BLOCK_SIZES))

_RWKV_SMALL: tuple[str, ...] = ("first", "w0", "w1", "w2", "v0", "v1", "v2", "a0", "a1", "a2")
_RWKV_SMALL += ("g1", "g2", "decay_w1", "decay_w2", "lerp_fused")

# Tensors whose names contain one of these are copied as they are (small, or not matrices).
_KEPT_SUBSTRINGS = (
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    *(f"time_mix_{part}.weight" for part in _RWKV_SMALL),
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
)
_KEPT_NAMES = ("position_embd.weight", "token_types.weight")
_GLM5_NEXT_KEPT = (
    "hc_",
    "indexer.attn_q_b",
    "indexer.attn_k",
    "indexer.proj",
    "indexer_compressor_gate",
    "indexer_compressor_ape",
    "ssm_f_a.weight",
    "ssm_f_b.weight",
    "ssm_g_a.weight",
    "ssm_g_b.weight",
    "ssm_beta.weight",
    "attn_kv_a_mqa.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
)
_GLM5_NEXT_Q8 = ("attn_q_a", "attn_q_b", "nextn.eh_proj")

# Architectures whose model type is "70B" at this many layers (llama also needs GQA).
_LAYERS_OF_70B = {"llama": 80, "qwen2": 80, "deci": 80, "olmo": 80, "jais2": 68}

# Substring -> category, tested in this order (so "ffn_gate_up" counts as ffn_up).
_CATEGORIES = (
    ("attn_qkv.weight", "attn_v"),
    ("attn_kv_b.weight", "attn_v"),
    ("attn_v.weight", "attn_v"),
    ("attn_k.weight", "attn_k"),
    ("attn_q.weight", "attn_q"),
    ("attn_output.weight", "attn_output"),
    ("ffn_up", "ffn_up"),
    ("ffn_gate", "ffn_gate"),
    ("ffn_down", "ffn_down"),
)
_LAYER_PREFIX = re.compile(r"blk\.([+-]?\d+)")


def tensor_types(
    file_type: str,
    tensors: Sequence[tuple[str, tuple[int, ...], str]],
    *,
    n_head: int,
    n_head_kv: int,
    n_expert: int = 0,
    n_layer: int,
    arch: str = "llama",
) -> dict[str, str]:
    """Each tensor's output dtype for `file_type`, as `llama-quantize` chooses it.

    `tensors` lists (GGUF name, numpy-order shape, dtype before quantization) in file order;
    `n_head`, `n_head_kv`, `n_expert` and `n_layer` are the model's `attention.head_count`,
    `attention.head_count_kv`, `expert_count` and `block_count`. `arch` is the file's
    `general.architecture`: "falcon" has its own rules, "glm5-next" keeps more tensors, and the
    layer count that makes a "70B" model (which gives attn_v more bits) depends on it. Tensors
    llama-quantize copies come back with their own dtype. The result is in file order.
    Raises ConvertError for an unknown file type, one that needs an importance matrix (Q2_K_S,
    the IQ types), or a malformed entry.
    """
    canonical = _canonical_file_type(file_type)
    _check_model(n_head=n_head, n_head_kv=n_head_kv, n_expert=n_expert, n_layer=n_layer)
    names = _checked_names(tensors)
    mixture = _Mixture(
        file_type=canonical,
        default=_DEFAULT_TYPES[canonical],
        arch=arch,
        n_gqa=n_head // n_head_kv if n_head_kv else 0,
        n_expert=n_expert,
        n_layer=n_layer,
        is_70b=_is_70b(arch, n_layer, n_head, n_head_kv, n_expert),
        tied=not any(name == "output.weight" for name in names),
        n_attention_wv=sum(_category(name) == "attn_v" for name in names),
    )
    chosen = {}
    for name, shape, dtype in sorted(tensors, key=lambda tensor: load_order(tensor[0])):
        chosen[name] = mixture.choose(name, tuple(shape), dtype)
    return {name: chosen[name] for name in names}


def _canonical_file_type(file_type: str) -> str:
    """The file type's own name (aliases resolved), or a ConvertError listing the known ones."""
    if file_type in _NEEDS_IMATRIX:
        raise ConvertError(
            f"llama.cpp file type {file_type!r} needs an importance matrix, which is not "
            f"supported; choose one of {', '.join(FILE_TYPES)}"
        )
    if file_type not in FILE_TYPES:
        raise ConvertError(
            f"unknown llama.cpp file type {file_type!r}; known: {', '.join(FILE_TYPES)}"
        )
    return _ALIASES.get(file_type, file_type)


def _check_model(*, n_head: int, n_head_kv: int, n_expert: int, n_layer: int) -> None:
    """Refuse hyperparameters llama.cpp would not load (negative counts, no layers)."""
    counts = {"n_head": n_head, "n_head_kv": n_head_kv, "n_expert": n_expert, "n_layer": n_layer}
    for key, value in counts.items():
        if not isinstance(value, int) or value < 0:
            raise ConvertError(f"{key} must be a non-negative integer, got {value!r}")
    if n_layer == 0:
        raise ConvertError("n_layer must be at least 1 (the model's block_count)")


def _checked_names(tensors: Sequence[tuple[str, tuple[int, ...], str]]) -> list[str]:
    """The tensor names in order, after checking each entry's name, shape and dtype."""
    names: list[str] = []
    seen: set[str] = set()
    for name, shape, dtype in tensors:
        if name in seen:
            raise ConvertError(f"tensor {name!r} is listed twice")
        if not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ConvertError(f"tensor {name!r} has shape {shape!r}; expected non-negative ints")
        if dtype not in _INPUT_TYPES:
            raise ConvertError(
                f"tensor {name!r} has dtype {dtype!r}; expected one of {sorted(_INPUT_TYPES)}"
            )
        seen.add(name)
        names.append(name)
    return names


def _is_70b(arch: str, n_layer: int, n_head: int, n_head_kv: int, n_expert: int) -> bool:
    """Whether llama.cpp classifies the model as "70B" (its attn_v then gets Q5_K at least)."""
    if _LAYERS_OF_70B.get(arch) != n_layer:
        return False
    return arch != "llama" or (n_expert != 8 and n_head != n_head_kv)


def load_order(name: str) -> tuple[int, str]:
    """llama.cpp's tensor order: tensors outside blocks first, then by block number, then name."""
    match = _LAYER_PREFIX.match(name)
    return (int(match.group(1)) if match else -1, name)


def _category(name: str) -> str:
    """The broad role of a tensor, from its name, that the mixture rules key on."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for substring, category in _CATEGORIES:
        if substring in name:
            return category
    return "other"


def _n_dims(shape: tuple[int, ...]) -> int:
    """ggml's dimension count: trailing (numpy: leading) sizes of 1 do not count, at least 1."""
    dims = list(shape)
    while len(dims) > 1 and dims[0] == 1:
        dims.pop(0)
    return max(len(dims), 1)


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    """The first and last eighth of the layers, and every third one between, get more bits."""
    eighth = n_layers // 8
    return i_layer < eighth or i_layer >= 7 * n_layers // 8 or (i_layer - eighth) % 3 == 2


def _keeps_type(name: str, shape: tuple[int, ...], arch: str) -> bool:
    """Whether llama-quantize copies the tensor unchanged: not a 2-D+ weight, a norm, a router..."""
    if _n_dims(shape) < 2 or not name.endswith("weight") or name in _KEPT_NAMES:
        return True
    if any(substring in name for substring in _KEPT_SUBSTRINGS):
        return True
    return arch == "glm5-next" and any(substring in name for substring in _GLM5_NEXT_KEPT)


def _fallback(ncols: int, chosen: str) -> str:
    """A type whose block divides the row length: the per-type fallback, else float16."""
    block = BLOCK_SIZES[chosen]
    if ncols % block == 0:
        return chosen
    if block > 32:
        chosen = _FALLBACKS[chosen]
    return chosen if ncols % BLOCK_SIZES[chosen] == 0 else "float16"


@dataclass
class _Mixture:
    """The state `llama-quantize` keeps while it walks the tensors: the model and two counters."""

    file_type: str
    default: str
    arch: str
    n_gqa: int
    n_expert: int
    n_layer: int
    is_70b: bool
    tied: bool
    n_attention_wv: int
    i_attention_wv: int = 0
    i_ffn_down: int = 0

    def choose(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        """The output dtype of one tensor; tensors must come in llama.cpp's load order."""
        if _keeps_type(name, shape, self.arch):
            return dtype
        if self.default in _FLOAT_TYPES:
            return self.default
        ncols = shape[-1]
        return _fallback(ncols, self._mixture_type(name, ncols))

    def _mixture_type(self, name: str, ncols: int) -> str:
        """The type the mixture asks for, before the row-length fallback."""
        category = _category(name)
        if self.arch == "glm5-next" and any(part in name for part in _GLM5_NEXT_Q8):
            return "q8_0"
        if category == "output" or (self.tied and category == "token_embd"):
            return self._output_type(ncols)
        if category == "attn_v":
            return self._attn_v_type()
        if category == "attn_k" and self.n_expert == 8:
            return "q8_0"
        if category == "attn_output":
            return self._attn_output_type()
        if category == "ffn_down":
            return self._ffn_down_type(name)
        if category in ("ffn_gate", "ffn_up") and self.n_expert > 1:
            self._layer_of(name)  # an expert tensor outside the blocks is refused, as there
        return self.default

    def _output_type(self, ncols: int) -> str:
        """The output matrix (and a tied token embedding): Q6_K unless Q8_0 or rows misfit."""
        if self.arch == "falcon" or ncols % BLOCK_SIZES[self.default] != 0:
            return "q8_0"
        return self.default if self.default == "q8_0" else "q6_k"

    def _attn_v_type(self) -> str:
        """attn_v / attn_qkv / attn_kv_b: more bits early, in GQA models and by layer pattern."""
        i, ftype, chosen = self.i_attention_wv, self.file_type, self.default
        self.i_attention_wv += 1
        if ftype == "Q2_K":
            chosen = "q4_k" if self.n_gqa >= 4 else "q3_k"
        elif ftype == "Q3_K_M":
            chosen = "q5_k" if i < 2 else "q4_k"
        elif ftype == "Q3_K_L":
            chosen = "q5_k"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i, self.n_attention_wv):
            chosen = "q6_k"
        elif ftype == "Q4_K_S" and i < 4:
            chosen = "q5_k"
        if self.is_70b and chosen in ("q3_k", "q4_k"):
            chosen = "q5_k"
        return "q8_0" if self.n_expert == 8 else chosen

    def _attn_output_type(self) -> str:
        """attn_output: a step up for the low K mixtures (and for 8-expert models)."""
        ftype = self.file_type
        if self.arch == "falcon":
            return "q4_k" if ftype == "Q3_K_L" else self.default
        if self.n_expert == 8:
            raised = ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M")
            return "q5_k" if ftype in raised else self.default
        return {"Q2_K": "q3_k", "Q3_K_M": "q4_k", "Q3_K_L": "q5_k"}.get(ftype, self.default)

    def _ffn_down_type(self, name: str) -> str:
        """ffn_down: more bits in the first layers and by the layer pattern, per mixture."""
        i_layer = self._layer_of(name) if self.n_expert > 1 else self.i_ffn_down
        n_layer, ftype, falcon = self.n_layer, self.file_type, self.arch == "falcon"
        self.i_ffn_down += 1
        more_bits = _use_more_bits(i_layer, n_layer)
        if ftype == "Q2_K":
            return "q3_k"
        if ftype == "Q3_K_M":
            if i_layer < n_layer // 16:
                return "q5_k"
            return "q4_k" if not falcon or more_bits else "q3_k"
        if ftype == "Q3_K_L":
            return "q4_k" if falcon else "q5_k"
        if ftype == "Q4_K_M" and falcon:
            return "q6_k" if i_layer < n_layer // 16 else "q5_k" if more_bits else "q4_k"
        if ftype in ("Q4_K_M", "Q5_K_M") and more_bits:
            return "q6_k"
        if ftype == "Q4_K_S" and not falcon and i_layer < n_layer // 8:
            return "q5_k"
        return self.default

    def _layer_of(self, name: str) -> int:
        """The block number in an expert model's tensor name (experts are not in layer order)."""
        match = _LAYER_PREFIX.match(name)
        if match is None:
            raise ConvertError(f"tensor {name!r}: cannot tell its layer (expected 'blk.N.')")
        i_layer = int(match.group(1))
        if not 0 <= i_layer < self.n_layer:
            raise ConvertError(
                f"tensor {name!r}: layer {i_layer} is outside [0, {self.n_layer}) (n_layer)"
            )
        return i_layer
