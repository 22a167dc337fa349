"""Views people would rather look at than read: the compact heatmap, the top
keys, the layers × heads grid, labels that fit, colours that read."""

import re
import time

import numpy as np
import pytest
from rich.console import Console

from attncli.cli import emit as common
from attncli.output.compact import CompactHeatmap, pool, scaled
from attncli.output.heatmap import Heatmap, ViewStyle
from attncli.output.labels import abbreviate, legend
from attncli.output.palette import BLACK, VIRIDIS_256, WHITE, colour, heat, ink, shade, xterm_rgb
from attncli.output.topk import ordinal, top_keys

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def plain(text):
    return ANSI.sub("", text)


def terminal(attn, monkeypatch, *args, columns=100, colours="truecolor", env=None):
    """Run as if stdout were a terminal of ``columns`` showing ``colours``."""
    monkeypatch.setattr(common, "is_terminal", lambda: True)
    environ = {
        "COLUMNS": str(columns),
        "TERM": "xterm-256color",
        "NO_COLOR": None,
        "FORCE_COLOR": None,
        "COLORTERM": "truecolor" if colours == "truecolor" else None,
        **(env or {}),
    }
    result = attn(*args, env=environ)
    assert result.exit_code == 0, result.output
    return result.stdout


def sgr_codes(text):
    """The colour codes of every SGR sequence, with 38/48's colour arguments kept apart."""
    codes = []
    for params in re.findall(r"\x1b\[([0-9;]*)m", text):
        parts = [int(p) for p in params.split(";") if p]
        i = 0
        while i < len(parts):
            if parts[i] in (38, 48):
                size = 3 if parts[i + 1] == 5 else 5
                codes.append(tuple(parts[i : i + size]))
                i += size
            else:
                codes.append(parts[i])
                i += 1
    return codes


def render(renderable, width=100, colours="truecolor"):
    console = Console(width=width, force_terminal=True, color_system=colours, record=True, file=open("/dev/null", "w"))
    console.print(renderable)
    return console.export_text(styles=True)


@pytest.fixture
def big(tmp_path):
    """300 keys × 50 queries, with one clear peak per query."""
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(50, 8)), rng.normal(size=(300, 8))
    k[np.arange(50) * 6] = q * 3  # query i attends most to key 6i
    path = tmp_path / "big.npz"
    np.savez(path, q=q, k=k, v=rng.normal(size=(300, 2)))
    return path


# --- labels ---------------------------------------------------------------------------------------


def test_long_labels_stay_distinct():
    labels = [f"a_very_long_label_for_key_number_{i}" for i in range(50)]
    short = abbreviate(labels, 12)
    assert len(set(short)) == 50 and all(len(s) <= 12 for s in short)
    assert short[7].startswith("a_") and short[7].endswith("_7") and "…" in short[7]
    assert abbreviate(["the", "pink", "the"], 12) == ["the", "pink", "the"]  # fits: unchanged, repeats kept
    assert legend(labels[:2], short[:2]) == [(short[0], labels[0]), (short[1], labels[1])]


def test_ordinals():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "101st",
    ]


# --- colours --------------------------------------------------------------------------------------


def test_ink_is_black_or_white_by_luminance():
    assert ink(colour(1.0)) == BLACK  # on viridis yellow
    assert ink(colour(0.0)) == WHITE  # on viridis purple
    assert ink(colour(0.5)) == BLACK and ink(colour(0.3)) == WHITE


def test_cells_write_ink_as_explicit_rgb_not_the_themes_black():
    text = render(Heatmap(np.array([[0.9, 0.1]]), ["q"], ["a", "b"], precision=2, style=ViewStyle()))
    assert "\x1b[38;2;0;0;0;48;2;" in text and "\x1b[38;2;255;255;255;48;2;" in text
    assert not {30, 37, 90, 97} & set(sgr_codes(text))  # no ANSI black or white
    in_256 = render(Heatmap(np.array([[0.9, 0.1]]), ["q"], ["a", "b"], precision=2, style=ViewStyle()), colours="256")
    assert "38;5;16" in in_256 or "38;5;231" in in_256  # the cube's black/white, not palette 0/15


