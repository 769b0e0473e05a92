"""smollm3: SmolLM3ForCausalLM. Llama's tensors and rotary permutation under llama.cpp's own
architecture name, which runs every fourth layer without rotary embedding (llama.cpp fixes the
interval itself: the converter writes no key for it). The converter's SmolLM3 class is its llama
class: llama's metadata (`vocab_size`, `rope.dimension_count`), vocabulary and llama 3 rope
factors. Imports the tables and the llama table.
"""

from lazyparams.targets.llamacpp.llama import DENSE_MLP, LAYER_RULES, OPTIONAL_BIASES, OUTER
from lazyparams.targets.llamacpp.tables import Architecture, layer_tensors

ARCH = Architecture(
    gguf_arch="smollm3",
    hf_names=("SmolLM3ForCausalLM",),
    tensors=(*OUTER, *layer_tensors("model.layers", LAYER_RULES + DENSE_MLP), *OPTIONAL_BIASES),
    extra_hparams=("vocab_size", "rope.dimension_count"),
    llama3_rope_freqs=True,
)
