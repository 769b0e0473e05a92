"""Pre-quantized checkpoints dequantized inside the traced program: a Hugging Face folder whose
config.json claims a supported `quantization_config` brings a `DequantizeStep`, the first step
of any SPEC.

`scaled` pairs each weight with its scale, checking every name and shape against the
configuration before any data is read, and traces weight times scale as llama.cpp's converter
computes it; `target` is the step the engine composes with a SPEC. Imports the io layer and the
frontend's ops.
"""
