"""Fuzz cases: a seed checkpoint of one format with one to three mutations, made from a number.

`make_case(seeds, campaign_seed, index, format)` is deterministic: the same arguments give the
same files, so a finding is reproduced from its seed and index alone. Each format has a menu of
mutations on its files, its zip members, its index and its parts.
"""

from __future__ import annotations

import io
import json
import random
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from tests.fuzz import mutate_bytes as mb
from tests.fuzz.mutate_formats import gguf_field, npy_header, pickle_opcode
from tests.fuzz.mutate_json import mutate_json, parse, safetensors_header, safetensors_length
from tests.fuzz.seeds import FORMATS, Seed, Tree

ByteMutation = Callable[[random.Random, bytes], tuple[bytes, str]]
TreeMutation = Callable[[random.Random, Tree, list[Seed]], tuple[Tree, str]]
OUTPUT_FORMATS = ("safetensors", "npz", "npy", "gguf")


@dataclass(frozen=True, slots=True)
class Case:
    """One fuzz input: files to write, the entry to open, what was done, where to convert."""

    campaign_seed: int
    index: int
    format: str
    seed_name: str
    mutations: tuple[str, ...]
    files: Tree
    entry: str
    convert_to: str | None

    @property
    def label(self) -> str:
        return f"{self.format}#{self.campaign_seed}:{self.index}"


def _pick_file(rng: random.Random, tree: Tree, suffixes: tuple[str, ...] = ("",)) -> str:
    names = sorted(n for n in tree if n.endswith(suffixes)) or sorted(tree)
    return rng.choice(names)


def on_file(mutation: ByteMutation, suffixes: tuple[str, ...] = ("",)) -> TreeMutation:
    """A tree mutation applying `mutation` to one file (of one of `suffixes`)."""

    def apply(rng: random.Random, tree: Tree, others: list[Seed]) -> tuple[Tree, str]:
        name = _pick_file(rng, tree, suffixes)
        data, detail = mutation(rng, tree[name])
        return {**tree, name: data}, f"{name}: {mutation.__name__}: {detail}"

    return apply


def splice_file(rng: random.Random, tree: Tree, others: list[Seed]) -> tuple[Tree, str]:
    """One file spliced with a file of the same kind from another seed of the format."""
    name = _pick_file(rng, tree)
    suffix = name.rsplit(".", 1)[-1]
    pool = [(s.name, n, d) for s in others for n, d in s.files.items() if n.endswith(suffix)]
    if not pool:
        return on_file(mb.truncate)(rng, tree, others)
    seed_name, other_name, other = rng.choice(pool)
    data, detail = mb.splice(rng, tree[name], other)
    return {**tree, name: data}, f"{name}: {detail} {seed_name}/{other_name}"


# -- zip members --------------------------------------------------------------------------------


def _members(data: bytes) -> list[tuple[zipfile.ZipInfo, bytes]] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return [(info, archive.read(info)) for info in archive.infolist()]
    except Exception:
        return None


