"""The tokenizer metadata of the Gemma families, as llama.cpp's converter writes it.

Gemma and Gemma 2 ship a sentencepiece `tokenizer.model`; Gemma also gets CodeGemma's infill
and end-of-turn token ids (whatever the model), and all of them `add_space_prefix` false.
Gemma 3 reads a byte-level BPE tokenizer.json when there is no tokenizer.model. Imports the
sibling vocabulary modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lazyparams.targets.llamacpp.bpe_vocab import bpe_vocab
from lazyparams.targets.llamacpp.spm_vocab import sentencepiece_vocab
from lazyparams.targets.llamacpp.tokenizer_files import special_vocab

CODEGEMMA_SPECIALS = {"prefix": 67, "suffix": 69, "middle": 68, "fsep": 70, "eot": 107}
"""The special token ids the converter sets on every Gemma (CodeGemma's), in its order."""


def gemma_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """Sentencepiece, CodeGemma's special ids (those gguf-py can write), no space prefix."""
    sentencepiece_vocab(writer, model_dir, config, pre)
    special = special_vocab(
        model_dir, load_merges=False, special_token_types=list(CODEGEMMA_SPECIALS)
    )
    for kind, token_id in CODEGEMMA_SPECIALS.items():
        special._set_special_token(kind, token_id)
    special.chat_template = None  # written once, by the sentencepiece vocabulary
    special.add_to_gguf(writer, quiet=True)
    writer.add_add_space_prefix(False)


def gemma2_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """Sentencepiece, no space prefix."""
    sentencepiece_vocab(writer, model_dir, config, pre)
    writer.add_add_space_prefix(False)


def gemma3_vocab(writer: Any, model_dir: Path, config: Mapping[str, Any], pre: str | None) -> None:
    """Gemma 2's rules with a tokenizer.model; else the byte-level BPE of tokenizer.json."""
    if (model_dir / "tokenizer.model").is_file():
        gemma2_vocab(writer, model_dir, config, pre)
    else:
        bpe_vocab(writer, model_dir, config, pre)
