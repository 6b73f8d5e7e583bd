"""Network weights from outside: safetensors files (``safetensors.py``,
numpy only) and torch-style state dicts turned into the fused MLP's dense
layers (``dense_layers.py``).

Nothing is imported here, so reading a file imports no Vulkan.
"""
