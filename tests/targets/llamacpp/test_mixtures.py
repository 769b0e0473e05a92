"""The per-tensor types of llama.cpp's file types, as tables of what llama-quantize writes."""

from __future__ import annotations

import random

import pytest

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.mixtures import FILE_TYPES, QUANTIZATION_VERSION, tensor_types

Tensors = list[tuple[str, tuple[int, ...], str]]

# use_more_bits(i, 32): the first and last four layers and every third one from layer 6.
MORE_BITS_32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}
MORE_BITS_4 = {2, 3}
LAYER_TENSORS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def llama_like(
    n_layer: int,
    *,
    hidden: int = 512,
    ffn: int = 1024,
    kv: int = 512,
    vocab: int = 1000,
    tied: bool = False,
    dtype: str = "float16",
) -> Tensors:
    """A llama-shaped tensor list in converter order (norms in float32)."""
    tensors: Tensors = [("token_embd.weight", (vocab, hidden), dtype)]
    for i in range(n_layer):
        shapes = {
            "attn_norm": (hidden,),
            "attn_q": (hidden, hidden),
            "attn_k": (kv, hidden),
            "attn_v": (kv, hidden),
            "attn_output": (hidden, hidden),
            "ffn_norm": (hidden,),
            "ffn_gate": (ffn, hidden),
            "ffn_up": (ffn, hidden),
            "ffn_down": (hidden, ffn),
        }
        for part, shape in shapes.items():
            tensors.append(
                (f"blk.{i}.{part}.weight", shape, "float32" if len(shape) == 1 else dtype)
            )
    tensors.append(("output_norm.weight", (hidden,), "float32"))
    if not tied:
        tensors.append(("output.weight", (vocab, hidden), dtype))
    return tensors


def moe_like(n_layer: int, n_expert: int = 8, hidden: int = 512, ffn: int = 256) -> Tensors:
    """A Mixtral-shaped list: stacked experts, a float32 router, shared attention."""
    tensors: Tensors = [("token_embd.weight", (1000, hidden), "float16")]
    for i in range(n_layer):
        tensors += [
            (f"blk.{i}.attn_norm.weight", (hidden,), "float32"),
            (f"blk.{i}.attn_q.weight", (hidden, hidden), "float16"),
            (f"blk.{i}.attn_k.weight", (128, hidden), "float16"),
            (f"blk.{i}.attn_v.weight", (128, hidden), "float16"),
            (f"blk.{i}.attn_output.weight", (hidden, hidden), "float16"),
            (f"blk.{i}.ffn_norm.weight", (hidden,), "float32"),
            (f"blk.{i}.ffn_gate_inp.weight", (n_expert, hidden), "float32"),
            (f"blk.{i}.ffn_gate_exps.weight", (n_expert, ffn, hidden), "float16"),
            (f"blk.{i}.ffn_up_exps.weight", (n_expert, ffn, hidden), "float16"),
            (f"blk.{i}.ffn_down_exps.weight", (n_expert, hidden, ffn), "float16"),
        ]
    return [
        *tensors,
        ("output_norm.weight", (hidden,), "float32"),
        ("output.weight", (1000, hidden), "float16"),
    ]


Rule = tuple[str, str, set[int] | None]
Mixture = tuple[str, list[Rule]]


def expected_layer_type(mixture: Mixture, part: str, i: int) -> str:
    """The type a table gives layer `i`'s `part`: the first rule naming it and the layer wins."""
    base, rules = mixture
    for rule_part, kind, layers in rules:
        if rule_part == part and (layers is None or i in layers):
            return kind
    return base


def check_layers(result: dict[str, str], n_layer: int, mixture: Mixture) -> None:
    """Every layer tensor of a llama-like result has the type the table says; norms stay f32."""
    for i in range(n_layer):
        for part in LAYER_TENSORS:
            name = f"blk.{i}.{part}.weight"
            assert result[name] == expected_layer_type(mixture, part, i), (name, result[name])
        assert result[f"blk.{i}.attn_norm.weight"] == "float32"
        assert result[f"blk.{i}.ffn_norm.weight"] == "float32"


FIRST_FOUR, FIRST_TWO = {0, 1, 2, 3}, {0, 1}

