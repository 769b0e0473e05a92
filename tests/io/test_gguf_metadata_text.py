"""`KEY[:TYPE]=VALUE`: every GGUF type spelled, types inferred without one, bad spellings."""

from __future__ import annotations

from typing import Any

import pytest
from gguf import GGUFValue
from gguf import GGUFValueType as T

from lazyparams.errors import CheckpointError
from lazyparams.io.gguf_metadata_text import METADATA_TYPES, parse_metadata_item

TYPED = [
    ("k:u8=255", GGUFValue(255, T.UINT8)),
    ("k:i8=-128", GGUFValue(-128, T.INT8)),
    ("k:u16=0x10", GGUFValue(16, T.UINT16)),
    ("k:i16=-3", GGUFValue(-3, T.INT16)),
    ("k:u32=4096", GGUFValue(4096, T.UINT32)),
    ("k:i32=-7", GGUFValue(-7, T.INT32)),
    ("k:u64=18446744073709551615", GGUFValue(2**64 - 1, T.UINT64)),
    ("k:i64=5", GGUFValue(5, T.INT64)),
    ("k:f32=1e-5", GGUFValue(1e-5, T.FLOAT32)),
    ("k:f64=0.1", GGUFValue(0.1, T.FLOAT64)),
    ("k:bool=True", GGUFValue(True, T.BOOL)),
    ("k:str=4096", GGUFValue("4096", T.STRING)),
    ("k:str=a=b", GGUFValue("a=b", T.STRING)),
    ("k:str=", GGUFValue("", T.STRING)),
    ("k:i32[]=[1, -2]", GGUFValue([1, -2], T.ARRAY, T.INT32)),
    ("k:f32[]=[1, 0.5]", GGUFValue([1.0, 0.5], T.ARRAY, T.FLOAT32)),
    ('k:str[]=["a", "b,c"]', GGUFValue(["a", "b,c"], T.ARRAY, T.STRING)),
    ("k:bool[]=[true, false]", GGUFValue([True, False], T.ARRAY, T.BOOL)),
]


@pytest.mark.parametrize(("text", "value"), TYPED)
def test_every_type_can_be_spelled(text: str, value: GGUFValue) -> None:
    assert parse_metadata_item(text) == ("k", value)


def test_the_spelling_covers_every_scalar_gguf_type() -> None:
    assert set(METADATA_TYPES.values()) == set(T) - {T.ARRAY}


INFERRED = [
    ("general.name=My model", GGUFValue("My model", T.STRING)),
    ("k=true", GGUFValue(True, T.BOOL)),
    ("k=FALSE", GGUFValue(False, T.BOOL)),
    ("k=4096", GGUFValue(4096, T.UINT32)),
    ("k=-1", GGUFValue(-1, T.INT64)),
    ("k=5000000000", GGUFValue(5000000000, T.INT64)),
    ("k=0.5", GGUFValue(0.5, T.FLOAT32)),
    ("k=1e6", GGUFValue(1e6, T.FLOAT32)),
    ("k=[1, 2]", GGUFValue([1, 2], T.ARRAY, T.UINT32)),
    ('k=["x"]', GGUFValue(["x"], T.ARRAY, T.STRING)),
    ("k=1.2.3", GGUFValue("1.2.3", T.STRING)),
    ("k=0x10", GGUFValue("0x10", T.STRING)),
]


@pytest.mark.parametrize(("text", "value"), INFERRED)
def test_types_are_inferred_without_one(text: str, value: GGUFValue) -> None:
    assert parse_metadata_item(text)[1] == value


BAD = [
    ("no-equals", "expected KEY=VALUE or KEY:TYPE=VALUE"),
    ("=5", "expected a non-empty string"),
    ("k:u99=1", "unknown type 'u99'; expected one of u8, i8"),
    ("k:u8=300", "expected a UINT8 in [0, 255], got 300"),
    ("k:u8=x", "expected a UINT8 number, got 'x'"),
    ("k:bool=maybe", "expected true or false, got 'maybe'"),
    ("k:i32[]=[1,", "expected a JSON list such as [1, 2]"),
    ("k:i32[]=5", "expected a JSON list such as [1, 2], got '5'"),
    ('k:i32[]=["a"]', "expected a INT32 value, got str"),
    ("k:i32[]=[]", "non-empty list"),
    ("k=[1,", "or KEY:str=VALUE for a string that starts with '['"),
    ("k=[[1]]", "not nested lists"),
    ("split.no=1", "written by the file format itself"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_spellings_say_what_was_expected(text: str, message: Any) -> None:
    with pytest.raises(CheckpointError) as caught:
        parse_metadata_item(text)
    assert message in str(caught.value) and repr(text) in str(caught.value)
