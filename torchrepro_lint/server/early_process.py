"""A process beside the language server that finds the first findings of each file opened or
edited before its project's first analysis is done (first_findings.py), while the server's
analysis thread builds the whole program model.

It runs the linter, and the analysis thread runs it too: in one process they would share the
recording of reads (project/reads.py), whose stack is the process's, and the memos of every
layer. So it is a process of its own, forked when the server starts, before any thread exists
(forking a process that has threads may copy a lock held by one of them), sharing the modules
the server imported; it warms up its own imports at once, and runs on another core than the
analysis. It reads requests from a pipe and answers them in order; a newer request for the same
document replaces one not yet sent (`submit`), so typing during the analysis never queues stale
texts. It never writes to the editor's stdout (its stdin and stdout are /dev/null), and ends
when the server does (its pipe closes, or as a daemon process at exit).

Where `fork` is not there (Windows), or the process died, there is none: the analysis thread
then finds the first findings itself before it starts a project's first analysis
(analyst.py).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path


class EarlyProcess:
    """The process and, in the server, the thread that feeds it and hands back its answers.
    (Tests put a stand-in with `alive` and `submit` in its place.)"""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self._connection = None
        self._process = None
        self._pending: dict = {}  # key -> (request, reply), the newest for each key
        self._lock = threading.Condition()

    @classmethod
    def started(cls, cwd: Path) -> EarlyProcess | None:
        """The process, forked now; None where it cannot be (call before any thread starts)."""
        if "fork" not in multiprocessing.get_all_start_methods():
            return None
        early = cls(cwd)
        context = multiprocessing.get_context("fork")
        ours, theirs = context.Pipe()
        try:
            process = context.Process(target=_serve, args=(theirs, ours, cwd), daemon=True, name="torchrepro-lint first findings")
            process.start()
        except OSError:
            return None
        theirs.close()
        early._connection, early._process = ours, process
        threading.Thread(target=early._feed, daemon=True, name="torchrepro-lint first findings").start()
        return early

    @property
    def alive(self) -> bool:
        return self._connection is not None

    def submit(self, key, path: Path, text: str, buffers_on_disk: bool, reply) -> bool:
        """Ask for the first findings of `text` at `path`; `reply(findings or None)` is called
        from this module's thread. A request of the same `key` not yet sent is replaced (its
        reply never comes). False where there is no process."""
        with self._lock:
            if self._connection is None:
                return False
            self._pending.pop(key, None)  # (to the end of the queue)
            self._pending[key] = ((path, text, buffers_on_disk), reply)
            self._lock.notify()
        return True

    def _feed(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._lock.wait()
                key = next(iter(self._pending))
                request, reply = self._pending.pop(key)
            try:
                self._connection.send(request)
                answer = self._connection.recv()
            except (EOFError, OSError):  # the process died: no first findings from now on
                with self._lock:
                    self._connection = None
                    self._pending.clear()
                reply(None)
                return
            reply(answer)


def _serve(connection, server_end, cwd: Path) -> None:
    """The process: answer each request with `answer`'s, in order, until the pipe closes."""
    server_end.close()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)  # the editor's pipes are the server's alone
    os.dup2(devnull, 1)
    from torchrepro_lint.server.first_findings import warm_up
    from torchrepro_lint.server.session import Workspace

    warm_up(cwd)
    workspace = Workspace(cwd, persistent=False)  # configurations as the server's sessions read them
    while True:
        try:
            request = connection.recv()
        except (EOFError, OSError):
            return
        try:
            connection.send(answer(workspace, *request))
        except (EOFError, OSError):
            return


def answer(workspace, path: Path, text: str, buffers_on_disk: bool):
    """first_findings of `text` at `path`, configured and named as its project's session does
    (`workspace`: a session.Workspace); None where it has none (a broken configuration)."""
    from torchrepro_lint.config import ConfigError
    from torchrepro_lint.server.first_findings import first_findings

    try:
        session = workspace.session_for(path)
        return first_findings(session.config(), session.display(path), text, buffers_on_disk)
    except ConfigError:
        return None
    except Exception:  # a bug here must not end the process: the analysis reports the file
        return None