# Mixtures of a 32-layer model with one KV head per head (no GQA).
LLAMA_32 = {
    "Q2_K": (
        "q2_k",
        [("attn_v", "q3_k", None), ("ffn_down", "q3_k", None), ("attn_output", "q3_k", None)],
    ),
    "Q3_K_S": ("q3_k", []),
    "Q3_K_M": (
        "q3_k",
        [
            ("attn_v", "q5_k", FIRST_TWO),
            ("attn_v", "q4_k", None),
            ("ffn_down", "q5_k", FIRST_TWO),
            ("ffn_down", "q4_k", None),
            ("attn_output", "q4_k", None),
        ],
    ),
    "Q3_K_L": (
        "q3_k",
        [("attn_v", "q5_k", None), ("ffn_down", "q5_k", None), ("attn_output", "q5_k", None)],
    ),
    "Q4_K_S": ("q4_k", [("attn_v", "q5_k", FIRST_FOUR), ("ffn_down", "q5_k", FIRST_FOUR)]),
    "Q4_K_M": ("q4_k", [("attn_v", "q6_k", MORE_BITS_32), ("ffn_down", "q6_k", MORE_BITS_32)]),
    "Q5_K_S": ("q5_k", []),
    "Q5_K_M": ("q5_k", [("attn_v", "q6_k", MORE_BITS_32), ("ffn_down", "q6_k", MORE_BITS_32)]),
    "Q6_K": ("q6_k", []),
    "Q8_0": ("q8_0", []),
    "Q4_0": ("q4_0", []),
    "Q4_1": ("q4_1", []),
    "Q5_0": ("q5_0", []),
    "Q5_1": ("q5_1", []),
    "F16": ("float16", []),
    "BF16": ("bfloat16", []),
    "F32": ("float32", []),
}

# (token_embd, output) of an untied model, per file type.
EMBEDDINGS = {
    "Q2_K": ("q2_k", "q6_k"),
    "Q3_K_S": ("q3_k", "q6_k"),
    "Q3_K_M": ("q3_k", "q6_k"),
    "Q3_K_L": ("q3_k", "q6_k"),
    "Q4_K_S": ("q4_k", "q6_k"),
    "Q4_K_M": ("q4_k", "q6_k"),
    "Q5_K_S": ("q5_k", "q6_k"),
    "Q5_K_M": ("q5_k", "q6_k"),
    "Q6_K": ("q6_k", "q6_k"),
    "Q8_0": ("q8_0", "q8_0"),
    "Q4_0": ("q4_0", "q6_k"),
    "Q4_1": ("q4_1", "q6_k"),
    "Q5_0": ("q5_0", "q6_k"),
    "Q5_1": ("q5_1", "q6_k"),
    "F16": ("float16", "float16"),
    "BF16": ("bfloat16", "bfloat16"),
    "F32": ("float32", "float32"),
}


@pytest.mark.parametrize("file_type", sorted(LLAMA_32))
def test_a_32_layer_llama_gets_llama_quantizes_mixture(file_type: str) -> None:
    result = tensor_types(file_type, llama_like(32), n_head=8, n_head_kv=8, n_layer=32)
    check_layers(result, 32, LLAMA_32[file_type])
    assert (result["token_embd.weight"], result["output.weight"]) == EMBEDDINGS[file_type]
    assert result["output_norm.weight"] == "float32"


@pytest.mark.parametrize(
    ("file_type", "spec"),
    [
        ("Q4_K_M", ("q4_k", [("attn_v", "q6_k", MORE_BITS_4), ("ffn_down", "q6_k", MORE_BITS_4)])),
        (
            "Q3_K_M",
            (
                "q3_k",
                [
                    ("attn_v", "q5_k", FIRST_TWO),
                    ("attn_v", "q4_k", None),
                    ("ffn_down", "q4_k", None),
                    ("attn_output", "q4_k", None),
                ],
            ),
        ),
        ("Q4_K_S", ("q4_k", [("attn_v", "q5_k", None)])),
        ("Q5_K_M", ("q5_k", [("attn_v", "q6_k", MORE_BITS_4), ("ffn_down", "q6_k", MORE_BITS_4)])),
    ],
)
def test_a_4_layer_model_counts_layers_for_its_own_size(file_type: str, spec: Mixture) -> None:
    result = tensor_types(file_type, llama_like(4), n_head=8, n_head_kv=8, n_layer=4)
    check_layers(result, 4, spec)


