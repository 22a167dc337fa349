"""Word vectors: the bundled GloVe table (``table``) and your own files (``files``)."""

UNKNOWN_POLICIES = ("error", "skip", "zero")  # what to do with a word the table does not have
