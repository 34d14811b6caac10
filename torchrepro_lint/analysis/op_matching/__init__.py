"""Op matching: which op-catalogue entries each call of a module reaches (TRP401, TRP402).

- ``matcher``: ``ops_in`` and ``OpMatch``, the catalogue's predicates evaluated on a call;
- ``calls``: which catalogue API a call is (function, module or tensor method) and its inputs;
- ``values``: the arguments a call passes and the Python values they may hold;
- ``gradients``: where nothing is differentiated in one module (``GradContext``);
- ``requires_grad``: the ``requires_grad`` condition of a call (``RequiresGrad``), with what the
  rest of the project shows;
- ``order_independent``: scatters and index writes whose result is the same in any order;
- ``distinct_indices``: index tensors whose entries cannot repeat (``arange``, ``argsort``, ...).
"""