@pytest.mark.parametrize(
    ("n_head_kv", "attn_v"), [(8, "q3_k"), (4, "q3_k"), (2, "q4_k"), (1, "q4_k")]
)
def test_q2_k_gives_attn_v_q4_k_from_four_heads_per_kv_head(n_head_kv: int, attn_v: str) -> None:
    result = tensor_types(
        "Q2_K", llama_like(4, kv=64 * n_head_kv), n_head=8, n_head_kv=n_head_kv, n_layer=4
    )
    assert {result[f"blk.{i}.attn_v.weight"] for i in range(4)} == {attn_v}


def test_gqa_leaves_the_other_mixtures_alone() -> None:
    gqa = tensor_types("Q4_K_M", llama_like(32, kv=128), n_head=32, n_head_kv=4, n_layer=32)
    check_layers(gqa, 32, LLAMA_32["Q4_K_M"])


@pytest.mark.parametrize(
    ("arch", "n_layer", "n_head_kv", "attn_v_low"),
    [
        ("llama", 80, 8, "q5_k"),
        ("llama", 80, 64, "q4_k"),
        ("qwen2", 80, 64, "q5_k"),
        ("llama", 79, 8, "q4_k"),
    ],
)
def test_70b_models_raise_attn_v_to_q5_k(
    arch: str, n_layer: int, n_head_kv: int, attn_v_low: str
) -> None:
    tensors = llama_like(n_layer, hidden=256, ffn=256, kv=256)
    result = tensor_types(
        "Q4_K_M", tensors, n_head=64, n_head_kv=n_head_kv, n_layer=n_layer, arch=arch
    )
    assert result["blk.13.attn_v.weight"] == attn_v_low  # not a more-bits layer of 80 or 79
    assert result["blk.0.attn_v.weight"] == "q6_k"


MOE_4 = {
    "Q4_K_M": {
        "attn_v": "q8_0",
        "attn_k": "q8_0",
        "attn_output": "q5_k",
        "attn_q": "q4_k",
        "ffn_gate_exps": "q4_k",
    },
    "Q3_K_S": {
        "attn_v": "q8_0",
        "attn_k": "q8_0",
        "attn_output": "q5_k",
        "attn_q": "q3_k",
        "ffn_up_exps": "q3_k",
    },
    "Q5_K_M": {
        "attn_v": "q8_0",
        "attn_k": "q8_0",
        "attn_output": "q5_k",
        "attn_q": "q5_k",
        "ffn_up_exps": "q5_k",
    },
    "Q6_K": {
        "attn_v": "q8_0",
        "attn_k": "q8_0",
        "attn_output": "q6_k",
        "attn_q": "q6_k",
        "ffn_down_exps": "q6_k",
    },
    "Q8_0": {"attn_v": "q8_0", "attn_k": "q8_0", "attn_output": "q8_0", "ffn_down_exps": "q8_0"},
}


@pytest.mark.parametrize("file_type", sorted(MOE_4))
def test_an_8_expert_model_gets_the_expert_rules(file_type: str) -> None:
    result = tensor_types(file_type, moe_like(4), n_head=8, n_head_kv=2, n_expert=8, n_layer=4)
    for i in range(4):
        assert result[f"blk.{i}.ffn_gate_inp.weight"] == "float32"
        for part, kind in MOE_4[file_type].items():
            assert result[f"blk.{i}.{part}.weight"] == kind, (i, part)


def test_expert_ffn_down_takes_its_layer_from_its_name() -> None:
    tensors = moe_like(4)
    tensors.insert(1, ("blk.3.ffn_down_shexp.weight", (512, 256), "float16"))
    result = tensor_types("Q4_K_M", tensors, n_head=8, n_head_kv=2, n_expert=8, n_layer=4)
    downs = [result[f"blk.{i}.ffn_down_exps.weight"] for i in range(4)]
    assert downs == ["q4_k", "q4_k", "q6_k", "q6_k"]
    assert result["blk.3.ffn_down_shexp.weight"] == "q6_k"


