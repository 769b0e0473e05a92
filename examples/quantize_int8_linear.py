"""Quantize the linear weights of a llama checkpoint to int8, one float32 scale per output
channel (`<name>_scale`); embeddings, norms and lm_head stay float16.

    lazyparams convert examples/quantize_int8_linear.py path/to/llama out/
"""

from lazyparams.frontend import ops


def transform(params):
    """int8 for every `*_proj.weight`, float16 for everything else."""
    out = {}
    for name, value in params.items():
        if name.endswith("_proj.weight"):
            out[name], out[f"{name}_scale"] = ops.quantize_int8(value, axis=0)
        else:
            out[name] = value.astype("float16")
    return out
