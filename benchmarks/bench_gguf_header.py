"""Benchmark: reading GGUF headers, lazyparams' bounded reader vs the `gguf` package's GGUFReader.

Two files, written once: a llama-like 1B model (16 layers, about 150 tensors of their real
shapes; the data area is a sparse file, so it costs no disk) and a tokenizer of `--vocab`
tokens (tokens, scores, token types and merges: four arrays of that many items). Each reader
opens each file: GGUFReader, then every pair's `ReaderField.contents`; `read_gguf_metadata`
(every pair as Python values); `GGUFSource`, as a conversion opens a file. Best of `--runs`;
peak Python allocation from tracemalloc in a second pass. Prints a markdown table.

    python benchmarks/bench_gguf_header.py --vocab 151936 --runs 5
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader, GGUFWriter

from lazyparams.io import GGUFSource, read_gguf_metadata

MIB = 1 << 20


def write_model(path: Path, layers: int = 16, width: int = 2048, ffn: int = 8192) -> None:
    """A 1B-like GGUF: every tensor info of a llama model, the data area left sparse."""
    writer = GGUFWriter(path, "llama")
    writer.add_block_count(layers)
    shapes = {"token_embd.weight": (32000, width), "output_norm.weight": (width,)}
    for layer in range(layers):
        for name, shape in _layer_shapes(width, ffn).items():
            shapes[f"blk.{layer}.{name}"] = shape
    f16 = np.dtype(np.float16)
    for name, shape in shapes.items():
        writer.add_tensor_info(name, shape, f16, int(np.prod(shape)) * 2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    header_end = writer.fout[0].tell() if writer.fout else 0
    writer.close()
    data = sum(GGUFWriter.ggml_pad(int(np.prod(s)) * 2, 32) for s in shapes.values())
    with open(path, "r+b") as file:
        file.truncate(GGUFWriter.ggml_pad(header_end, 32) + data)


def _layer_shapes(width: int, ffn: int) -> dict[str, tuple[int, ...]]:
    return {
        "attn_norm.weight": (width,),
        "attn_q.weight": (width, width),
        "attn_k.weight": (width // 4, width),
        "attn_v.weight": (width // 4, width),
        "attn_output.weight": (width, width),
        "ffn_norm.weight": (width,),
        "ffn_gate.weight": (ffn, width),
        "ffn_up.weight": (ffn, width),
        "ffn_down.weight": (width, ffn),
    }


def write_tokenizer(path: Path, vocab: int) -> None:
    """A GGUF holding only a BPE tokenizer of `vocab` tokens (no tensors)."""
    rng = np.random.default_rng(0)
    writer = GGUFWriter(path, "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(
        [f"tok{i}_{'x' * int(n)}" for i, n in enumerate(rng.integers(0, 9, vocab))]
    )
    writer.add_token_scores(rng.standard_normal(vocab).astype(np.float32).tolist())
    writer.add_token_types([1] * vocab)
    writer.add_token_merges([f"a{i} b{i}" for i in range(vocab)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()


def with_gguf_package(path: Path) -> int:
    """GGUFReader, then every field's contents as Python values."""
    reader = GGUFReader(path)
    values = [field.contents() for field in reader.fields.values()]
    return len(values) + len(reader.tensors)


def with_lazyparams(path: Path) -> int:
    """lazyparams' metadata reader: the bounded header, every value as Python values."""
    return len(read_gguf_metadata(path, include_split=True))


def with_lazyparams_source(path: Path) -> int:
    """lazyparams' GGUFSource, as a conversion opens it (arrays of numbers stay numpy)."""
    with GGUFSource(path) as source:
        return len(source.names())


READERS: dict[str, Callable[[Path], int]] = {
    "gguf.GGUFReader": with_gguf_package,
    "lazyparams metadata": with_lazyparams,
    "lazyparams GGUFSource": with_lazyparams_source,
}


def best_time(read: Callable[[Path], int], path: Path, runs: int) -> float:
    """The fastest of `runs` reads, in seconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        read(path)
        times.append(time.perf_counter() - start)
    return min(times)


def peak_allocation(read: Callable[[Path], Any], path: Path) -> int:
    """Peak bytes of Python allocations during one read."""
    tracemalloc.start()
    try:
        read(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        files = {"1B model": Path(folder, "model.gguf"), "tokenizer": Path(folder, "tok.gguf")}
        write_model(files["1B model"])
        write_tokenizer(files["tokenizer"], args.vocab)
        print("| file | reader | best s | peak alloc MiB | time vs gguf |")
        print("|---|---|---|---|---|")
        for label, path in files.items():
            base = None
            for name, read in READERS.items():
                seconds = best_time(read, path, args.runs)
                base = base or seconds
                peak = peak_allocation(read, path) / MIB
                print(f"| {label} | {name} | {seconds:.4f} | {peak:.1f} | {seconds / base:.2f} |")


if __name__ == "__main__":
    main()