@pytest.mark.parametrize(
    ("file_type", "token_embd"),
    [
        ("Q4_K_M", "q6_k"),
        ("Q4_0", "q6_k"),
        ("Q5_1", "q6_k"),
        ("Q6_K", "q6_k"),
        ("Q8_0", "q8_0"),
        ("Q2_K", "q6_k"),
        ("F16", "float16"),
    ],
)
def test_a_tied_token_embedding_follows_the_output_rules(file_type: str, token_embd: str) -> None:
    result = tensor_types(file_type, llama_like(4, tied=True), n_head=8, n_head_kv=8, n_layer=4)
    assert "output.weight" not in result
    assert result["token_embd.weight"] == token_embd


# Rows of 2880 (a multiple of 32, not of 256) and of 100 (not even of 32), per file type:
# (a layer matrix, the raised attn_v of layer 1, the output).
MISFIT_ROWS = {
    2880: {
        "Q2_K": ("q4_0", "q4_0", "q8_0"),
        "Q3_K_M": ("q4_0", "q5_1", "q8_0"),
        "Q4_K_S": ("q5_0", "q5_1", "q8_0"),
        "Q4_K_M": ("q5_0", "q8_0", "q8_0"),
        "Q5_K_M": ("q5_1", "q8_0", "q8_0"),
        "Q6_K": ("q8_0", "q8_0", "q8_0"),
        "Q8_0": ("q8_0", "q8_0", "q8_0"),
        "Q4_0": ("q4_0", "q4_0", "q8_0"),
        "Q5_1": ("q5_1", "q5_1", "q8_0"),
    },
    100: {
        "Q2_K": ("float16", "float16", "float16"),
        "Q4_K_M": ("float16", "float16", "float16"),
        "Q8_0": ("float16", "float16", "float16"),
        "Q4_0": ("float16", "float16", "float16"),
        "BF16": ("bfloat16", "bfloat16", "bfloat16"),
    },
}


@pytest.mark.parametrize(
    ("hidden", "file_type"),
    [(hidden, file_type) for hidden, table in MISFIT_ROWS.items() for file_type in table],
)
def test_rows_that_do_not_fill_a_block_fall_back(hidden: int, file_type: str) -> None:
    tensors = llama_like(2, hidden=hidden, ffn=512, kv=hidden, dtype="bfloat16")
    result = tensor_types(file_type, tensors, n_head=8, n_head_kv=8, n_layer=2)
    matrix, attn_v, output = MISFIT_ROWS[hidden][file_type]
    assert result["blk.1.attn_q.weight"] == matrix
    assert result["blk.1.attn_v.weight"] == attn_v
    assert result["output.weight"] == output


def test_the_load_order_not_the_file_order_drives_the_counters() -> None:
    tensors = llama_like(12)
    expected = tensor_types("Q4_K_S", tensors, n_head=8, n_head_kv=8, n_layer=12)
    shuffled = tensors[:]
    random.Random(0).shuffle(shuffled)
    result = tensor_types("Q4_K_S", shuffled, n_head=8, n_head_kv=8, n_layer=12)
    assert result == expected
    assert list(result) == [name for name, _, _ in shuffled]
    raised_v = [i for i in range(12) if expected[f"blk.{i}.attn_v.weight"] == "q5_k"]
    assert raised_v == [0, 1, 2, 3]  # blocks counted by number: not 0, 1, 10, 11


@pytest.mark.parametrize(
    ("name", "shape", "dtype"),
    [
        ("blk.0.attn_norm.weight", (512,), "float32"),
        ("blk.0.ffn_gate_inp.weight", (8, 512), "float32"),
        ("position_embd.weight", (2048, 512), "float16"),
        ("token_types.weight", (2, 512), "float32"),
        ("blk.0.attn_q.bias", (512, 512), "float16"),
        ("blk.0.attn_q_norm.weight", (64, 512), "float16"),
        ("blk.0.ssm_conv1d.weight", (512, 4), "float32"),
        ("blk.0.attn_q.weight", (1, 512), "float16"),
    ],
)
def test_tensors_llama_quantize_copies_keep_their_type(
    name: str, shape: tuple[int, ...], dtype: str
) -> None:
    tensors = [tensor for tensor in llama_like(1) if tensor[0] != name] + [(name, shape, dtype)]
    result = tensor_types("Q4_K_M", tensors, n_head=8, n_head_kv=8, n_layer=1)
    assert result[name] == dtype


