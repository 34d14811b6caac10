"""Small, flow-insensitive-by-default data flow over one module, and the views rules share.

- `core`: `flow(index)`, the module's `Flow` (cached on the index): source order of nodes, the
  function that owns a node, the uses of a local name or of `self.<attr>` across a class, the
  value that reaches a name.
- `dict_views`: `dict_view(data, expr, at)`, the keys of a `**kwargs` dict a call receives.
- `classes`: `callee_classes(data, func, at)`, what class a called expression may be, and
  `derives_from(...)`, whether a class derives from known bases through project classes.
- `order_flow`: `OrderFlow`, where the order of an order-unstable collection goes next (and
  `loop_order`, what a loop does with it).
- `elements`: `Elements`, what kind of elements a collection holds (strings, parameters), and
  `text_sources`, the strings that reading a text file or a JSON document yields.
- `hash_order`: the sets of such elements whose iteration order is used (TRP602, TRP603).

Everything answers from what is written in the module (`derives_from` also reads the project's
classes); when the evidence runs out the answer is "unknown", and rules stay silent on unknown.
Import from the modules themselves: this package exports nothing.
"""
