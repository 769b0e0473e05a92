"""The `tokenizer.ggml.*` metadata llama.cpp expects, read from a Hugging Face model folder.

Sentencepiece (`tokenizer.model`) and byte-level BPE (`tokenizer.json`) vocabularies become the
same KV pairs, in the same order and with the same GGUF types, as llama.cpp's converter writes:
the values are recorded through gguf-py's own `GGUFWriter` and `SpecialVocab`. Imports gguf, the
package's errors and the sibling modules (which import sentencepiece / tokenizers lazily).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gguf

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp.bpe_vocab import bpe_vocab
from lazyparams.targets.llamacpp.ernie45moe import ernie_vocab
from lazyparams.targets.llamacpp.gemma_vocab import gemma2_vocab, gemma3_vocab, gemma_vocab
from lazyparams.targets.llamacpp.glm4 import glm4_vocab
from lazyparams.targets.llamacpp.glm4moe import glm_vocab
from lazyparams.targets.llamacpp.phi3_vocab import phi3_vocab
from lazyparams.targets.llamacpp.spm_vocab import sentencepiece_vocab
from lazyparams.targets.llamacpp.tokenizer_files import (
    json_section,
    read_json,
    special_vocab,
    unsupported,
)

_CODELLAMA_VOCAB = 32016
_CODELLAMA_SPECIALS = {"prefix": 32007, "suffix": 32008, "middle": 32009, "eot": 32010}
_GRANITE_SMALL_VOCAB = 49152


def tokenizer_metadata(
    model_dir: Path, config: Mapping[str, Any], arch: str, *, pre: str | None = None
) -> dict[str, gguf.GGUFValue]:
    """Every tokenizer KV pair llama.cpp's converter writes for `arch`, in its order.

    `pre` names the BPE pre-tokenizer when llama.cpp does not know the tokenizer's hash.
    """
    model_dir = Path(model_dir)
    set_vocab = _VOCAB_BY_ARCH.get(arch)
    if set_vocab is None:
        raise ConvertError(
            f"no tokenizer rules for GGUF architecture {arch!r}; supported: "
            + ", ".join(sorted(_VOCAB_BY_ARCH))
        )
    writer = gguf.GGUFWriter(None, arch)
    set_vocab(writer, model_dir, config, pre)
    return {key: value for key, value in writer.kv_data[0].items() if key.startswith("tokenizer.")}


def _llama_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """llama's rules: sentencepiece first, else a Llama-3 style BPE; then its vocab quirks."""
    tokenizer_config = read_json(model_dir / "tokenizer_config.json")
    if tokenizer_config.get("tokenizer_class") == "HybridDNATokenizer":
        unsupported(model_dir, "a HybridDNATokenizer")
    if (model_dir / "tekken.json").is_file() and not (model_dir / "tokenizer.json").is_file():
        unsupported(model_dir, "a Mistral tekken.json")
    if (add_prefix_space := tokenizer_config.get("add_prefix_space")) is not None:
        writer.add_add_space_prefix(add_prefix_space)
    if (model_dir / "tokenizer.model").is_file():
        sentencepiece_vocab(writer, model_dir, config, pre)
    else:
        _refuse_hf_sentencepiece_json(model_dir)
        bpe_vocab(writer, model_dir, config, pre)
    _llama_vocab_quirks(writer, model_dir, config)


def _llama_vocab_quirks(writer: Any, model_dir: Path, config: Mapping[str, Any]) -> None:
    """CodeLlama's infill tokens and small Granite's missing BOS, as llama.cpp keys them."""
    vocab_size = config.get("vocab_size", 32000)
    if vocab_size == _CODELLAMA_VOCAB:
        special = special_vocab(model_dir, special_token_types=list(_CODELLAMA_SPECIALS))
        for kind, token_id in _CODELLAMA_SPECIALS.items():
            special._set_special_token(kind, token_id)
        special.add_to_gguf(writer, quiet=True)
    if vocab_size == _GRANITE_SMALL_VOCAB:
        writer.add_add_bos_token(False)


