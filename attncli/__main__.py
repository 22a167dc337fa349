"""``python -m attncli`` runs the ``attn`` command."""

from attncli.cli import main

main()
