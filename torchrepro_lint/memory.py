"""Giving freed memory back to the operating system during long runs.

Parsing churns through far more memory than it keeps: LibCST's native parser and CPython's
compiler allocate with the C allocator, and the trees released over budget are freed in the
middle of the heap, where glibc keeps the pages for later instead of returning them. On
torch's source that kept the resident size at about three times the live heap.
`malloc_trim(0)` hands those pages back; it costs about 5 ms, so it runs once per
`TRIM_AFTER` characters of source parsed or checked, and after each parse of a large file
(LARGE_PARSE) and after each large message between processes, never on a short run of small
files (the flake8 plugin, a one-file check).

The cycle collector's thresholds for a process that keeps it on (RUN_GC_THRESHOLDS) are here too:
the command line, the language server and the flake8 plugin share them.
"""

from __future__ import annotations

import sys

TRIM_AFTER = 2_000_000
# LibCST's native parser needs far more memory than the tree it returns, for a moment: on
# torch's source 140 MB for a 400 KB module, 640 MB for 500 KB of literals. Freed, those pages
# stayed with the C library while the heap grew elsewhere; a parse this large gives them back
# at once.
LARGE_PARSE = 100_000
_since_trim = 0
_trim = None  # the C function, looked up on first use (ctypes is not imported on short runs)

# A run allocates millions of long-lived tree nodes: with the default thresholds, full
# collections walk every tree again and again (13 of 31 CPU seconds on a 315-file repository).
# `cli.run` turns automatic collection off; a process that is not ours (the flake8 plugin's, the
# language server) gets these rare collections instead.
RUN_GC_THRESHOLDS = (50_000, 20, 100)


def churned(chars: int) -> None:
    """`chars` characters of source were parsed or checked: trim when enough have been."""
    global _since_trim
    _since_trim += chars
    if _since_trim >= TRIM_AFTER:
        _since_trim = 0
        give_back()


def parsed(chars: int) -> None:
    """A parse of `chars` characters has ended: give its scratch memory back if it was large."""
    if chars >= LARGE_PARSE:
        give_back()


def after_message() -> None:
    """A large message between the processes of a sharded run (shards/) was sent or received:
    its buffers were freed in the middle of the heap. Without this, on torch's source, the main
    process stayed about 100 MB higher after receiving the other process's IR and 135 MB
    higher after sending its own."""
    give_back()


def give_back() -> None:
    """Return freed heap pages to the system, where the C library can (glibc); else nothing."""
    global _trim
    if _trim is None:
        _trim = _malloc_trim()
    _trim()


def _malloc_trim():
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            trim = ctypes.CDLL(None).malloc_trim  # glibc; musl has none
            trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
            return lambda: trim(0)
        except (OSError, AttributeError):
            pass
    return lambda: None
