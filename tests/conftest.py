import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from typer.testing import CliRunner

from attncli.cli import app

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

# Hypothesis: a fast default for every run, and a long search on demand:
#   ATTN_FUZZ_EXAMPLES=20000 python -m pytest tests/test_properties.py tests/test_fuzz.py
# No deadline: a busy CI machine must not turn slowness into failures.
settings.register_profile(
    "attn",
    max_examples=int(os.environ.get("ATTN_FUZZ_EXAMPLES", 100)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize="ATTN_FUZZ_EXAMPLES" not in os.environ,
)
settings.load_profile("attn")


def _smollm2_read_once() -> None:
    """SmolLM2's GGUF ($ATTN_TEST_GGUF) takes seconds to read (its metadata, dequantising):
    the tests that trace it read it once per process, through ``load_model`` as attn calls it
    and as the test modules import it (so this runs before they are imported). Any other
    model, and the file once changed, is read as usual."""
    import attncli.models
    from attncli.models import loading

    path = os.environ.get("ATTN_TEST_GGUF")
    if not path or not os.path.isfile(path):
        return
    original = loading.load_model
    read: dict = {}

    def load_model(name=None):
        if name is not None and os.path.realpath(os.path.expanduser(os.fspath(name))) == os.path.realpath(path):
            key = os.stat(path).st_mtime_ns
            if key not in read:
                read.clear()
                read[key] = original(name)
            return read[key]
        return original(name)

    attncli.models.load_model = loading.load_model = load_model


_smollm2_read_once()


def random_note(names="W_Q, W_K, W_V"):
    """The note of an ``attn self`` run whose projections ``names`` are random."""
    return f"attn: note: random {names}: the pattern means nothing; `attn trace` shows a trained model\n"


class Attn:
    """Runs ``attn`` in-process, as a shell would, and parses what it prints."""

    def __call__(self, *args, input=None, env=None):
        return CliRunner().invoke(app, [str(a) for a in args], input=input, env=env)

    def json(self, *args, input=None, random=False):
        """The JSON of a successful run that says nothing on stderr (``random``: only that
        ``attn self``'s W_Q, W_K and W_V, or the projections it names, are random)."""
        result = self(*args, input=input)
        assert result.exit_code == 0, result.output
        assert result.stderr == (random_note(*([] if random is True else [random])) if random else "")
        return json.loads(result.stdout)

    def json_and_notes(self, *args, input=None):
        """The JSON of a successful run and its ``attn: note:`` lines (without the prefix)."""
        result = self(*args, input=input)
        assert result.exit_code == 0, result.output
        lines = result.stderr.splitlines()
        assert all(line.startswith("attn: note: ") for line in lines), result.stderr
        return json.loads(result.stdout), [line[len("attn: note: ") :] for line in lines]

    def fails(self, *args, code=1, input=None, env=None):
        """The one stderr line of a failing run, after checking the exit code."""
        result = self(*args, input=input, env=env)
        assert result.exit_code == code, result.output
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("attn: error: ")
        return lines[0][len("attn: error: ") :]


@pytest.fixture
def attn():
    return Attn()


@pytest.fixture
def samples():
    return SAMPLES