def test_falcon_output_and_ffn_down_rules() -> None:
    result = tensor_types(
        "Q4_K_M", llama_like(32), n_head=8, n_head_kv=8, n_layer=32, arch="falcon"
    )
    assert result["output.weight"] == "q8_0"
    downs = [result[f"blk.{i}.ffn_down.weight"] for i in (0, 2, 3, 4, 6)]
    assert downs == ["q6_k", "q5_k", "q5_k", "q4_k", "q5_k"]


def test_file_type_ids_and_quantization_version() -> None:
    assert QUANTIZATION_VERSION == 2
    assert FILE_TYPES["F32"] == 0 and FILE_TYPES["F16"] == 1 and FILE_TYPES["BF16"] == 32
    assert (FILE_TYPES["Q4_0"], FILE_TYPES["Q4_1"], FILE_TYPES["Q8_0"]) == (2, 3, 7)
    assert (FILE_TYPES["Q5_0"], FILE_TYPES["Q5_1"], FILE_TYPES["Q2_K"]) == (8, 9, 10)
    assert [FILE_TYPES[k] for k in ("Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M")] == [
        11,
        12,
        13,
        14,
        15,
    ]
    assert [FILE_TYPES[k] for k in ("Q5_K_S", "Q5_K_M", "Q6_K")] == [16, 17, 18]
    assert (FILE_TYPES["Q3_K"], FILE_TYPES["Q4_K"], FILE_TYPES["Q5_K"]) == (12, 15, 17)


def test_aliases_give_the_medium_mixture() -> None:
    tensors = llama_like(8)
    for alias, name in (("Q3_K", "Q3_K_M"), ("Q4_K", "Q4_K_M"), ("Q5_K", "Q5_K_M")):
        assert tensor_types(alias, tensors, n_head=8, n_head_kv=8, n_layer=8) == tensor_types(
            name, tensors, n_head=8, n_head_kv=8, n_layer=8
        )


@pytest.mark.parametrize(
    ("file_type", "tensors", "kwargs", "message"),
    [
        ("Q4_K_X", [], {}, "unknown llama.cpp file type 'Q4_K_X'; known: F32, F16, Q4_0"),
        ("Q2_K_S", [], {}, "'Q2_K_S' needs an importance matrix"),
        ("Q4_K_M", [("a.weight", (2, 2), "float16")] * 2, {}, "tensor 'a.weight' is listed twice"),
        ("Q4_K_M", [("a.weight", (2, 2), "int8")], {}, "tensor 'a.weight' has dtype 'int8'"),
        ("Q4_K_M", [("a.weight", (2, -1), "float16")], {}, "tensor 'a.weight' has shape (2, -1)"),
        ("Q4_K_M", [], {"n_layer": 0}, "n_layer must be at least 1"),
        ("Q4_K_M", [], {"n_head_kv": -1}, "n_head_kv must be a non-negative integer"),
        (
            "Q4_K_M",
            [("ffn_down_exps.weight", (8, 256, 256), "float16")],
            {"n_expert": 8},
            "'ffn_down_exps.weight': cannot tell its layer",
        ),
        (
            "Q4_K_M",
            [("blk.9.ffn_up_exps.weight", (8, 256, 256), "float16")],
            {"n_expert": 8},
            "layer 9 is outside [0, 4)",
        ),
    ],
)
def test_bad_input_is_refused_by_name(
    file_type: str, tensors: Tensors, kwargs: dict[str, int], message: str
) -> None:
    model = {"n_head": 8, "n_head_kv": 8, "n_layer": 4} | kwargs
    with pytest.raises(ConvertError) as caught:
        tensor_types(file_type, tensors, **model)
    assert message in str(caught.value)


