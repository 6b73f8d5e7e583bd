"""guestcompute's benchmark suite: ``python -m benchmarks.run``, ``make bench``
or ``guestcompute bench``.

Every number is printed next to a baseline measured in the same run on the
same machine — a raw-cffi loop, a pattern other libraries use, copy
bandwidth, numpy or torch — because absolute times on shared machines are
noise and only ratios carry over.

A benchmark module exposes ``run(env) -> list[benchmarks.results.Result]``;
``env`` has ``quick`` (smaller sizes, fewer repeats), ``device`` (a name
substring or index, or None for the best device) and ``out`` (the output
folder, for modules that start helper processes). ``run.py`` lists the
modules and writes the JSON, markdown and PNG report.
"""
