"""Lowering one module's CST into the program-model IR (see ir.py).

- ``lowering``: ``Lowering``, the module's top level, functions, classes, statements and the
  values conditions and assignments read;
- ``calls``: what one call becomes: effects of the external APIs known_apis.py lists (seeds,
  claims, draws, CUDA use...), the look-alikes that are none, and calls that may reach project
  code (``ir.Call``, for the interpreter to resolve);
- ``literals``: the literal values the syntax tree spells out (``literal_value``, ``is_none``,
  ``is_false``).
"""