def gpt_oss_120b() -> Tensors:
    """gpt-oss-120b's quantizable tensors: rows of 2880, 64 query heads of 64, 128 experts."""
    tensors: Tensors = [("token_embd.weight", (201088, 2880), "bfloat16")]
    for i in range(36):
        tensors += [
            (f"blk.{i}.attn_q.weight", (4096, 2880), "bfloat16"),
            (f"blk.{i}.attn_k.weight", (512, 2880), "bfloat16"),
            (f"blk.{i}.attn_v.weight", (512, 2880), "bfloat16"),
            (f"blk.{i}.attn_output.weight", (2880, 4096), "bfloat16"),
            (f"blk.{i}.ffn_gate_inp.weight", (128, 2880), "float32"),
            (f"blk.{i}.ffn_gate_exps.weight", (128, 2880, 2880), "bfloat16"),
            (f"blk.{i}.ffn_up_exps.weight", (128, 2880, 2880), "bfloat16"),
            (f"blk.{i}.ffn_down_exps.weight", (128, 2880, 2880), "bfloat16"),
        ]
    return [*tensors, ("output.weight", (201088, 2880), "bfloat16")]


def raised_counts(result: dict[str, str], default: str) -> dict[tuple[str, str], int]:
    """How many tensors of each role got each non-default type (float32 tensors left out)."""
    counts: dict[tuple[str, str], int] = {}
    for name, kind in result.items():
        if kind not in (default, "float32"):
            role = name.split(".", 2)[2] if name.startswith("blk.") else name
            counts[role, kind] = counts.get((role, kind), 0) + 1
    return counts


# What llama.cpp's own type-selection snapshots list for these real models.
LLAMA_70B = {
    "Q4_K_M": {
        ("output.weight", "q6_k"): 1,
        ("attn_v.weight", "q6_k"): 40,
        ("attn_v.weight", "q5_k"): 40,
        ("ffn_down.weight", "q6_k"): 40,
    },
    "Q3_K_S": {("output.weight", "q6_k"): 1, ("attn_v.weight", "q5_k"): 80},
    "Q2_K": {
        ("output.weight", "q6_k"): 1,
        ("attn_output.weight", "q3_k"): 80,
        ("attn_v.weight", "q5_k"): 80,
        ("ffn_down.weight", "q3_k"): 80,
    },
}
GPT_OSS_120B = {
    "Q4_K_M": {
        ("output.weight", "q8_0"): 1,
        ("token_embd.weight", "q5_0"): 1,
        ("attn_q.weight", "q5_0"): 36,
        ("attn_k.weight", "q5_0"): 36,
        ("attn_v.weight", "q8_0"): 18,
        ("attn_v.weight", "q5_0"): 18,
        ("ffn_gate_exps.weight", "q5_0"): 36,
        ("ffn_up_exps.weight", "q5_0"): 36,
        ("ffn_down_exps.weight", "q8_0"): 18,
        ("ffn_down_exps.weight", "q5_0"): 18,
    },
    "Q2_K": {
        ("output.weight", "q8_0"): 1,
        ("token_embd.weight", "q4_0"): 1,
        ("attn_q.weight", "q4_0"): 36,
        ("attn_k.weight", "q4_0"): 36,
        ("attn_v.weight", "q5_0"): 36,
        ("attn_output.weight", "q3_k"): 36,
        ("ffn_gate_exps.weight", "q4_0"): 36,
        ("ffn_up_exps.weight", "q4_0"): 36,
        ("ffn_down_exps.weight", "q4_0"): 36,
    },
    "Q4_0": {("output.weight", "q8_0"): 1},
}


@pytest.mark.parametrize("file_type", sorted(LLAMA_70B))
def test_llama_3_1_70b_as_llama_cpp_lists_it(file_type: str) -> None:
    tensors = llama_like(80, hidden=8192, ffn=28672, kv=1024, vocab=128256, dtype="bfloat16")
    result = tensor_types(file_type, tensors, n_head=64, n_head_kv=8, n_layer=80)
    assert raised_counts(result, file_type.lower()[:4]) == LLAMA_70B[file_type]


@pytest.mark.parametrize("file_type", sorted(GPT_OSS_120B))
def test_gpt_oss_120b_as_llama_cpp_lists_it(file_type: str) -> None:
    result = tensor_types(
        file_type, gpt_oss_120b(), n_head=64, n_head_kv=8, n_expert=128, n_layer=36, arch="gpt-oss"
    )
    assert raised_counts(result, file_type.lower()[:4]) == GPT_OSS_120B[file_type]
