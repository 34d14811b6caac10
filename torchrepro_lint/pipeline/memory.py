"""Giving freed memory back to the operating system during long runs.

Parsing churns through far more memory than it keeps: LibCST's native parser and CPython's
compiler allocate with the C allocator, and the trees released over budget are freed in the
middle of the heap, where glibc keeps the pages for later instead of returning them. On
torch's source that kept the resident size at about three times the live heap.
`malloc_trim(0)` hands those pages back; it costs about 5 ms, so it runs once per
`TRIM_AFTER` characters of source parsed or checked, never on a short run (the flake8 plugin,
a one-file check).
"""

from __future__ import annotations

import sys

TRIM_AFTER = 2_000_000
_since_trim = 0
_trim = None  # the C function, looked up on first use (ctypes is not imported on short runs)


def churned(chars: int) -> None:
    """`chars` characters of source were parsed or checked: trim when enough have been."""
    global _since_trim
    _since_trim += chars
    if _since_trim >= TRIM_AFTER:
        _since_trim = 0
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
