"""The language server's cache: the CLI cache's entries (IR, per-file and program results,
summaries) kept as live objects in memory between requests, read through from the on-disk cache.

An edit re-runs the engine over the whole project, and every stage takes what it can from here,
exactly as `torchrepro-lint check` takes it from `.torchrepro_lint_cache/`: only the edited
buffer is parsed again, and only the results that read it are recomputed. Values are shared,
never copied: the engine treats what a cache gives back as read-only (IR is frozen dataclasses).

Memory stays bounded: after each run, only the entries the last two runs used are kept (the
previous run's too, so that undoing an edit is still cheap). Entries are written through to the
disk cache only while no unsaved buffer took part in the run, so an editor's keystrokes never
fill the project's cache directory with versions that were never saved. An entry made while a
buffer was unsaved is written when a run of the files as saved uses it (at the end of that run):
a server whose first analysis had an unsaved buffer (an editor restoring one at start) still
leaves the cache of the saved files once they are saved, for the next start and for `check`.
"""

from __future__ import annotations


class MemoryCache:
    """The interface of cache.Cache (get, put, usable, warning), in memory."""

    usable = True

    def __init__(self, disk=None) -> None:
        self.disk = disk if disk is not None and disk.usable else None
        self.persist = False  # write through to `disk` (set per run by the session)
        self._entries: dict[tuple[str, str], object] = {}
        self._used: set[tuple[str, str]] = set()  # this run's keys
        self._used_before: set[tuple[str, str]] = set()  # the previous run's
        self.disk_reads = 0  # entries found on disk (for tests and statistics)
        self._unwritten: set[tuple[str, str]] = set()  # put while not persisting, not on disk
        # id(pickled program facts) -> (the bytes, the facts, the modules they point at):
        # staging.ProgramRunner gives them again while those modules are the run's.
        self.unpickled: dict[int, tuple] = {}
        self.program_digests: dict[int, tuple] = {}  # id(facts) -> (facts, program shape, digest)
        # id(program facts) -> (the facts, their pickled bytes): while nothing is written to
        # disk, the facts' value for cached results (lowered_store.LoweredStore._pickled)
        self.pickled: dict[int, tuple] = {}
        # (digest of a module's IR, part) -> (None, digest of the part): lowered_store.LoweredStore
        self.ir_part_digests: dict[tuple, tuple] = {}
        # id(FunctionIR) -> (it, digest of its IR without refs): lowered_store.LoweredStore._code_digest
        self.code_digests: dict[int, tuple] = {}
        # resolved path of an open buffer -> the digests of the parts of its last IR
        # (lowered_store.ir_digest_of); the session drops a buffer's when it is closed
        self.ir_digest_parts: dict = {}
        self.read_values = None  # the last run's pipeline.read_values.ReadValues
        # key of a program's cached facts -> (the reads of the run that found them, their values):
        # a program run again with the same reads takes the values of what did not change
        # (staging.ProgramRunner._values_of)
        self.program_reads: dict[str, tuple] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, kind: str, key: str, load=None):
        entry = (kind, key)
        found = self._entries.get(entry)
        if found is None and self.disk is not None:
            found = self.disk.get(kind, key)
            if found is not None:
                self.disk_reads += 1
                self._entries[entry] = found
        if found is not None:
            self._used.add(entry)
        return found

    def put(self, kind: str, key: str, value, dump=None) -> None:
        entry = (kind, key)
        self._entries[entry] = value
        self._used.add(entry)
        if self.disk is None:
            return
        if self.persist:
            self.disk.put(kind, key, value)
            self._unwritten.discard(entry)
        else:
            self._unwritten.add(entry)

    def warning(self, message: str) -> None:
        if self.disk is not None:
            self.disk.warning(message)

    def end_run(self) -> None:
        """Write what a run of the saved files used and an unsaved one made; forget what
        neither this run nor the one before used."""
        if self.persist and self._unwritten:
            for entry in self._unwritten & self._used:  # (its value now: this run's, if it put one)
                self.disk.put(*entry, self._entries[entry])
            self._unwritten -= self._used
        keep = self._used | self._used_before
        if len(keep) != len(self._entries):
            self._entries = {entry: value for entry, value in self._entries.items() if entry in keep}
            self._unwritten &= keep
        self._used_before, self._used = self._used, set()
        live = {id(value[1]) for (kind, _), value in self._entries.items() if kind == "program"}
        self.unpickled = {key: found for key, found in self.unpickled.items() if key in live}
        facts = {id(found[1]) for found in self.unpickled.values()}
        self.program_digests = {key: found for key, found in self.program_digests.items() if key in facts}
        self.program_reads = {key: found for key, found in self.program_reads.items() if ("program", key) in keep}
        self.pickled = {key: found for key, found in self.pickled.items() if key in facts}
        irs = {value[1] for (kind, _), value in self._entries.items() if kind == "ir"}
        self.ir_part_digests = {key: found for key, found in self.ir_part_digests.items() if key[0] in irs}
