"""Writing fixes back: the edits rules attach to findings (rules/edits.py builds them) applied to a
text (apply.py) or a notebook's cells (notebook_cells.py), noqa comments (noqa.py), and the --fix
loop over a whole run (runner.py)."""
