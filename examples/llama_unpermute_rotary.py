"""Undo the rotary permutation that Hugging Face's llama conversion applies to q and k, giving
back the interleaved layout of the original checkpoints; a reshape/transpose per head, traced
like any other op. Set HEADS and KV_HEADS for your model.

    lazyparams convert examples/llama_unpermute_rotary.py path/to/llama out.safetensors
"""

HEADS = 4
KV_HEADS = 4


def _unpermute(w, heads):
    """(heads * 2 * half, d) in halves-per-head order -> pairs interleaved per head."""
    rows, cols = w.shape
    half = rows // heads // 2
    return w.reshape(heads, 2, half, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def transform(params):
    """Every tensor passes through; q_proj and k_proj weights are unpermuted."""
    out = {}
    for name, value in params.items():
        if name.endswith("self_attn.q_proj.weight"):
            value = _unpermute(value, HEADS)
        elif name.endswith("self_attn.k_proj.weight"):
            value = _unpermute(value, KV_HEADS)
        out[name] = value
    return out
