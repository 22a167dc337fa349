"""One module per ``attn`` command; what they share is in ``attncli.cli`` (inputs, attention, outputs, describe, ...)."""
