"""Views that read well: column blocks at any width, swatches, NO_COLOR."""

import re

import numpy as np
import pytest

from attncli.cli import emit as common
from attncli.output.blocks import ColumnBlocks
from attncli.output.colours import are_shares, mix, parse_hex, percentages, row_colours, to_hex

KEYS = ("#fef0d9", "#fdcc8a", "#fc8d59", "#d7301f", "#f6eff7", "#bdc9e1", "#67a9cf", "#02818a")


def table(attn, *args, columns):
    result = attn(*args, "-f", "table", env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", ["run", "explain"])
def test_narrow_terminal_wraps_columns_into_blocks(attn, samples, command):
    text = table(attn, command, samples / "colors.yaml", columns=50)
    assert "…" not in text
    assert "columns 1–4 of 8" in text and "columns 5–8 of 8" in text
    assert all(len(line) <= 50 for line in text.splitlines() if "│" in line or "┃" in line)
    for key in KEYS:
        assert key in text
    for weight in ("0.150", "0.128", "0.114", "0.096", "0.158", "0.140", "0.121", "0.093"):
        assert weight in text


def test_wide_terminal_shows_one_block(attn, samples):
    text = table(attn, "run", samples / "colors.yaml", columns=200)
    assert "columns" not in text
    header = next(line for line in text.splitlines() if "#fef0d9" in line)
    assert all(key in header for key in KEYS)


def test_wide_values_wrap_too(attn, tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "b.npz", q=rng.normal(size=(2, 4)), k=rng.normal(size=(3, 4)), v=rng.normal(size=(3, 30)))
    text = table(attn, "run", tmp_path / "b.npz", columns=80)
    assert "…" not in text and "d29" in text and "columns 1–" in text


def test_blocks_are_even_and_never_empty():
    assert ColumnBlocks.blocks(5, [7] * 8, 50) == [range(0, 4), range(4, 8)]
    assert ColumnBlocks.blocks(5, [7] * 9, 50) == [range(0, 3), range(3, 6), range(6, 9)]
    assert ColumnBlocks.blocks(5, [100, 1], 50) == [range(0, 1), range(1, 2)]  # one column too wide: alone
    assert ColumnBlocks.blocks(5, [7] * 3, 500) == [range(0, 3)]


def terminal(attn, monkeypatch, *args, env):
    """Run as if stdout were a truecolour terminal."""
    monkeypatch.setattr(common, "is_terminal", lambda: True)
    result = attn(*args, env={"COLUMNS": "120", "COLORTERM": "truecolor", "TERM": "xterm-256color", **env})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_terminal_shows_swatches_and_heat(attn, samples, monkeypatch):
    text = terminal(attn, monkeypatch, "run", samples / "colors.yaml", env={})
    assert "48;2;133;23;220m" in text  # the query's swatch, #8517dc
    assert "48;2;254;240;217m" in text  # a key's swatch, #fef0d9, under its name
    assert re.search(r"48;2;\d+;\d+;\d+m  0\.150", text)  # weights on the viridis scale
    assert "#c6b5ac" in text  # the keys' colours mixed by the weights


def test_no_color_is_respected(attn, samples, monkeypatch):
    text = terminal(attn, monkeypatch, "explain", samples / "colors.yaml", env={"NO_COLOR": "1"})
    assert not re.search(r"\x1b\[[0-9;]*(3[0-7]|4[0-7]|[34]8;[25])[;m]", text)  # no colour codes
    assert "#8517dc is 48.8 % warm, 51.2 % cool" in re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_rgb_bundle_rows_are_colours(attn, tmp_path):
    (tmp_path / "b.yaml").write_text(
        "rgb: true\nq: [[255, 0, 0]]\nk: [[255, 0, 0], [0, 0, 255]]\n"
        "v: {columns: [red, blue], rows: [[1, 0], [0, 1]]}\n"
    )
    out, notes = attn.json_and_notes("run", tmp_path / "b.yaml")  # 0–255 without divide: saturated
    assert out["mix"] == [to_hex(np.array(out["weights"][0]) @ [[255, 0, 0], [0, 0, 255]])]
    assert len(notes) == 1 and notes[0].startswith("softmax saturates: query q0 puts 99.9 % or more")
    text = attn("run", tmp_path / "b.yaml", "-f", "table").stdout
    assert re.search(r"q0 is \d+\.\d % red, \d+\.\d % blue; its weights mix the key colours into #", text)


def test_colour_helpers():
    assert parse_hex("#8517dc") == (133, 23, 220) and parse_hex("#fff") == (255, 255, 255)
    assert parse_hex("fruit") is None and parse_hex("#12345") is None
    assert to_hex((133.4, 22.6, 300)) == "#8517ff"
    assert row_colours(["#000000", "#ffffff"], np.zeros((2, 1)), rgb=False) == [(0, 0, 0), (255, 255, 255)]
    assert row_colours(["#000000", "apple"], np.zeros((2, 1)), rgb=False) is None
    assert row_colours(None, np.array([[1.0, 0.5, 0]]), rgb=True) == [(255, 128, 0)]
    assert row_colours(None, np.array([[200.0, 10, 0]]), rgb=True) == [(200, 10, 0)]
    assert row_colours(None, np.array([[1.0, 0.5]]), rgb=True) is None  # not 3 numbers
    assert mix([[0.5, 0.5]], [(0, 0, 0), (255, 255, 255)]) == [(128, 128, 128)]
    assert are_shares(np.array([[1.0, 0], [0.25, 0.75]])) and not are_shares(np.array([[10.0], [5.0]]))
    assert percentages([0.4876, 0.5124], ["warm", "cool"]) == "48.8 % warm, 51.2 % cool"
