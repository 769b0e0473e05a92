"""llama.cpp's GGUF files from Hugging Face model folders: names, transforms, metadata, tokenizer.

One table per architecture says how each Hugging Face tensor becomes a GGUF tensor and which
config keys become which GGUF metadata. Imports the frontend and io layers only.
"""
