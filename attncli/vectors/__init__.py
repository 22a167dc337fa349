"""Word vectors: the bundled GloVe table (``table``) and your own files (``files``)."""
