"""The ``attn`` command line: the Typer app and its commands."""

from attncli.cli.app import app, main

__all__ = ["app", "main"]