def test_256_colour_ramp_has_no_greys_and_no_repeats():
    rgbs = [xterm_rgb(n) for n in VIRIDIS_256]
    assert len(set(rgbs)) == len(rgbs)
    assert all(len(set(rgb)) > 1 for rgb in rgbs)  # r = g = b would be grey
    low = {heat(x, "256").bgcolor.number for x in (0.15, 0.25, 0.35)}
    assert len(low) == 3  # Rich's own downgrade gave 0.2 and 0.3 the same slate grey


def test_shades():
    assert [shade(x) for x in (0, 0.19, 0.2, 0.5, 0.79, 0.8, 1.0)] == [" ", " ", "░", "▒", "▓", "█", "█"]


def test_legend_runs_to_the_largest_when_no_weight_reaches_half(attn, samples, monkeypatch):
    """Seed 003's weights are 0.093–0.158: on a 0–1 scale one uniform purple, so by default
    the colours run to the largest weight, and the legend says so; --scale-to-one runs them to 1."""
    text = plain(terminal(attn, monkeypatch, "run", samples / "colors.yaml"))
    assert "▏ 0.158 (the largest weight)" in text
    assert "(no weight reaches 0.5; --scale-to-one: 0 to 1)" in text
    text = plain(terminal(attn, monkeypatch, "run", samples / "colors.yaml", "--scale-to-one"))
    assert re.search(r"0 ▕ {20}▏ 1\b", text) and "no weight reaches" not in text
    text = plain(terminal(attn, monkeypatch, "run", samples / "colors.yaml", "--scale-to-max"))
    assert "▏ 0.158 (the largest weight)" in text and "no weight reaches" not in text
    text = plain(terminal(attn, monkeypatch, "run", samples / "q.csv", samples / "k.csv", samples / "v.csv"))
    assert re.search(r"0 ▕ {20}▏ 1\b", text)  # 0.828 reaches half: 0 to 1


def test_scale_decides_the_colour(attn, samples, monkeypatch):
    def cell(*extra):  # the background of the 0.158 cell
        text = terminal(attn, monkeypatch, "run", samples / "colors.yaml", *extra)
        return re.search(r"48;2;(\d+);(\d+);(\d+)m  0\.158", text).groups()

    assert tuple(map(int, cell("--scale-to-one"))) == colour(0.158)
    assert tuple(map(int, cell())) == tuple(map(int, cell("--scale-to-max"))) == colour(1.0)
    weights = attn.json("run", samples / "colors.yaml", "-f", "json")["weights"][0]
    text = terminal(attn, monkeypatch, "run", samples / "colors.yaml")
    lowest = re.search(r"48;2;(\d+);(\d+);(\d+)m  0\.093", text).groups()
    assert tuple(map(int, lowest)) == colour(min(weights) / max(weights))  # spread: no longer one purple


# --- the compact heatmap --------------------------------------------------------------------------


def test_pool_keeps_the_largest_and_forbidden_only_when_all_are():
    x = np.array([[0.1, 0.5, np.nan, 0.2, np.nan, np.nan, 0.3]])
    assert np.array_equal(pool(x, 2, 1), [[0.5, 0.2, np.nan, 0.3]], equal_nan=True)
    assert np.array_equal(pool(x.T, 3, 0).T, [[0.5, 0.2, 0.3]])


def test_300_keys_by_50_queries_fit_one_100_column_screen(attn, big, monkeypatch):
    text = plain(terminal(attn, monkeypatch, "run", big, "-f", "table"))
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "300 keys across, 4 to a cell" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("0 ▕"))
    assert end - start < 60
    assert all(len(line) <= 100 for line in lines)
    cells = [line for line in lines[start:end] if re.match(r"\s*q\d+ [▀▄ ]", line)]
    assert len(cells) == 25  # two queries a line
    assert cells[0].split()[0] == "q0" and cells[0].split()[-1] == "q1"
    assert "(the numbers take more than 2 blocks" in text


