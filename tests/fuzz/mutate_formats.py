"""Format-aware mutations: .npy headers, torch pickles (opcode by opcode) and GGUF header fields.

Each takes a `random.Random` and one file's (or zip member's) bytes and returns new bytes and
a description. They change what a reader parses (dict literals, opcodes, counts, lengths,
types, dims, offsets) rather than random bytes, so the reader's checks are reached.
"""

from __future__ import annotations

import ast
import pickletools
import random
import struct

from tests.fuzz.mutate_bytes import extremes, flip_bit
from tests.fuzz.mutate_json import HOSTILE_NAMES

# -- .npy headers --------------------------------------------------------------------------------

_NPY_SHAPES = [(), (0,), (-1,), (2**31,), (2**63,), (2**70, 0), (0, 2**70), (1,) * 100]
_NPY_SHAPES += [(2**32, 2**32), (3, 4, 5, 6), (2**62, 4), (1, -5)]
_NPY_DESCRS = ["<f4", ">f8", "|b1", "<U4", "|O", "<c16", "|V8", "<M8[s]", "<f2", "x", "", "<i8"]
_NPY_DESCRS += ["|u1", "<f16", "|S3", ">i4"]


def _npy_parts(data: bytes) -> tuple[int, int, bytes, bytes] | None:
    """(major version, length-field width, header text, body) of a .npy file, or None."""
    if len(data) < 10 or not data.startswith(b"\x93NUMPY"):
        return None
    width = 2 if data[6] == 1 else 4
    (length,) = struct.unpack("<H" if width == 2 else "<I", data[8 : 8 + width])
    start = 8 + width
    return data[6], width, data[start : start + length], data[start + length :]


