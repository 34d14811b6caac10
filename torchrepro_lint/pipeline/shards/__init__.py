"""Cold runs on several cores: each process parses, lowers and checks its own share of files.

A LibCST tree cannot be sent between processes (pickling one costs more than parsing it), and a
file's tree is needed twice: to lower it to IR before the program model exists, and by the
per-file rules after. So with `--jobs N`, N - 1 workers are forked before anything is parsed (fewer
where there are fewer than FILES_PER_PROCESS files to parse for each), and every process takes work from counters they share, largest files first, so that their
shares end together:

1. Lowering. Each process lowers the files it takes, keeping their trees (within TREE_BUDGET).
   Workers send their IR to the main process, which builds the project in file order and sends
   each worker the IR it lacks, so that every process holds the same project.
2. Programs. Every process takes the next program to interpret until none is left; workers
   send the facts back, pickled together, and keep those bytes (a program needs only IR, never
   a tree).
3. Checking. Each worker receives the facts of the programs it did not interpret (the main
   process pickled its own before unpickling the workers') and runs the per-file rules on the files
   whose trees it kept, then on files whose tree nobody kept, taken like the rest. A rule that
   needs a summary of a module lowered elsewhere (project/summaries.py) asks for it instead of
   parsing that module: the main process routes the question to the process that lowered it,
   which answers before each rule it runs (ModuleChecker.pause), or while it waits for an answer
   of its own. (Summaries
   never ask for other summaries, so a chain of questions always ends.) Results come back as
   findings, errors and reads, as from ModuleChecker, with the summaries each worker computed,
   for the cache's digests.
4. Program rules, in the same stage: once it has checked its files, each process takes the next
   program whose program rules are to run (those the cache does not hold), until none is left.
   Their findings, errors and reads come back with the checked files'; the main process puts
   them in program order and caches them (staging.ProgramChecker).

A worker that dies or fails is replaced by the main process, which lowers, interprets, checks,
summarises and runs the program rules on what that worker would have: the result is the same,
only slower.

The modules: protocol.py (what both sides share: sizes, the test hook, the deadline, lowering one
file, the shared counters), hub.py (the main process's side), worker.py (a worker's side).
"""
