"""One module per ``attn`` command; ``common`` holds what they share."""
