"""A command imports only what it runs: the start-up time people feel on every
call. Every module a whole ``attn`` process has imported when it exits is
listed (``sys.modules``: ``python -X importtime`` misses the command's own
thread). The times themselves are the benchmark's (benchmarks/run.py
--startup); these tests keep the imports from creeping back."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


LIST_AT_EXIT = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.__stderr__.write('\\n'.join(sorted(sys.modules))))\n"
    "from attncli.cli import main\n"
    "sys.argv = ['attn', *sys.argv[1:]]\n"
    "main()\n"
)


def imported(*args: str) -> set[str]:
    """Every module a whole ``attn`` process has imported for ``args`` when it exits."""
    result = subprocess.run(
        [sys.executable, "-c", LIST_AT_EXIT, *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(result.stderr.split())


def test_softmax_imports_no_kernel_model_page_figure_or_view():
    modules = imported("softmax", "1", "2", "3", "-f", "json")
    for heavy in (
        "attncli.core.kernel",
        "attncli.models",
        "attncli.output.headview",
        "matplotlib",
        "rich",
        "yaml",
        "attncli.readers.formats",
        "attncli.cli.commands.run",
        "attncli.cli.inputs",
    ):
        assert heavy not in modules, f"attn softmax -f json imports {heavy}"
    assert "attncli.cli.commands.softmax" in modules  # the test sees what it should


@pytest.mark.parametrize("args", [("--help",), ("run", "--help")])
def test_help_imports_neither_numpy_nor_rich_nor_yaml(args):
    modules = imported(*args)
    for heavy in ("numpy", "rich", "yaml", "attncli.readers.formats", "attncli.core.kernel"):
        assert heavy not in modules, f"attn {' '.join(args)} imports {heavy}"