def _rezip(members: list[tuple[zipfile.ZipInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are one of the mutations
        with zipfile.ZipFile(buffer, "w") as archive:
            for info, data in members:
                archive.writestr(info, data)
    return buffer.getvalue()


_MEMBER_NAMES = ("../../x.npy", "a/../../b.npy", "/abs.npy", "x.npy/", "dup.npy", "a b.npy")
_MEMBER_NAMES += ("archive/data/9", "archive/data.pkl", "é.npy", "x" * 300 + ".npy", "")


def member_mutation(inner: ByteMutation, suffixes: tuple[str, ...]) -> ByteMutation:
    """A zip mutation applying `inner` to one member's content, or changing the member list."""

    def zip_member(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        members = _members(data)
        if not members:
            return mb.flip_bit(rng, data)
        names = [i for i, (info, _) in enumerate(members) if info.filename.endswith(suffixes)]
        i = rng.choice(names or range(len(members)))
        info, content = members[i]
        action = rng.choice(("content", "content", "content", "list"))
        if action == "content":
            new, detail = inner(rng, content)
            members[i] = (info, new)
            return _rezip(members), f"member {info.filename}: {detail}"
        return _change_members(rng, members, i)

    zip_member.__name__ = f"zip_member[{inner.__name__}]"
    return zip_member


def _change_members(rng: random.Random, members: list, i: int) -> tuple[bytes, str]:
    info, content = members[i]
    action = rng.choice(("duplicate", "drop", "rename", "recompress", "empty"))
    if action == "duplicate":
        members.append((info, content[: len(content) // 2] if rng.random() < 0.5 else content))
    elif action == "drop":
        del members[i]
    elif action == "rename":
        clone = zipfile.ZipInfo(rng.choice(_MEMBER_NAMES), info.date_time)
        clone.compress_type = info.compress_type
        members[i] = (clone, content)
    elif action == "recompress":
        stored = info.compress_type == zipfile.ZIP_STORED
        info.compress_type = zipfile.ZIP_DEFLATED if stored else zipfile.ZIP_STORED
    else:
        members[i] = (info, b"")
    return _rezip(members), f"member {info.filename}: {action}"


# -- folders: the index of a sharded checkpoint, the parts of a split GGUF ------------------------


def index_entry(rng: random.Random, tree: Tree, others: list[Seed]) -> tuple[Tree, str]:
    """The index's weight map pointing a tensor at itself, outside, nowhere or a shard twice."""
    name = _pick_file(rng, tree, (".json",))
    try:
        pairs = dict(parse(tree[name]))
        weight_map = {str(k): str(v) for k, v in dict(pairs["weight_map"]).items()}
    except (ValueError, KeyError, TypeError):
        return on_file(mutate_json)(rng, tree, others)
    if not weight_map:
        return on_file(mutate_json)(rng, tree, others)
    tensor = rng.choice(sorted(weight_map))
    targets = [
        name,
        "../" + weight_map[tensor],
        "/nonexistent/m.safetensors",
        "missing.safetensors",
    ]
    targets += [".", ""]
    targets += ["sub/../" + weight_map[tensor], weight_map[tensor] + "\x00", "a.gguf"]
    target = rng.choice([*targets, rng.choice(sorted(set(weight_map.values())))])
    if rng.random() < 0.3:
        weight_map[f"{tensor}.extra"] = target
    else:
        weight_map[tensor] = target
    pairs["weight_map"] = weight_map
    return {
        **tree,
        name: json.dumps(pairs).encode(),
    }, f"{name}: weight_map[{tensor!r}] = {target!r}"


def folder_files(rng: random.Random, tree: Tree, others: list[Seed]) -> tuple[Tree, str]:
    """A file dropped, copied under another name, renamed, or emptied."""
    name = _pick_file(rng, tree)
    action = rng.choice(("drop", "copy", "rename", "empty"))
    out = dict(tree)
    renamed = rng.choice(("sub/" + name, name + ".npy", "a.b.npy", "m-00009-of-00002.gguf"))
    renamed = rng.choice((renamed, "m-00001-of-00001.gguf", ".hidden.npy", "x.NPY", "é.npy"))
    if action == "drop" and len(out) > 1:
        del out[name]
    elif action == "copy":
        out[renamed] = tree[name]
    elif action == "rename":
        out[renamed] = out.pop(name)
    else:
        out[name] = b""
    return out, f"{name}: {action}" + (f" as {renamed}" if action in ("copy", "rename") else "")


def _generic(suffixes: tuple[str, ...] = ("",)) -> list[tuple[float, TreeMutation]]:
    menu = [(1.0, on_file(m, suffixes)) for m in mb.BYTE_MUTATIONS]
    return [*menu, (1.5, splice_file)]


_ZIP_NPY = member_mutation(npy_header, (".npy",))
_ZIP_BYTES = member_mutation(mb.truncate, ("",))
_ZIP_PICKLE = member_mutation(pickle_opcode, ("data.pkl",))
_ZIP_STORAGE = member_mutation(mb.truncate, ("/data/0", "/data/1", "/data/2"))
MENUS: dict[str, list[tuple[float, TreeMutation]]] = {
    "safetensors": [
        *_generic(),
        (5, on_file(safetensors_header)),
        (1, on_file(safetensors_length)),
    ],
    "sharded": [
        *_generic(),
        *[
            (3, on_file(safetensors_header, (".safetensors",))),
            (3, on_file(mutate_json, (".json",))),
        ],
        *[(3, index_entry), (1, folder_files)],
    ],
    "npz": [
        *_generic(),
        *[(3, on_file(mb.zip_field)), (4, on_file(_ZIP_NPY)), (1, on_file(_ZIP_BYTES))],
        (1, on_file(member_mutation(mb.flip_bit, ("",)))),
    ],
    "npy": [*_generic(), (5, on_file(npy_header)), (1, folder_files)],
    "torch": [
        *_generic(),
        *[(3, on_file(mb.zip_field)), (5, on_file(_ZIP_PICKLE)), (1, on_file(_ZIP_STORAGE))],
        (1, on_file(member_mutation(mb.flip_bit, ("",)))),
    ],
    "gguf": [*_generic(), (6, on_file(gguf_field))],
    "split-gguf": [*_generic(), (5, on_file(gguf_field)), (2, folder_files)],
    "merge": [
        *_generic(),
        *[(6, on_file(mb.truncate, (".yml",))), (4, on_file(mb.flip_bit, (".yml",)))],
        (2, on_file(safetensors_header, (".safetensors",))),
        (1, folder_files),
    ],
}
assert set(MENUS) == set(FORMATS)


def make_case(
    seeds: list[Seed], campaign_seed: int, index: int, format: str, convert_every: int = 8
) -> Case:
    """The `index`-th case of `format` in the campaign `campaign_seed`."""
    rng = random.Random(f"{campaign_seed}/{format}/{index}")
    mine = [s for s in seeds if s.format == format]
    seed = rng.choice(mine)
    others = [s for s in mine if s is not seed] or mine
    weights, mutations = zip(*MENUS[format], strict=True)
    tree, done = dict(seed.files), []
    for _ in range(rng.choice((1, 1, 1, 1, 2, 3))):
        mutation = rng.choices(mutations, weights)[0]
        try:
            tree, detail = mutation(rng, tree, others)
        except Exception as err:
            detail = f"(a mutation found nothing it could parse: {type(err).__name__})"
        done.append(detail)
    outputs = ("gguf",) if "gguf" in format else OUTPUT_FORMATS  # the q8_0 seed tensor
    convert_to = rng.choice(outputs) if index % convert_every == 0 else None
    return Case(campaign_seed, index, format, seed.name, tuple(done), tree, seed.entry, convert_to)
