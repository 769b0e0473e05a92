"""PEFT LoRA adapters: merged into their base model (`LoraStep`, the first step of any SPEC)
and extracted from a fine-tuned model (`extract`).

`binding` reads the adapters' tensor names against the base, checking every shape, rank and
dtype before any data is read; `merge` traces the merge as PEFT's `merge_and_unload` computes
it; `target` is the step the engine composes with a SPEC. Imports the io layer and the
frontend's ops.
"""