def test_compact_cells_show_the_largest_weight_of_their_keys(big):
    from attncli.cli.attend import every_step
    from attncli.cli.inputs import read_inputs

    steps = every_step(read_inputs([str(big)]))
    heat_map = CompactHeatmap(
        scaled(steps.weights, None, 1.0), [f"q{i}" for i in range(50)], [f"k{j}" for j in range(300)]
    )
    console = Console(width=100, force_terminal=True, color_system="truecolor", file=open("/dev/null", "w"))
    lines = [
        line
        for line in console.render_lines(heat_map, console.options.update(width=100), pad=False)
        if line[0].text.strip() == "q0"
    ]
    upper = [segment for segment in lines[0] if "▀" in segment.text]  # q0 above q1, 4 keys a cell
    for c, segment in enumerate(upper):
        group = steps.weights[:2, 4 * c : 4 * c + 4].max(axis=1)
        fg, bg = segment.style.color.triplet, segment.style.bgcolor.triplet
        assert tuple(fg) == colour(group[0]) and tuple(bg) == colour(group[1])


def test_compact_without_colour_uses_shades(attn, big, monkeypatch):
    text = terminal(attn, monkeypatch, "run", big, "--scale-to-max", env={"NO_COLOR": "1"})
    assert not re.search(r"\x1b\[[0-9;]*(3[0-7]|4[0-7]|[34]8;[25])[;m]", text)
    text = plain(text)
    assert "█" in text and "▀" not in text
    assert re.search(r"0 ▕ ░▒▓█▏ [\d.]+ \(the largest weight\)  \(a shade for each fifth\)", text)
    rows = [line for line in text.splitlines() if re.match(r"\s*q\d+ ", line) and "│" not in line]
    assert len(rows) == 50  # one query a line


def test_view_can_be_chosen(attn, samples, big, monkeypatch):
    compact = plain(terminal(attn, monkeypatch, "run", samples / "colors.yaml", "--view", "compact"))
    assert "8 keys across" in compact and "0.150" not in compact
    rng = np.random.default_rng(3)
    np.savez(big.parent / "wide.npz", q=rng.normal(size=(3, 4)), k=rng.normal(size=(60, 4)), v=rng.normal(size=(60, 1)))
    numbers = plain(terminal(attn, monkeypatch, "run", big.parent / "wide.npz", "--view", "numbers", columns=200))
    assert "columns 1–" in numbers and "of 60" in numbers
    wide = plain(terminal(attn, monkeypatch, "run", samples / "colors.yaml", columns=50))
    assert "columns 1–4 of 8" in wide and "0.150" in wide  # two blocks of numbers still read


def test_fifty_keys_at_200_columns_are_one_compact_picture(attn, monkeypatch, tmp_path):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "b.npz", q=rng.normal(size=(3, 4)), k=rng.normal(size=(50, 4)), v=rng.normal(size=(50, 1)))
    text = plain(terminal(attn, monkeypatch, "run", tmp_path / "b.npz", columns=200))
    assert "50 keys across" in text and "columns 1–" not in text.split("output =")[0]


def test_100000_keys_draw_quickly(attn, monkeypatch, tmp_path):
    rng = np.random.default_rng(2)
    for name, shape in (("q", (3, 4)), ("k", (100_000, 4)), ("v", (100_000, 1))):
        np.save(tmp_path / f"{name}.npy", rng.normal(size=shape))
    start = time.perf_counter()
    text = plain(terminal(attn, monkeypatch, "run", *(tmp_path / f"{n}.npy" for n in "qkv"), "-f", "table"))
    assert time.perf_counter() - start < 10
    group = int(re.search(r"100000 keys across, (\d+) to a cell", text).group(1))
    row = next(line for line in text.splitlines() if line.startswith("q0 "))
    assert len(row) <= 100 and (len(row) - 3 - 3) * group >= 100_000  # q0 … q1: every key has a cell
    assert len(text.splitlines()) < 30