def _qwen_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """qwen2 and qwen3's rules: a sentencepiece model when there is one, else byte-level BPE."""
    if (model_dir / "tokenizer.model").is_file():
        sentencepiece_vocab(writer, model_dir, config, pre)
    else:
        bpe_vocab(writer, model_dir, config, pre)


def _refuse_hf_sentencepiece_json(model_dir: Path) -> None:
    """A Llama-2 style tokenizer.json without its tokenizer.model needs transformers: refuse."""
    path = model_dir / "tokenizer.json"
    read_json(path, required=True)
    model, decoder = json_section(path, "model"), json_section(path, "decoder")
    llama3 = model.get("ignore_merges", False) and not model.get("byte_fallback", True)
    if (
        not llama3
        and model.get("type") == "BPE"
        and model.get("byte_fallback", False)
        and decoder.get("type") == "Sequence"
    ):
        unsupported(model_dir, f"a sentencepiece-style BPE {path.name} without tokenizer.model")


_VOCAB_BY_ARCH: dict[str, Callable[[Any, Path, Mapping[str, Any], str | None], None]] = {
    "llama": _llama_vocab,
    "qwen2": _qwen_vocab,
    "qwen3": _qwen_vocab,
    # the MoE Qwens read tokenizer.json only (llama.cpp's converter tries no sentencepiece there)
    "qwen2moe": bpe_vocab,
    "qwen3moe": bpe_vocab,
    # DeepSeek V2/V3 ship a byte-level BPE tokenizer.json (V3's pre-tokenizer is deepseek-v3)
    "deepseek2": bpe_vocab,
    # OLMo 2 ships a byte-level BPE tokenizer.json (the converter's default vocabulary)
    "olmo2": bpe_vocab,
    # SmolLM3 is llama to the converter: its vocabulary rules and quirks
    "smollm3": _llama_vocab,
    # Command R and R7B: byte-level BPE tokenizer.json (the converter's default vocabulary)
    "command-r": bpe_vocab,
    "cohere2": bpe_vocab,
    # StarCoder2: byte-level BPE tokenizer.json (the converter's default vocabulary)
    "starcoder2": bpe_vocab,
    # GLM-4.5: byte-level BPE, its BOS/EOT/EOM set by their text as the converter does
    "glm4moe": glm_vocab,
    # OLMoE: byte-level BPE (the converter's default vocabulary)
    "olmoe": bpe_vocab,
    # ERNIE-4.5-MoE: sentencepiece, then tokenizer_config.json's add_prefix_space
    "ernie4_5-moe": ernie_vocab,
    # Llama 4: byte-level BPE (its converter class reads no sentencepiece)
    "llama4": bpe_vocab,
    # gpt-oss: byte-level BPE (o200k; the converter's default vocabulary)
    "gpt-oss": bpe_vocab,
    # Gemma: sentencepiece, no space prefix (Gemma: CodeGemma's special ids; Gemma 3: or BPE)
    "gemma": gemma_vocab,
    "gemma2": gemma2_vocab,
    "gemma3": gemma3_vocab,
    # Phi-3/3.5: sentencepiece by Phi-3's own rules; Phi-4: byte-level BPE (GPT2Tokenizer)
    "phi3": phi3_vocab,
    # Granite and Granite MoE are llama to the converter: its vocabulary rules and quirks
    "granite": _llama_vocab,
    "granitemoe": _llama_vocab,
    # phi-2: byte-level BPE (the converter's default vocabulary)
    "phi2": bpe_vocab,
    # StableLM: byte-level BPE tokenizer.json (StableLM 2's older Qwen-style files are refused)
    "stablelm": bpe_vocab,
    # GLM-4: byte-level BPE, its EOS/EOT/UNK/BOS set by their text as the converter does
    "glm4": glm4_vocab,
    # EXAONE 3: byte-level BPE tokenizer.json (the converter's default vocabulary)
    "exaone": bpe_vocab,
}
