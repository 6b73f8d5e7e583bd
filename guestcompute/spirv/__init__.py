"""SPIR-V, bytes in and bytes out: the compiler (``compiler.py``), the
content-addressed cache (``cache.py``), reflection (``reflect.py``) and the
capability checks against what the host enabled (``capabilities.py``)."""