def _npy_join(version: int, width: int, header: str, body: bytes) -> bytes:
    """A .npy file of `header` (padded to a 64-byte boundary as numpy does) and `body`."""
    text = header.encode("latin-1", "replace")
    pad = -(8 + width + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    length = struct.pack("<H" if width == 2 else "<I", len(text) % (1 << 8 * width))
    return b"\x93NUMPY" + bytes([version, 0]) + length + text + body


def _npy_dict_change(rng: random.Random, fields: dict) -> str:
    key = rng.choice(("shape", "shape", "descr", "fortran_order", "drop", "extra"))
    if key == "shape":
        fields["shape"] = rng.choice(_NPY_SHAPES)
    elif key == "descr":
        fields["descr"] = rng.choice([*_NPY_DESCRS, [("a", "<f4")], 5])
    elif key == "fortran_order":
        fields["fortran_order"] = rng.choice((True, 1, "no", None))
    elif key == "drop":
        fields.pop(rng.choice(sorted(fields)), None)
    else:
        fields[rng.choice(HOSTILE_NAMES)] = 1
    return f"{key} -> {fields.get(key, '')!r}"[:120]


def npy_header(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A .npy file with its header dict, raw header text or version/length field changed."""
    parts = _npy_parts(data)
    if parts is None:
        return flip_bit(rng, data)
    version, width, header, body = parts
    roll = rng.random()
    if roll < 0.6:
        try:
            fields = ast.literal_eval(header.decode("latin-1"))
        except (ValueError, SyntaxError):
            return flip_bit(rng, data)
        detail = _npy_dict_change(rng, fields)
        return _npy_join(version, width, repr(fields), body), f"npy header {detail}"
    if roll < 0.8:
        text = rng.choice(
            [
                "(" * 5000 + ")" * 5000,
                "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "9" * 5000 + ",)}",
                "__import__('os').getcwd()",
                "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,)}",
                "[1, 2]",
                "{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4]}",
            ]
        )
        return _npy_join(version, width, text, body), f"npy raw header {text[:50]!r}"
    field = rng.choice(("version", "length"))
    if field == "version":
        value = rng.choice((0, 2, 3, 4, 255))
        return data[:6] + bytes([value]) + data[7:], f"npy version {version} -> {value}"
    value = rng.choice(extremes(width))
    new = value.to_bytes(width, "little")
    return data[:8] + new + data[8 + width :], f"npy header length -> {value}"


# -- torch pickles --------------------------------------------------------------------------------

_GLOBALS = [("os", "system"), ("builtins", "eval"), ("builtins", "getattr"), ("posix", "system")]
_GLOBALS += [("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter")]
_GLOBALS += [("collections", "OrderedDict"), ("torch", "FloatStorage"), ("torch", "HalfStorage")]
_GLOBALS += [("torch", "BFloat16Storage"), ("torch._utils", "_rebuild_tensor_v3")]
_GLOBALS += [("torch", "float32"), ("builtins", "set"), ("torch", "UntypedStorage")]


def _binint(value: int) -> bytes:
    """The shortest opcode pushing `value` (a LONG1 beyond 32 bits)."""
    if -(2**31) <= value < 2**31:
        return b"J" + struct.pack("<i", value)
    size = (value.bit_length() + 8) // 8
    return b"\x8a" + bytes([size]) + value.to_bytes(size, "little", signed=True)


def _unicode(data: bytes) -> bytes:
    return b"X" + struct.pack("<I", len(data)) + data


def _extra_item(rng: random.Random) -> tuple[bytes, str]:
    """Opcodes of one (key, value) pair to add to the state dict, and what it is."""
    depth = rng.choice((100, 1000, 5000, 50_000))
    kind = rng.choice(("nest-list", "nest-dict", "self", "build", "set", "name"))
    key = _unicode(b"extra")
    if kind == "nest-list":
        return key + b"]" * depth + b"a" * (depth - 1), f"list nested {depth} deep"
    if kind == "nest-dict":
        return key + (b"}" + _unicode(b"k")) * depth + b"}" + b"s" * depth, f"dicts {depth} deep"
    if kind == "self":
        return key + b"h\x00", "the state dict inside itself"
    if kind == "build":
        state = b"(N}" + _unicode(b"__defaults__") + b"(J\x07\x00\x00\x00ts" + b"t"
        target = b"ctorch._utils\n_rebuild_tensor_v2\n"
        return key + target + state + b"b", "BUILD setting __defaults__ of an allowed function"
    if kind == "set":
        return key + b"\x8f(J\x01\x00\x00\x00\x90", "a set value"
    name = rng.choice(HOSTILE_NAMES).encode("utf-8", "surrogatepass")
    return _unicode(name) + b"N", f"key {name[:30]!r} -> None"


def pickle_opcode(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A pickle with one opcode's argument replaced, an opcode removed or an item added."""
    try:
        ops = list(pickletools.genops(data))
    except Exception:
        return flip_bit(rng, data)
    ends = [pos for _, _, pos in ops[1:]] + [len(data)]
    spans = [(op, arg, pos, end) for (op, arg, pos), end in zip(ops, ends, strict=True)]
    roll = rng.random()
    if roll < 0.3:
        ints = [s for s in spans if s[0].name in ("BININT", "BININT1", "BININT2", "LONG1")]
        if ints:
            op, arg, pos, end = rng.choice(ints)
            value = rng.choice([0, -1, 2**31, 2**32, 2**63, -(2**63), 2**70, 2**2000, 10**12])
            return data[:pos] + _binint(value) + data[end:], f"int {arg} at {pos} -> {value}"
    if roll < 0.45:
        texts = [s for s in spans if s[0].name in ("BINUNICODE", "SHORT_BINUNICODE")]
        if texts:
            op, arg, pos, end = rng.choice(texts)
            new = rng.choice(HOSTILE_NAMES).encode("utf-8", "surrogatepass")
            new = rng.choice((new, b"\xff\xfe", b"a.b", str(arg).encode() + b".x"))
            return data[:pos] + _unicode(new) + data[end:], f"text {arg!r} -> {new[:30]!r}"
    if roll < 0.6:
        globs = [s for s in spans if s[0].name in ("GLOBAL", "STACK_GLOBAL")]
        if globs:
            op, arg, pos, end = rng.choice(globs)
            module, name = rng.choice(_GLOBALS)
            new = b"c" + f"{module}\n{name}\n".encode()
            return data[:pos] + new + data[end:], f"global {arg!r} -> {module}.{name}"
    if roll < 0.85:
        return _add_item(rng, data, spans)
    op, arg, pos, end = rng.choice(spans)
    if rng.random() < 0.5:
        return data[:pos] + data[end:], f"drop opcode {op.name} at {pos}"
    return data[:end] + data[pos:end] + data[end:], f"repeat opcode {op.name} at {pos}"


def _add_item(rng: random.Random, data: bytes, spans: list) -> tuple[bytes, str]:
    """Memoize the top-level dict and add one hostile item right after its MARK."""
    marks = [s for s in spans if s[0].name == "MARK"]
    dicts = [s for s in spans if s[0].name == "EMPTY_DICT"]
    if not marks or not dicts:
        return flip_bit(rng, data)
    first_dict, mark = dicts[0], next((m for m in marks if m[2] > dicts[0][2]), marks[0])
    item, detail = _extra_item(rng)
    memo = b"q\x00"
    head = data[: first_dict[3]] + memo + data[first_dict[3] : mark[3]]
    return head + item + data[mark[3] :], f"state dict gets {detail}"


# -- GGUF header fields ---------------------------------------------------------------------------

_SCALAR_WIDTH = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class _GGUFWalk:
    """Walks a GGUF header, recording (offset, width, kind) of every integer field it passes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at, self.fields = data, 0, []

    def take(self, width: int, kind: str) -> int:
        if self.at + width > len(self.data):
            raise ValueError("short")
        self.fields.append((self.at, width, kind))
        value = int.from_bytes(self.data[self.at : self.at + width], "little")
        self.at += width
        return value

    def string(self, kind: str) -> None:
        self.at += self.take(8, f"{kind} length")

    def value(self, kind: int, where: str) -> None:
        if kind == 8:
            self.string(f"{where} string")
        elif kind == 9:
            inner, count = self.take(4, f"{where} array type"), self.take(8, f"{where} array len")
            for _ in range(min(count, 4096)):
                self.value(inner, where)
        else:
            self.take(_SCALAR_WIDTH.get(kind, 4), f"{where} value")

    def walk(self) -> list[tuple[int, int, str]]:
        self.at = 4
        self.take(4, "version")
        tensors, kvs = self.take(8, "tensor count"), self.take(8, "kv count")
        for _ in range(min(kvs, 4096)):
            self.string("key")
            self.value(self.take(4, "value type"), "kv")
        for _ in range(min(tensors, 4096)):
            self.string("tensor name")
            for _ in range(min(self.take(4, "n_dims"), 8)):
                self.take(8, "dim")
            self.take(4, "ggml type")
            self.take(8, "tensor offset")
        return self.fields


def gguf_fields(data: bytes) -> list[tuple[int, int, str]]:
    """The integer fields of a GGUF header, as far as it parses."""
    walker = _GGUFWalk(data)
    try:
        return walker.walk()
    except ValueError:
        return walker.fields


def gguf_field(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A GGUF file with one header integer (count, length, type, dim, offset) changed."""
    fields = gguf_fields(data)
    if not fields:
        return flip_bit(rng, data)
    at, width, kind = rng.choice(fields)
    old = int.from_bytes(data[at : at + width], "little")
    choices = [*extremes(width), old + 1, old - 1, old * 2, len(data), old + 32, 30, 31, 39]
    value = rng.choice(choices) % (1 << 8 * width)
    out = data[:at] + value.to_bytes(width, "little") + data[at + width :]
    return out, f"gguf {kind} at {at}: {old} -> {value}"
