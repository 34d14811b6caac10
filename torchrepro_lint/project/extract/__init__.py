"""Lowering one module's CST into the program-model IR (see ir.py).

- ``lowering``: ``Lowering``, the module's top level, functions, classes, statements and the
  values conditions and assignments read;
- ``calls``: what one call becomes: effects of the external APIs known_apis.py lists (seeds,
  claims, draws, CUDA use...), the look-alikes that are none, and calls that may reach project
  code (``ir.Call``, for the interpreter to resolve);
- ``call_syntax``: what a call says by its own syntax (pretrained weights, a generator of its
  own, the names it reads), and whether a qualified name may be project code;
- ``devices``: whether an expression names a CUDA device, or a test of it left for the run;
- ``attributes``: the values an attribute (``self.device``, ``cfg.device``) may hold;
- ``adapters``: what PEFT adapter configurations draw;
- ``resumes``: optimizer and RNG state restores, optimizer steps and frameworks' resumes (TRP108),
  and `exec` of a configuration file at a module's top level;
- ``function_reuse``: an edited module's functions whose IR the previous lowering still gives.
- ``empty_init``: `with` blocks that build models sparing their init (the meta device, empty
  init), the init marks that say what still draws there, and loops whose processes take turns.
"""
