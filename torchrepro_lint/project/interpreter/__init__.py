"""The abstract interpreter: what a program seeds, claims and draws, on which paths, in what order.

A program is an entry point plus everything reachable from it. The interpreter walks the entry's
statements, inlining calls to project functions with their literal arguments bound (so
`init_seeds(0, deterministic=True)` turns on the branch inside), running imported project
modules' top levels once, and splitting the path state at branches whose condition it cannot
decide. Two mechanisms keep it precise on real code:

- assumptions: a runtime condition (`args.deterministic`) gets one truth value per path, so
  `if args.deterministic: ... else: cudnn.benchmark = True` never puts both on one path, and
  `benchmark = not args.deterministic` is False wherever the claim was made;
- guards: each switch remembers the runtime conditions it was set under, so two switches under
  independent flags (`if cfg.benchmark:` / `if args.deterministic:`) are not reported together.

Modules:

- ``run``: ``Interpreter``, the abstract run itself: statements, effects, values, spawns;
- ``calls``: how the run goes into project code: calls of functions, methods and constructors,
  and imported modules' top levels;
- ``states``: what a run carries and gathers: path states and how they split and join again,
  ``Facts``, call frames, and the bounds that keep a run finite;
- ``recordings``: an import walk (or a run of callbacks) recorded in one program and replayed,
  re-anchored, in the next;
- ``kept_calls``: in the language server, the calls an entry program makes into the rest of the
  project, recorded in one analysis and replayed in the next where they are the same;
- ``moved``: such a recording put on the next analysis's module objects and node refs;
- ``inert``: imports whose top levels do nothing tracked, taken without a walk;
- ``devices``: device tests the lowering leaves to the run (an attribute of a class of another
  module, one stored on an object from outside its class);
- ``resumes``: a resumed run along a path (TRP108): an optimizer's state restored, then training,
  with no RNG state restored.
- ``empty_init``: the `with` contexts open on a path that spare a model's init (the meta device,
  empty init), and the draws they spare.
"""
