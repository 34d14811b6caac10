"""The program model: project index, per-module IR, entry points, and the interpreter.

- index: `ProjectIndex`, every module of the project and name resolution; module_finder: finding
  the module an import names; modules: `ProjectModule` and `Symbol`;
- reads: what running code reads of modules, recorded for caching its results;
- ir, extract/: the IR and the lowering of a module's CST into it; known_apis: the external APIs
  that seed, claim, draw or use CUDA;
- programs: the entry points; interpreter/: the abstract run of each program;
- summaries: small facts of another module, kept by its content; uses: where the project uses
  a function or class (for the op rules).
"""
