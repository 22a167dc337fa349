"""The maths of attention in numpy: no files, no Typer, no Rich."""
