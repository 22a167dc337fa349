"""The README as a learner follows it: every command of its learning path and of
its seed table is run exactly as written (split as a shell splits it), on a
terminal 100 columns wide; what the table says attn prints must be on the
screen, and where the seed gives a number, attn's number must be the seed's.

The learning path's last step, `attn trace … --model SmolLM2…`, needs a model
file and is the trace page's (docs/trace.md): tests/test_trace.py and the
decoder tests cover it, so commands starting `attn trace` are skipped here."""

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from attncli.cli import emit

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SEEDS = ROOT.parent / "shared" / "seeds"  # the posts, beside the repository (not shipped with it)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def section(title):
    """The README's text under '## title', up to the next '## '."""
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end >= 0 else None]


def learning_path():
    """The commands of the learning path: its ```sh blocks, and `attn …` written inline."""
    text = section("Learn attention in ten minutes")
    blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
    commands = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]
    commands += re.findall(r"(?<!`)`(attn [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return commands


def seed_table():
    """(seed, command, what attn prints) of each row of the seed table with a command."""
    rows = []
    for line in section("Each seed's worked examples, one command each").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[2].startswith("`attn "):
            rows.append((cells[0], cells[2].strip("`"), re.findall(r"`([^`]+)`", cells[3])))
    return rows


PATH = learning_path()
TABLE = seed_table()


def test_the_readme_has_a_path_and_a_table():
    assert [c.split()[1] for c in PATH[:5]] == ["softmax", "lookup", "explain", "self", "trace"]
    assert {seed for seed, _, _ in TABLE} == {"000", "001", "002", "003", "004"}
    assert len(README.splitlines()) < 400  # readable in one sitting; the reference is in docs/


def on_a_terminal(attn, monkeypatch, command):
    """The screen after `command`, run as written on a 100-column terminal."""
    monkeypatch.chdir(ROOT)  # the README's paths are the repository's: samples/…
    monkeypatch.setattr(emit, "is_terminal", lambda: True)
    args = shlex.split(command)
    assert args[0] == "attn"
    result = attn(*args[1:], env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert result.exit_code == 0, (command, result.output)
    return " ".join(ANSI.sub("", result.stdout).split())


@pytest.mark.parametrize("command", PATH)
def test_each_step_of_the_learning_path_runs_as_written(attn, monkeypatch, command):
    if command.startswith("attn trace"):
        pytest.skip("the trace step is docs/trace.md's, tested in tests/test_trace.py and the decoder tests")
    assert on_a_terminal(attn, monkeypatch, command)


@pytest.mark.parametrize(("seed", "command", "prints"), TABLE, ids=[c for _, c, _ in TABLE])
def test_each_seed_command_prints_what_the_table_says(attn, monkeypatch, seed, command, prints):
    screen = on_a_terminal(attn, monkeypatch, command)
    for text in prints:
        assert text in screen, (command, text)


# The seeds' own numbers, as the posts print them, and where attn's JSON holds each.
# (command, path in the JSON, the seed's numbers, tolerance, the text in the seed that gives them)
SEED_NUMBERS = [
    ("attn softmax 4.0 -1.0 2.1", ("weights",), [0.8648, 0.0058, 0.1294], 5e-5, "[0.8648, 0.0058, 0.1294]"),
    ("attn softmax 3 2 1", ("weights",), [0.665, 0.244, 0.090], 1e-3, "[0.665, 0.244, 0.090]"),  # 0.2447, cut
    (
        "attn softmax 30 20 10",
        ("weights",),
        [9.99954600e-01, 4.53978686e-05, 2.06106005e-09],
        1e-8,
        "[9.99954600e-01, 4.53978686e-05, 2.06106005e-09]",
    ),
    ("attn explain samples/footnote.yaml --scale 1", ("scores", 0), [-3, 0, 3], 0, "= [-3, 0, 3]"),
    ("attn explain samples/magnitude.yaml", ("scores", 0), [1000, 6], 0, "b=[1000, 0, 0]"),
    (
        "attn run samples/colors.yaml",
        ("weights", 0),
        [0.150, 0.128, 0.114, 0.096, 0.158, 0.140, 0.121, 0.093],
        5e-4,
        "(0.150, 0.128, 0.114, 0.096, 0.158, 0.140, 0.121, 0.093)",
    ),
    ("attn run samples/colors.yaml", ("output", 0), [0.488, 0.512], 5e-4, "= (0.488, 0.512)"),
    (
        "attn self samples/row_convention.yaml",
        ("output", 0),
        [-0.1, 5.9, -1.6],
        1e-12,
        r"\begin{bmatrix} -0.1 & 5.9 & -1.6 \\\end{bmatrix}",
    ),
]


@pytest.mark.parametrize(
    ("command", "path", "seed_says", "tolerance", "quote"), SEED_NUMBERS, ids=[f"{c} {p}" for c, p, *_ in SEED_NUMBERS]
)
def test_attn_prints_the_seeds_numbers(attn, monkeypatch, command, path, seed_says, tolerance, quote):
    assert any(command == c for _, c, _ in TABLE), f"{command} is not in the README's seed table"
    monkeypatch.chdir(ROOT)
    result = attn(*shlex.split(command)[1:])  # into a pipe: JSON, every digit
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    for key in path:
        got = got[key]
    np.testing.assert_allclose(got, seed_says, rtol=0, atol=tolerance)
    if SEEDS.is_dir():  # the numbers above are the posts' own
        assert any(quote in p.read_text() for p in SEEDS.glob("*.txt")), quote
