"""The program model: project index, per-module IR, entry points, and the interpreter."""
