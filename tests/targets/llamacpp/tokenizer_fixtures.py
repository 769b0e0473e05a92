"""Small real-layout tokenizers for tests: trained in a fraction of a second, written to a folder.

`write_sentencepiece_tokenizer` trains a Llama-style sentencepiece BPE model (byte fallback,
<unk>/<s>/</s>) and writes tokenizer.model with the tokenizer_config.json and
special_tokens_map.json transformers writes for Llama; `write_bpe_tokenizer` trains a byte-level
BPE `tokenizer.json` of the Qwen2 or Llama-3 kind with its specials and chat template.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

_SYLLABLES = [
    "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qua", "pri", "stra", "el", "on",
    "ith", "ber", "gan", "dor", "fel", "hux", "jo", "wy", "xi", "ul", "om", "ap", "ed",
]  # fmt: skip
_EXTRA_WORDS = ["Hello", "world", "I'll", "don't", "3.14", "2026", "naïve", "café", "日本", "🦙"]

_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

LLAMA2_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}"
    "{{ ' ' + message['content'] + ' ' + eos_token }}{% endif %}{% endfor %}"
)
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
LLAMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}"
)

QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>",
    "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
]  # fmt: skip
BPE_STYLES = ("qwen2", "llama3")


def training_text(lines: int = 600, seed: int = 0) -> list[str]:
    """Deterministic sentences of made-up words, digits, punctuation and a little non-ASCII."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 3))) for _ in range(400)]
    words += _EXTRA_WORDS
    out = []
    for _ in range(lines):
        sentence = " ".join(rng.choices(words, k=rng.randint(4, 14)))
        out.append(sentence.capitalize() + rng.choice([".", "!", "?", ",", " 42.", "  ..."]))
    return out


def write_json(path: Path, data: Any) -> None:
    """Write one JSON file as transformers does (indented, UTF-8)."""
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _added_token(content: str, special: bool = True) -> dict[str, Any]:
    """One added_tokens_decoder / special_tokens_map entry as transformers writes it."""
    return {
        "content": content,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
        "special": special,
    }


def _map_entry(content: str) -> dict[str, Any]:
    """One special_tokens_map.json entry as transformers writes it (no 'special' flag)."""
    return {k: v for k, v in _added_token(content).items() if k != "special"}


def write_sentencepiece_tokenizer(folder: Path, vocab_size: int) -> int:
    """Train a Llama-style sentencepiece model into `folder`; returns its real vocab size."""
    import sentencepiece

    folder.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(training_text()),
        model_writer=model,
        vocab_size=vocab_size,
        model_type="bpe",
        byte_fallback=True,
        hard_vocab_limit=False,
        character_coverage=1.0,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )
    (folder / "tokenizer.model").write_bytes(model.getvalue())
    _write_llama_spm_configs(folder)
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    return int(processor.vocab_size())


def _write_llama_spm_configs(folder: Path) -> None:
    """tokenizer_config.json and special_tokens_map.json as transformers saves a LlamaTokenizer."""
    specials = {"0": "<unk>", "1": "<s>", "2": "</s>"}
    write_json(
        folder / "tokenizer_config.json",
        {
            "add_bos_token": True,
            "add_eos_token": False,
            "add_prefix_space": None,
            "added_tokens_decoder": {k: _added_token(v) for k, v in specials.items()},
            "bos_token": "<s>",
            "chat_template": LLAMA2_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "</s>",
            "legacy": False,
            "model_max_length": 1000000000000000019884624838656,
            "pad_token": None,
            "sp_model_kwargs": {},
            "spaces_between_special_tokens": False,
            "tokenizer_class": "LlamaTokenizer",
            "unk_token": "<unk>",
            "use_default_system_prompt": False,
        },
    )
    names = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    write_json(folder / "special_tokens_map.json", {k: _map_entry(v) for k, v in names.items()})


def write_bpe_tokenizer(folder: Path, vocab_size: int, style: str) -> int:
    """Train a byte-level BPE tokenizer.json of `style` (qwen2, llama3); returns its vocab size."""
    if style not in BPE_STYLES:
        raise ValueError(f"style must be one of {BPE_STYLES}, not {style!r}")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    specials = QWEN2_SPECIALS if style == "qwen2" else LLAMA3_SPECIALS
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(ignore_merges=style == "llama3", byte_fallback=False))
    tokenizer.pre_tokenizer = _byte_level_pre_tokenizer(style)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(specials),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_text(), trainer=trainer)
    tokenizer.add_special_tokens(specials)
    _finish_bpe(tokenizer, style, specials)
    tokenizer.save(str(folder / "tokenizer.json"))
    if style == "qwen2":
        tokenizer.model.save(str(folder))  # vocab.json and merges.txt, as Qwen2 folders ship
    ids = {text: tokenizer.token_to_id(text) for text in specials}
    _write_bpe_configs(folder, style, ids)
    return int(tokenizer.get_vocab_size(with_added_tokens=True))


def _byte_level_pre_tokenizer(style: str) -> Any:
    """The split regex and byte-level mapping of Qwen2 or Llama-3."""
    from tokenizers import Regex, pre_tokenizers

    pattern = _QWEN2_SPLIT if style == "qwen2" else _LLAMA3_SPLIT
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )


def _finish_bpe(tokenizer: Any, style: str, specials: list[str]) -> None:
    """Normalizer and post-processor: Qwen2's NFC and bare ByteLevel, Llama-3's BOS template."""
    from tokenizers import normalizers, processors

    byte_level = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    if style == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.post_processor = byte_level
        return
    bos = specials[0]
    template = processors.TemplateProcessing(
        single=f"{bos} $A",
        pair=f"{bos} $A {bos}:1 $B:1",
        special_tokens=[(bos, tokenizer.token_to_id(bos))],
    )
    tokenizer.post_processor = processors.Sequence([byte_level, template])


def _write_bpe_configs(folder: Path, style: str, ids: dict[str, int]) -> None:
    """tokenizer_config.json and special_tokens_map.json as the Qwen2 / Llama-3 releases have."""
    decoder = {str(token_id): _added_token(text) for text, token_id in ids.items()}
    config, special_map = _qwen2_configs() if style == "qwen2" else _llama3_configs()
    write_json(folder / "tokenizer_config.json", {"added_tokens_decoder": decoder, **config})
    write_json(folder / "special_tokens_map.json", special_map)


def _qwen2_configs() -> tuple[dict[str, Any], dict[str, Any]]:
    """Qwen2's tokenizer_config.json (less added_tokens_decoder) and special_tokens_map.json."""
    config = {
        "add_prefix_space": False,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHATML_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    special_map = {
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "eos_token": _map_entry("<|im_end|>"),
        "pad_token": _map_entry("<|endoftext|>"),
    }
    return config, special_map


def _llama3_configs() -> tuple[dict[str, Any], dict[str, Any]]:
    """Llama-3's tokenizer_config.json (less added_tokens_decoder) and special_tokens_map.json."""
    config = {
        "bos_token": "<|begin_of_text|>",
        "chat_template": LLAMA3_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": True,
        "eos_token": "<|eot_id|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    special_map = {
        "bos_token": _map_entry("<|begin_of_text|>"),
        "eos_token": _map_entry("<|eot_id|>"),
    }
    return config, special_map
