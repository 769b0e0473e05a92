"""Fuse a Hugging Face llama checkpoint for inference: q/k/v and gate/up become one matrix each,
every linear weight is stored (in, out) for `x @ w`, and everything is cast to float16.

    lazyparams plan examples/llama_fuse_qkv.py path/to/llama
    lazyparams convert examples/llama_fuse_qkv.py path/to/llama out/ --shard-size 2GiB
"""

from lazyparams.frontend import ops

PREFIX = "model.layers.{}."


def transform(params):
    """Map every input tensor to its output; tensors not named here pass through cast."""
    out = {}
    layer = 0
    while f"{PREFIX.format(layer)}self_attn.q_proj.weight" in params:
        p = PREFIX.format(layer)
        attn, mlp = f"{p}self_attn.", f"{p}mlp."
        qkv = [params[f"{attn}{n}_proj.weight"] for n in "qkv"]
        out[f"{attn}qkv_proj.weight"] = ops.concat(qkv, axis=0).T
        out[f"{attn}o_proj.weight"] = params[f"{attn}o_proj.weight"].T
        gate_up = [params[f"{mlp}{n}_proj.weight"] for n in ("gate", "up")]
        out[f"{mlp}gate_up_proj.weight"] = ops.concat(gate_up, axis=0).T
        out[f"{mlp}down_proj.weight"] = params[f"{mlp}down_proj.weight"].T
        for norm in ("input_layernorm", "post_attention_layernorm"):
            out[f"{p}{norm}.weight"] = params[f"{p}{norm}.weight"]
        layer += 1
    for name in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"):
        if name in params:
            out[name] = params[name]
    return {name: value.astype("float16") for name, value in out.items()}
