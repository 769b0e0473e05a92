"""tokenizer_metadata: keys, GGUF types and values (written and read back with gguf-py), and every
bad input refused with an error naming the file."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import gguf
import pytest
import sentencepiece
import tokenizers

from lazyparams.errors import ConvertError
from lazyparams.targets.llamacpp import bpe_pre
from lazyparams.targets.llamacpp.bpe_vocab import pre_hash
from lazyparams.targets.llamacpp.tokenizer import tokenizer_metadata
from tests.targets.llamacpp.tokenizer_fixtures import (
    CHATML_TEMPLATE,
    LLAMA2_CHAT_TEMPLATE,
    LLAMA3_CHAT_TEMPLATE,
    write_bpe_tokenizer,
    write_json,
    write_sentencepiece_tokenizer,
)

T = gguf.GGUFValueType
SPM_KEYS = [
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token",
    "tokenizer.chat_template",
]


def model_folder(
    tmp_path: Path, kind: str, vocab_size: int, pad: int = 0
) -> tuple[Path, dict[str, Any]]:
    """A folder with a fixture tokenizer and the config.json naming its size and BOS/EOS ids."""
    folder = tmp_path / kind
    if kind == "spm":
        real, bos, eos = write_sentencepiece_tokenizer(folder, vocab_size), 1, 2
    else:
        real = write_bpe_tokenizer(folder, vocab_size, kind)
        ids = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        bos = ids.token_to_id("<|begin_of_text|>" if kind == "llama3" else "<|endoftext|>")
        eos = ids.token_to_id("<|eot_id|>" if kind == "llama3" else "<|im_end|>")
    config = {"vocab_size": real + pad, "bos_token_id": bos, "eos_token_id": eos}
    write_json(folder / "config.json", config)
    return folder, config


def read_back(tmp_path: Path, kv: dict[str, gguf.GGUFValue], arch: str) -> dict[str, Any]:
    """Write the KV pairs with GGUFWriter, read them with GGUFReader: key -> (types, value)."""
    path = tmp_path / "kv.gguf"
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in kv.items():
        writer.add_key_value(key, value.value, value.type, value.sub_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    fields = gguf.GGUFReader(str(path)).fields
    return {
        name: (field.types, field.contents())
        for name, field in fields.items()
        if name.startswith("tokenizer.")
    }


def test_sentencepiece_keys_types_and_values(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "spm", 500)
    kv = tokenizer_metadata(folder, config, "llama")
    assert list(kv) == SPM_KEYS
    got = read_back(tmp_path, kv, "llama")
    assert list(got) == SPM_KEYS
    processor = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    n = processor.vocab_size()
    assert got["tokenizer.ggml.model"] == ([T.STRING], "llama")
    assert got["tokenizer.ggml.pre"] == ([T.STRING], "default")
    types, tokens = got["tokenizer.ggml.tokens"]
    assert types == [T.ARRAY, T.STRING]
    assert tokens == [processor.IdToPiece(i) for i in range(n)]
    types, scores = got["tokenizer.ggml.scores"]
    assert types == [T.ARRAY, T.FLOAT32]
    # the three specials are re-scored from tokenizer_config.json's added_tokens_decoder
    assert scores[:3] == [-1000.0] * 3
    assert scores[3:] == pytest.approx([processor.GetScore(i) for i in range(3, n)])
    types, token_types = got["tokenizer.ggml.token_type"]
    assert types == [T.ARRAY, T.INT32]
    assert token_types[:3] == [gguf.TokenType.CONTROL] * 3
    assert token_types[3:259] == [gguf.TokenType.BYTE] * 256
    assert set(token_types[259:]) == {gguf.TokenType.NORMAL}
    assert got["tokenizer.ggml.bos_token_id"] == ([T.UINT32], 1)
    assert got["tokenizer.ggml.eos_token_id"] == ([T.UINT32], 2)
    assert got["tokenizer.ggml.add_bos_token"] == ([T.BOOL], True)
    assert got["tokenizer.ggml.add_eos_token"] == ([T.BOOL], False)
    assert got["tokenizer.chat_template"] == ([T.STRING], LLAMA2_CHAT_TEMPLATE)


def test_sentencepiece_padded_to_config_vocab(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "spm", 400, pad=5)
    got = read_back(tmp_path, tokenizer_metadata(folder, config, "qwen2"), "qwen2")
    n = config["vocab_size"]
    tokens = got["tokenizer.ggml.tokens"][1]
    assert len(tokens) == n
    assert tokens[-5:] == [f"[PAD{i}]" for i in range(n - 5, n)]
    assert got["tokenizer.ggml.scores"][1][-5:] == [-10000.0] * 5
    assert got["tokenizer.ggml.token_type"][1][-5:] == [gguf.TokenType.UNUSED] * 5


def test_sentencepiece_added_tokens_and_prefix_space(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "spm", 400, pad=2)
    n = config["vocab_size"]
    write_json(folder / "added_tokens.json", {"<extra>": n - 2, "<beyond>": n + 7})
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config["add_prefix_space"] = False
    tokenizer_config["added_tokens_decoder"][str(n - 1)] = {
        "content": "\u2581user",
        "special": False,
    }
    write_json(folder / "tokenizer_config.json", tokenizer_config)
    kv = tokenizer_metadata(folder, config, "llama")
    assert next(iter(kv)) == "tokenizer.ggml.add_space_prefix"
    got = read_back(tmp_path, kv, "llama")
    assert got["tokenizer.ggml.add_space_prefix"] == ([T.BOOL], False)
    assert got["tokenizer.ggml.tokens"][1][-2:] == ["<extra>", " user"]
    assert got["tokenizer.ggml.token_type"][1][-2:] == [gguf.TokenType.USER_DEFINED] * 2
    assert got["tokenizer.ggml.scores"][1][-2:] == [-1000.0, -1000.0]


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_qwen2_bpe_keys_types_and_values(tmp_path: Path, arch: str) -> None:
    folder, config = model_folder(tmp_path, "qwen2", 600)
    kv = tokenizer_metadata(folder, config, arch, pre="qwen2")
    got = read_back(tmp_path, kv, arch)
    assert list(got) == [
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.add_eos_token",
        "tokenizer.chat_template",
    ]
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = {i: t for t, i in tokenizer["model"]["vocab"].items()}
    added = {t["id"]: t["content"] for t in tokenizer["added_tokens"]}
    assert got["tokenizer.ggml.model"] == ([T.STRING], "gpt2")
    assert got["tokenizer.ggml.pre"] == ([T.STRING], "qwen2")
    tokens = got["tokenizer.ggml.tokens"][1]
    assert tokens == [vocab.get(i, added.get(i)) for i in range(config["vocab_size"])]
    types, token_types = got["tokenizer.ggml.token_type"]
    assert types == [T.ARRAY, T.INT32]
    assert token_types == [gguf.TokenType.CONTROL if i in added else 1 for i in range(len(tokens))]
    types, merges = got["tokenizer.ggml.merges"]
    assert types == [T.ARRAY, T.STRING]
    assert merges == [" ".join(pair) for pair in tokenizer["model"]["merges"]]
    assert got["tokenizer.ggml.eos_token_id"] == ([T.UINT32], tokens.index("<|im_end|>"))
    assert got["tokenizer.ggml.padding_token_id"] == ([T.UINT32], tokens.index("<|endoftext|>"))
    assert got["tokenizer.ggml.bos_token_id"] == ([T.UINT32], config["bos_token_id"])
    assert got["tokenizer.ggml.add_bos_token"] == ([T.BOOL], False)
    assert got["tokenizer.ggml.add_eos_token"] == ([T.BOOL], False)
    assert got["tokenizer.chat_template"] == ([T.STRING], CHATML_TEMPLATE)


def test_llama3_bpe_under_llama(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "llama3", 600, pad=3)
    got = read_back(tmp_path, tokenizer_metadata(folder, config, "llama", pre="llama-bpe"), "llama")
    tokens = got["tokenizer.ggml.tokens"][1]
    assert got["tokenizer.ggml.pre"] == ([T.STRING], "llama-bpe")
    assert tokens[-3:] == [f"[PAD{i}]" for i in range(600, 603)]
    assert got["tokenizer.ggml.token_type"][1][-3:] == [gguf.TokenType.UNUSED] * 3
    assert got["tokenizer.ggml.bos_token_id"] == ([T.UINT32], tokens.index("<|begin_of_text|>"))
    assert got["tokenizer.ggml.eos_token_id"] == ([T.UINT32], tokens.index("<|eot_id|>"))
    assert got["tokenizer.ggml.add_bos_token"] == ([T.BOOL], True)
    assert got["tokenizer.ggml.add_eos_token"] == ([T.BOOL], False)
    assert got["tokenizer.ggml.add_sep_token"] == ([T.BOOL], False)
    assert got["tokenizer.chat_template"] == ([T.STRING], LLAMA3_CHAT_TEMPLATE)


def test_chat_template_jinja_file_when_the_config_has_none(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "qwen2", 500)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    del tokenizer_config["chat_template"]
    write_json(folder / "tokenizer_config.json", tokenizer_config)
    (folder / "chat_template.jinja").write_text("{{ messages[0]['content'] }}", encoding="utf-8")
    kv = tokenizer_metadata(folder, config, "qwen2", pre="qwen2")
    assert kv["tokenizer.chat_template"].value == "{{ messages[0]['content'] }}"


def test_known_hash_names_the_pre_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, config = model_folder(tmp_path, "llama3", 500)
    tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    ids = tokenizer.encode(bpe_pre.CHECK_TEXT).ids
    assert ids[0] == tokenizer.token_to_id("<|begin_of_text|>")  # specials are hashed too
    chkhsh = hashlib.sha256(str(ids).encode()).hexdigest()
    assert pre_hash(tokenizer) == chkhsh
    monkeypatch.setitem(bpe_pre.KNOWN_PRE_HASHES, chkhsh, "smollm")
    assert tokenizer_metadata(folder, config, "llama")["tokenizer.ggml.pre"].value == "smollm"


def test_pre_table_holds_the_hashes_of_llamacpp() -> None:
    table = bpe_pre.KNOWN_PRE_HASHES
    assert table["0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5"] == "llama-bpe"
    assert table["e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea"] == "qwen2"
    assert set(table.values()) <= bpe_pre.KNOWN_PRE_NAMES


def test_unknown_hash_without_pre_is_refused(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "qwen2", 500)
    chkhsh = pre_hash(tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")))
    with pytest.raises(ConvertError) as info:
        tokenizer_metadata(folder, config, "qwen2")
    message = str(info.value)
    assert str(folder / "tokenizer.json") in message and chkhsh in message
    assert "--gguf-pre" in message


def test_unknown_pre_name_lists_the_known_ones(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "qwen2", 500)
    with pytest.raises(ConvertError, match=r"unknown BPE pre-tokenizer 'qwen9'.*llama-bpe.*qwen2"):
        tokenizer_metadata(folder, config, "qwen2", pre="qwen9")


def test_pre_for_a_sentencepiece_tokenizer_is_refused(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "spm", 400)
    with pytest.raises(
        ConvertError, match=r"tokenizer.model: a sentencepiece tokenizer has no BPE"
    ):
        tokenizer_metadata(folder, config, "llama", pre="qwen2")


def test_no_tokenizer_files(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"tokenizer.json: not found"):
        tokenizer_metadata(tmp_path, {"vocab_size": 10}, "llama")


def test_unreadable_sentencepiece_model(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.model").write_bytes(b"\x00not a model")
    with pytest.raises(ConvertError, match=r"tokenizer.model: not a readable sentencepiece model"):
        tokenizer_metadata(tmp_path, {}, "llama")


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_broken_json(tmp_path: Path, name: str) -> None:
    folder, config = model_folder(tmp_path, "qwen2", 500)
    (folder / name).write_text('{"model": ', encoding="utf-8")
    with pytest.raises(ConvertError, match=rf"{name}: not valid JSON"):
        tokenizer_metadata(folder, config, "llama", pre="qwen2")


def test_tokenizer_json_the_library_cannot_read(tmp_path: Path) -> None:
    write_json(tmp_path / "tokenizer.json", {"model": {"type": "BPE", "vocab": 3}})
    with pytest.raises(ConvertError, match=r"tokenizer.json: not a readable tokenizers file"):
        tokenizer_metadata(tmp_path, {}, "qwen2", pre="qwen2")


def test_config_vocab_smaller_than_the_tokenizer(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "spm", 400)
    with pytest.raises(
        ConvertError, match=r"tokenizer.model: 400 pieces, more than .* vocab_size 399"
    ):
        tokenizer_metadata(folder, {**config, "vocab_size": 399}, "llama")
    folder, config = model_folder(tmp_path, "qwen2", 500)
    with pytest.raises(
        ConvertError, match=r"tokenizer.json: token id 499 is past .* vocab_size 450"
    ):
        tokenizer_metadata(folder, {**config, "vocab_size": 450}, "qwen2", pre="qwen2")


def test_unsupported_tokenizer_kinds_list_the_supported(tmp_path: Path) -> None:
    write_json(tmp_path / "tokenizer.json", {"model": {"type": "WordPiece", "vocab": {}}})
    with pytest.raises(ConvertError, match=r"whose model is not BPE .* supported: sentencepiece"):
        tokenizer_metadata(tmp_path, {}, "qwen2")
    write_json(
        tmp_path / "tokenizer.json",
        {"model": {"type": "BPE", "byte_fallback": True}, "decoder": {"type": "Sequence"}},
    )
    with pytest.raises(
        ConvertError, match=r"sentencepiece-style BPE tokenizer.json without tokenizer.model"
    ):
        tokenizer_metadata(tmp_path, {}, "llama")


def test_unsupported_architecture(tmp_path: Path) -> None:
    with pytest.raises(ConvertError, match=r"'no-such-arch'; supported: ") as err:
        tokenizer_metadata(tmp_path, {}, "no-such-arch")
    listed = str(err.value).split("supported: ")[1].split(", ")
    assert listed == sorted(listed) and {"deepseek2", "llama", "qwen2"} <= set(listed)


@pytest.mark.parametrize(("kind", "module"), [("spm", "sentencepiece"), ("qwen2", "tokenizers")])
def test_missing_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, module: str
) -> None:
    folder, config = model_folder(tmp_path, kind, 500)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(
        ConvertError, match=r"needs the .* package: pip install 'lazyparams\[llamacpp\]'"
    ):
        tokenizer_metadata(folder, config, "qwen2", pre="qwen2" if kind == "qwen2" else None)


def test_fixtures_report_their_real_size(tmp_path: Path) -> None:
    assert write_sentencepiece_tokenizer(tmp_path / "a", 450) == 450
    assert write_bpe_tokenizer(tmp_path / "b", 520, "llama3") == 520
    assert (tmp_path / "b" / "special_tokens_map.json").is_file()
    with pytest.raises(ValueError, match="style must be one of"):
        write_bpe_tokenizer(tmp_path / "c", 520, "gpt5")


def test_codellama_and_granite_vocab_quirks(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "spm", 400)
    kv = tokenizer_metadata(folder, {**config, "vocab_size": 32016}, "llama")
    # gguf-py's writer keys only CodeLlama's EOT (prefix/suffix/middle have no handler there)
    assert list(kv) == [*SPM_KEYS, "tokenizer.ggml.eot_token_id"]
    assert (kv["tokenizer.ggml.eot_token_id"].value, kv["tokenizer.ggml.eot_token_id"].type) == (
        32010,
        T.UINT32,
    )
    kv = tokenizer_metadata(folder, {**config, "vocab_size": 49152}, "llama")
    assert list(kv) == SPM_KEYS  # the flag is overwritten in place, as GGUFWriter does
    assert kv["tokenizer.ggml.add_bos_token"].value is False


def test_malformed_entries_are_named(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "spm", 400)
    with pytest.raises(
        ConvertError, match=r"config.json: vocab_size must be an integer, found '400'"
    ):
        tokenizer_metadata(folder, {**config, "vocab_size": "400"}, "llama")
    write_json(folder / "tokenizer_config.json", {"added_tokens_decoder": []})
    with pytest.raises(
        ConvertError, match=r"tokenizer_config.json: 'added_tokens_decoder' must be a JSON object"
    ):
        tokenizer_metadata(folder, config, "llama")
    write_json(folder / "tokenizer_config.json", {"added_tokens_decoder": {"x": {"content": "a"}}})
    with pytest.raises(
        ConvertError, match=r"tokenizer_config.json: added_tokens_decoder entry 'x'"
    ):
        tokenizer_metadata(folder, config, "llama")
    write_json(folder / "added_tokens.json", {"<a>": -1})
    with pytest.raises(ConvertError, match=r"added_tokens.json: token '<a>' has id -1"):
        tokenizer_metadata(folder, config, "llama")
    write_json(tmp_path / "tokenizer.json", {"model": "BPE"})
    with pytest.raises(
        ConvertError, match=r"tokenizer.json: 'model' must be a JSON object, found str"
    ):
        tokenizer_metadata(tmp_path, {}, "qwen2")


def test_moe_qwens_read_tokenizer_json_only(tmp_path: Path) -> None:
    folder, config = model_folder(tmp_path, "qwen2", 500)
    dense = tokenizer_metadata(folder, config, "qwen2", pre="qwen2")
    assert tokenizer_metadata(folder, config, "qwen2moe", pre="qwen2") == dense
    assert tokenizer_metadata(folder, config, "qwen3moe", pre="qwen2") == dense
    folder, config = model_folder(tmp_path, "spm", 400)
    with pytest.raises(ConvertError, match=r"tokenizer.json: not found"):
        tokenizer_metadata(folder, config, "qwen2moe")