def test_long_labels_at_60_columns(attn, monkeypatch, tmp_path):
    names = [f"a_very_long_label_for_key_number_{i}" for i in range(50)]
    (tmp_path / "q.csv").write_text(
        "name,x\n" + "".join(f"{n.replace('key', 'query')},{i}\n" for i, n in enumerate(names[:3]))
    )
    (tmp_path / "k.csv").write_text("name,x\n" + "".join(f"{n},{i / 10}\n" for i, n in enumerate(names)))
    (tmp_path / "v.csv").write_text("name,a\n" + "".join(f"{n},{i}\n" for i, n in enumerate(names)))
    files = [tmp_path / f"{n}.csv" for n in "qkv"]
    for view in ("numbers", "top", "compact"):
        text = plain(terminal(attn, monkeypatch, "run", *files, "--view", view, columns=60))
        assert all(len(line) <= 60 for line in text.splitlines()), view
        assert "0.…" not in text and "a_very_long_label_for_key_nu…" not in text, view
    numbers = plain(terminal(attn, monkeypatch, "run", *files, "--view", "numbers", columns=60))
    headers = re.findall(r"a_very_?…\w+", numbers)
    assert len(set(headers)) == 50


# --- the top keys ---------------------------------------------------------------------------------


def test_top_keys_and_the_rest(attn, samples, monkeypatch):
    text = plain(terminal(attn, monkeypatch, "run", samples / "colors.yaml", "--top", "3"))
    row = next(line for line in text.splitlines() if "#8517dc" in line and "0.158" in line)
    assert re.findall(r"#[0-9a-f]{6} (0\.\d+)", row) == ["0.158", "0.150", "0.140"]
    assert "#f6eff7 0.158" in row and "0.552 in 5 keys" in row
    assert "1st" in text and "3rd" in text and "the rest" in text


def test_top_keys_skip_forbidden_pairs():
    w = np.array([[0.5, 0.3, 0.2], [0.0, 0.0, 1.0]])
    allowed = np.array([[True, True, True], [False, False, True]])
    assert top_keys(w, allowed, 2).tolist() == [[0, 1], [2, 0]]
    text = plain(
        render(
            Heatmap(w, ["a", "b"], ["x", "y", "z"], precision=2, allowed=allowed, style=ViewStyle(view="top", top=2))
        )
    )
    b = next(line for line in text.splitlines() if line.startswith("b "))
    assert "z 1.00" in b and "x" not in b and "in 0 keys" not in b


def test_top_and_another_view_is_a_usage_error(attn, samples):
    assert (
        attn.fails("run", samples / "colors.yaml", "--top", "3", "--view", "numbers", code=2)
        == "--top 3 shows the top view, not --view numbers (give one of them)"
    )


# --- attn trace -----------------------------------------------------------------------------------


def test_trace_overview_is_a_grid_of_heads(attn, monkeypatch):
    pytest.importorskip("tokenizers")
    from test_trace import write_model

    model = write_model(__import__("pathlib").Path(__import__("tempfile").mkdtemp()) / "m")
    text = plain(terminal(attn, monkeypatch, "trace", "the pink elephant it was too big", "-m", model))
    assert "every head of every layer" in text
    assert re.search(r"^\s+h0\s+h1\s*$", text, re.M)
    assert re.search(r"^L0 [▀▄ ]", text, re.M) and re.search(r"^L1 ", text, re.M)
    assert "tokens: 0 [CLS] · 1 the · 2 pink" in text


@pytest.mark.parametrize("columns", [80, 100])
def test_trace_query_grid_never_cuts_at_80_or_100_columns(attn, monkeypatch, columns):
    from test_trace import ELEPHANT, MINILM, needs_minilm

    if needs_minilm.args[0]:
        pytest.skip(needs_minilm.kwargs["reason"])
    text = plain(terminal(attn, monkeypatch, "trace", ELEPHANT, "-m", MINILM, "--query", "it", columns=columns))
    assert all(len(line) <= columns for line in text.splitlines())
    assert "…" not in text
    head_11 = [line for line in text.splitlines() if line.startswith("head 11 ")]
    assert any(
        line.rstrip().endswith("elephant 0.37 (0.40)") for line in head_11
    )  # the README: every token looks there
    assert "layer 5" in text


