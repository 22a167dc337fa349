"""One module per ``attn`` command; what they share is in ``attncli.cli`` (options, io, emit, qkv, words)."""
