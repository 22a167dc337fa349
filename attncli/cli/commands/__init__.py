"""One module per ``attn`` command; what commands share is in ``attncli.cli`` (inputs, attention, outputs, ...)."""