def test_trace_query_grid_shortens_long_tokens_with_a_legend():
    from types import SimpleNamespace

    from attncli.cli.trace_run import Traced
    from attncli.cli.trace_views import query_grid

    tokens = ["[CLS]", "it", "supercalifragilistic", "superb", "[SEP]"]
    weights = np.zeros((2, 3, 1, 5))
    weights[..., 2] = 0.9  # every head of every layer looks at the long token
    weights[..., 1] = 0.1
    model = SimpleNamespace(family=SimpleNamespace(decoder=None))
    traced = Traced(
        model, tokens, [True, False, False, False, True], list(range(5)), [0, 1], [0, 1, 2], [1], 1, weights, None
    )
    text = plain(render(query_grid(traced, 2, ViewStyle()), width=80))
    short = abbreviate(tokens, 10)[2]
    assert short == "superc…tic"
    assert text.count(f"{short} 0.90") == 6
    assert f"shortened: {short} = supercalifragilistic" in text


def test_force_color_keeps_colours_in_a_pipe_for_less_r(attn, samples):
    colours = {"FORCE_COLOR": "1", "COLORTERM": "truecolor", "TERM": "xterm-256color", "NO_COLOR": None}
    forced = attn("run", samples / "colors.yaml", "-f", "table", env={**colours, "COLUMNS": "100"})
    assert forced.exit_code == 0 and re.search(r"\x1b\[38;2;\d+;\d+;\d+;48;2;\d+;\d+;\d+m  0\.150", forced.stdout)
    plain_pipe = attn("run", samples / "colors.yaml", "-f", "table", env={**colours, "FORCE_COLOR": None})
    assert "\x1b[" not in plain_pipe.stdout
    data = attn("run", samples / "colors.yaml", env=colours)  # FORCE_COLOR never turns a pipe's JSON into a table
    assert data.stdout.startswith("{")


# --- signed heatmaps: gradients on the diverging scale ---------------------------------------------


def test_diverging_scale_is_symmetric_around_a_neutral_zero():
    from attncli.output.palette import DIVERGING, DIVERGING_256, luminance, xterm_entry

    neutral = colour(0.0, signed=True)
    assert neutral[0] == neutral[1] == neutral[2] and luminance(neutral) > 0.9  # no hue at 0
    assert colour(-1.0, signed=True) == DIVERGING[0] and colour(1.0, signed=True) == DIVERGING[-1]
    for x in (0.2, 0.5, 1.0):
        below, above = colour(-x, signed=True), colour(x, signed=True)
        assert below[2] > below[0] and above[0] > above[2]  # blue below 0, red above
        assert abs(luminance(below) - luminance(above)) < 0.05  # |x| reads alike on both sides
    sides = [luminance(colour(x / 10, signed=True)) for x in range(11)]
    assert sides == sorted(sides, reverse=True)  # darker the further from 0
    assert xterm_entry(0.0, signed=True) == 231 and len(set(DIVERGING_256)) == len(DIVERGING_256)
    assert [shade(x, signed=True) for x in (-1, -0.5, -0.2, 0, 0.2, 0.5, 1)] == list("≡=- +*#")


def test_a_signed_heatmap_runs_from_minus_to_plus_its_largest_magnitude():
    from attncli.output.palette import DIVERGING

    values = np.array([[-0.26, 0.52, 0.0]])
    text = render(Heatmap(values, ["r"], ["a", "b", "c"], precision=2, style=ViewStyle(), signed=True))
    codes = sgr_codes(text)
    assert (48, 2, *DIVERGING[-1]) in codes  # +0.52, the largest |value|: the red end
    assert (48, 2, 247, 247, 247) in codes  # 0: neutral
    assert (48, 2, *colour(-0.5, signed=True)) in codes  # −0.26 is half way to the blue end
    assert "−0.52 ▕" in plain(text) and "▏ +0.52" in plain(text)


def test_pool_of_signed_values_keeps_the_largest_magnitude_and_its_sign():
    x = np.array([[0.1, -0.9, 0.5, np.nan, np.nan, np.nan]])
    np.testing.assert_array_equal(pool(x, 2, 1, signed=True), [[-0.9, 0.5, np.nan]])
    np.testing.assert_array_equal(pool(x, 2, 1), [[0.1, 0.5, np.nan]])  # weights: the largest


