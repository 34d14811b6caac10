"""The run pipeline: from the paths a user gives to the findings a reporter prints.

- discovery: which files to lint;
- source (with positions): a file read and decoded once, parsed once, positions on demand;
- engine: one run, start to end (read, build the project model, run the rules, filter);
- staging: the stages the cache and `--jobs` change (lowering, programs, per-file and program rules);
- shards and shard_worker: a cold run shared between processes, the main process's side and a worker's;
- cache: what a run keeps on disk for the next; memory: freed memory given back on long runs;
- progress: the one updating line a person at a terminal sees.
"""
