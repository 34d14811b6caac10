"""The run pipeline: from the paths a user gives to the findings a reporter prints.

- discovery: which files to lint;
- engine: one run, start to end (read, build the project model, run the rules, filter);
- staging: the stages the cache and `--jobs` change (programs, per-file and program rules), with
  lowered_store (IR by file content), digests (what a cached result read, valued now) and
  tree_budget (which trees a run keeps for its rules);
- shards: a cold run shared between processes, the main process's side and a worker's;
- cache: what a run keeps on disk for the next; read_values: the values of reads kept between
  runs of a long-lived process;
- progress: the one updating line a person at a terminal sees.

Files are read and parsed by the parsing package, below this one.
"""
