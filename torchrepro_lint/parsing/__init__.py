"""Python source files: read and decoded once, parsed once, placed on demand, parsed again after an edit.

- lines: a text's lines, broken where Python breaks them (how finding rows count);
- source: `SourceFile`, one file's text, its LibCST tree and noqa comments, and reading and
  decoding a file as Python does;
- positions: where a node is in its file, without LibCST's positions for the whole file;
- reparse: an edited text parsed again statement by statement (the language server);
- node_hash: LibCST nodes hashed by identity in C.

Nothing here knows of rules or runs: every other layer reads files through this one.
"""
