"""The files beside the demo's weights that make them a Hugging Face model folder.

config.json says what a llama-like checkpoint of `LlamaShape` is (heads of 64, or one head);
tokenizer.json is a byte-level BPE vocabulary (GPT-2's 256 byte tokens, a few merges, two
special tokens), written as JSON: the tokenizers library is needed only by the `gguf` recipe,
which reads it.
Imports only the standard library and `errors`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lazyparams.errors import ConvertError

if TYPE_CHECKING:
    from lazyparams.engine.demo import LlamaShape

DEMO_PRE = "gpt-2"
"""The BPE pre-tokenizer the demo's tokenizer uses: GPT-2's split regex, then its bytes."""
SPECIALS = ("<|begin_of_text|>", "<|end_of_text|>")
MERGES = (("Ġ", "t"), ("h", "e"), ("Ġ", "a"), ("i", "n"), ("Ġt", "he"), ("e", "r"))
"""A few English merges: a BPE model needs some (gguf-py warns of a vocabulary without)."""
_HEAD_DIM = 64


def write_model_files(folder: Path, shape: LlamaShape) -> None:
    """Write config.json and tokenizer.json for the demo checkpoint in `folder`."""
    tokens = 256 + len(MERGES) + len(SPECIALS)
    if shape.vocab < tokens:
        raise ConvertError(
            f"demo: a vocabulary of {shape.vocab} has no room for the tokenizer's "
            f"{tokens} tokens; expected at least that many"
        )
    _write_json(folder / "config.json", llama_config(shape))
    write_byte_tokenizer(folder)


def write_byte_tokenizer(folder: Path) -> int:
    """Write the byte-level BPE tokenizer.json (pre-tokenizer `DEMO_PRE`) into `folder` and
    return how many tokens it has: a config's vocab_size must be at least that."""
    vocab = _byte_vocab()
    for left, right in MERGES:
        vocab[left + right] = len(vocab)
    _write_json(folder / "tokenizer.json", _tokenizer(vocab))
    return len(vocab) + len(SPECIALS)


def llama_config(shape: LlamaShape) -> dict[str, Any]:
    """config.json as transformers writes it for a LlamaForCausalLM of `shape`."""
    heads = shape.hidden // _HEAD_DIM if shape.hidden % _HEAD_DIM == 0 else 1
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "vocab_size": shape.vocab,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 256 + len(MERGES),
        "eos_token_id": 257 + len(MERGES),
        "torch_dtype": "float32",
    }


def _byte_vocab() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte, with the byte as its id."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    shifted = iter(range(256, 512))
    chars = {b: chr(b) if b in printable else chr(next(shifted)) for b in range(256)}
    return {chars[b]: b for b in range(256)}


def _tokenizer(vocab: dict[str, int]) -> dict[str, Any]:
    """tokenizer.json of a byte-level BPE model with `vocab` and the two special tokens."""
    added = [
        {
            "id": len(vocab) + i,
            "content": text,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, text in enumerate(SPECIALS)
    ]
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", **byte_level},
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(m) for m in MERGES],
        },
    }


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