def grad_inputs(path, q_heads, kv_heads, n_q, n_k, d, seed=4):
    rng = np.random.default_rng(seed)
    names = {
        "q": (1, q_heads, n_q, d),
        "k": (1, kv_heads, n_k, d),
        "v": (1, kv_heads, n_k, d),
        "dout": (1, q_heads, n_q, d),
    }
    for name, shape in names.items():
        np.save(path / f"{name}.npy", rng.normal(size=shape))
    return [path / "q.npy", path / "k.npy", path / "v.npy", "--dout", path / "dout.npy"]


def test_attn_grad_draws_a_heatmap_per_gradient(attn, monkeypatch, tmp_path):
    rng = np.random.default_rng(5)
    for name, shape in (("q", (3, 2)), ("k", (4, 2)), ("v", (4, 2)), ("dout", (3, 2))):
        np.savetxt(tmp_path / f"{name}.csv", rng.normal(size=shape), delimiter=",")
    files = [tmp_path / f"{n}.csv" for n in "qkv"]
    text = terminal(attn, monkeypatch, "grad", *files, "--dout", tmp_path / "dout.csv")
    from attncli import attention_grad
    from attncli.output.blocks import short

    grads = attention_grad(*(np.loadtxt(tmp_path / f"{n}.csv", delimiter=",") for n in ("q", "k", "v", "dout")))
    for name in ("dq", "dk", "dv"):
        top = short(np.abs(grads.named()[name]).max())
        assert f"−{top} ▕" in plain(text) and f"▏ +{top}" in plain(text)  # a legend per gradient
    assert (48, 2, *colour(1.0, signed=True)) in sgr_codes(text) and "0.150" not in text
    assert f"{grads.dq[0, 0]:.3f}" in plain(text)  # small: the numbers in the cells
    bare = plain(terminal(attn, monkeypatch, "grad", *files, "--dout", tmp_path / "dout.csv", env={"NO_COLOR": "1"}))
    assert f"{grads.dk[1, 1]:.3f}" in bare and "(no colour: read the signs)" in bare
    numbers = terminal(attn, monkeypatch, "grad", *files, "--dout", tmp_path / "dout.csv", "--view", "numbers")
    assert "48;2" not in numbers and "▕" not in numbers and f"{grads.dv[2, 0]:.3f}" in numbers


def test_attn_grad_view_with_grouped_heads_names_the_kv_heads(attn, monkeypatch, tmp_path):
    files = grad_inputs(tmp_path, 4, 2, 3, 5, 4)
    text = plain(terminal(attn, monkeypatch, "grad", *files))
    for h in range(4):
        assert f"batch 0 · head {h}: dq" in text
    for h in range(2):
        assert f"batch 0 · K/V head {h}: dk" in text and f"batch 0 · K/V head {h}: dv" in text
    one = plain(terminal(attn, monkeypatch, "grad", *files, "--head", "3"))
    assert "head 3: dq" in one and "K/V head 1: dk" in one and "K/V head 0" not in one  # query head 3's group


@pytest.mark.parametrize("columns", [80, 100])
def test_attn_grad_view_of_big_inputs_is_compact_and_cuts_no_cell(attn, monkeypatch, tmp_path, columns):
    files = grad_inputs(tmp_path, 2, 2, 300, 300, 16)
    text = plain(terminal(attn, monkeypatch, "grad", *files, "--head", "1", columns=columns))
    assert "16 dims across · 300 queries down" in text and "300 keys down" in text
    assert "values are more than a table draws: --view numbers shows them" in text
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= columns
    rows = [line for line in lines if re.match(r"\s*\d+–\d+ ▀", line)]
    assert len(rows) == 3 * 50 and all(line.count("▀") == 16 * 3 for line in rows)  # 16 dims, 3 cells wide
    bare = plain(terminal(attn, monkeypatch, "grad", *files, "--head", "1", columns=columns, env={"NO_COLOR": "1"}))
    assert "▕≡=- +*#▏" in bare and "below 0" in bare
