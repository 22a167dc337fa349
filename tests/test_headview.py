"""The head view: a standalone page (nothing fetched) that draws a line per
query–key pair as thick as its weight, checked in a real browser (headless
Chromium, offline) by reading the drawn lines back; and the static SVG.

Without Chromium the browser tests skip, unless ATTN_REQUIRE_BROWSER=1 (set by
.ci/run, which installs Debian's chromium): then a missing browser fails."""

import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from attncli.output.headview import GEOMETRY, page, static_svg
from attncli.output.maps import AttentionMaps

SVG = "{http://www.w3.org/2000/svg}"


def chromium():
    """The browser's path, or a skip (a failure when ATTN_REQUIRE_BROWSER=1)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    reason = "no Chromium (apt-get install chromium; .ci/run does)"
    if os.environ.get("ATTN_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + ", and ATTN_REQUIRE_BROWSER=1")
    pytest.skip(reason)


def load(page_path, fragment=""):
    """The page's DOM after its script ran, and the browser's log, offline: every host name
    resolves to nothing, so a page that fetched anything would fail to."""
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-extensions",
                f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                f"file://{Path(page_path).resolve()}{fragment}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.stderr


class Drawn(HTMLParser):
    """The lines and tokens of a dumped page, and <body>'s data attributes."""

    def __init__(self, dom):
        super().__init__()
        self.lines, self.tokens, self.body = [], {}, {}
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "line" and "link" in a.get("class", ""):
            self.lines.append(a)
        elif tag == "text" and "token" in a.get("class", "").split():
            self.tokens[(a["data-side"], int(a["data-index"]))] = a


def browser_errors(log):
    return [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]


def y(i):
    return GEOMETRY["top"] + (i + 0.5) * GEOMETRY["row"]


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A tiny BERT's trace of a text as a head view page, and its weights from the JSON."""
    pytest.importorskip("tokenizers")
    from test_trace import write_model
    from typer.testing import CliRunner

    from attncli.cli import app

    folder = tmp_path_factory.mktemp("hv")
    model = write_model(folder / "m")
    html = folder / "page.html"
    result = CliRunner().invoke(
        app, ["trace", "the pink elephant it was too big", "-m", str(model), "--html", str(html)]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    return html, np.array(out["weights"], dtype=np.float32), out["tokens"]


def test_the_page_fetches_nothing(traced):
    html, _, tokens = traced
    text = html.read_text()
    assert re.findall(r"https?://[^\s\"'<>)]+", text) == ["http://www.w3.org/2000/svg"] * 2
    assert "<link" not in text and "src=" not in text and "@import" not in text and "url(" not in text
    assert "<title>attn trace</title>" in text
    assert "The same run in the terminal" in text  # the terminal view is there too


def test_browser_draws_each_weight_as_a_line_as_thick_as_it(traced):
    html, weights, tokens = traced
    dom, log = load(html)
    drawn = Drawn(dom)
    assert drawn.body.get("data-ready") == "yes" and "data-error" not in drawn.body
    assert browser_errors(log) == []
    layer0 = weights[0]  # the page opens on layer 0, every head
    expected = {(h, q, k) for h, q, k in zip(*np.nonzero(layer0 >= GEOMETRY["minWeight"]), strict=True)}
    got = {(int(a["data-head"]), int(a["data-q"]), int(a["data-k"])) for a in drawn.lines}
    assert got == expected and len(drawn.lines) == len(expected)
    for a in drawn.lines:
        h, q, k = int(a["data-head"]), int(a["data-q"]), int(a["data-k"])
        w = float(layer0[h, q, k])
        assert float(a["data-w"]) == pytest.approx(w, rel=1e-6)
        assert float(a["stroke-width"]) == pytest.approx(w * GEOMETRY["maxStroke"], rel=1e-5)
        assert float(a["y1"]) == y(q) and float(a["y2"]) == y(k)  # from the query's row to the key's
        assert a["class"] == "link"  # nothing picked: every line shows
    assert [drawn.tokens[("q", i)] for i in range(len(tokens))]  # every token drawn on both sides
    assert [drawn.tokens[("k", i)] for i in range(len(tokens))]


def test_browser_picks_a_layer_a_head_and_a_token(traced):
    html, weights, tokens = traced
    dom, log = load(html, "#layer=1&heads=1&query=3")
    drawn = Drawn(dom)
    assert browser_errors(log) == [] and "data-error" not in drawn.body
    assert {a["data-layer"] for a in drawn.lines} == {"1"} and {a["data-head"] for a in drawn.lines} == {"1"}
    shown = [a for a in drawn.lines if a["class"] == "link"]
    assert {int(a["data-q"]) for a in shown} == {3}  # only the picked query's lines show
    assert sorted(int(a["data-k"]) for a in shown) == sorted(
        np.nonzero(weights[1, 1, 3] >= GEOMETRY["minWeight"])[0].tolist()
    )
    assert "active" in drawn.tokens[("q", 3)]["class"] and "dim" in drawn.tokens[("q", 2)]["class"]
    numbers = re.search(r'<div id="numbers">(.*?)</div>', dom, re.S).group(1)
    heaviest = int(weights[1, 1, 3].argmax())
    assert f"{tokens[heaviest]} {weights[1, 1, 3, heaviest]:.4f}" in numbers  # the numbers of the picked token


def test_run_page_with_a_mask_draws_no_forbidden_pair(samples, tmp_path, attn):
    html = tmp_path / "run.html"
    result = attn("run", samples / "q.csv", samples / "k.csv", samples / "v.csv", "--causal", "--html", html)
    assert result.exit_code == 0, result.output
    weights = np.array(json.loads(result.stdout)["weights"])
    drawn = Drawn(load(html)[0])
    assert [(int(a["data-q"]), int(a["data-k"])) for a in drawn.lines] == [(0, 0)]  # fruit sees apple only
    assert float(drawn.lines[0]["data-w"]) == weights[0, 0] == 1.0


def test_labels_cannot_break_out_of_the_page(tmp_path):
    evil = ["</script><script>alert(1)</script>", "<b>&amp;", "naïve ✓"]
    maps = AttentionMaps.single(np.full((3, 3), 1 / 3), evil, evil)
    text = page(maps, "attn run")
    assert "</script><script>" not in text.split('id="attn-data">')[1].split("</script>")[0]
    data = json.loads(text.split('id="attn-data">')[1].split("</script>")[0])
    assert data["queries"] == evil


def test_static_svg_draws_the_same_lines(tmp_path, attn):
    result = attn("self", "the pink elephant tried", "--heads", "2", "--svg", tmp_path / "s.svg")
    assert result.exit_code == 0, result.output
    weights = np.array(json.loads(result.stdout)["weights"])  # [heads, n, n]
    root = ET.parse(tmp_path / "s.svg").getroot()
    lines = [e for e in root.iter(f"{SVG}line") if e.find(f"{SVG}title") is not None]
    assert len(lines) == int((weights >= GEOMETRY["minWeight"]).sum())
    for e, w in zip(lines, weights[weights >= GEOMETRY["minWeight"]], strict=True):  # head, query, key order
        assert float(e.get("stroke-width")) == pytest.approx(w * GEOMETRY["maxStroke"], abs=1e-3)
    text = "".join(root.itertext())
    assert "head 0" in text and "head 1" in text and "line width = weight" in text
    assert "softmax" in text.replace("\xa0", " ")  # and the terminal view below
    assert "http" not in (tmp_path / "s.svg").read_text().replace("http://www.w3.org/2000/svg", "")


def test_static_svg_draws_a_few_heads_and_leaves_many_to_the_terminal_view():
    from attncli.output.pictures import with_head_view

    few = AttentionMaps(np.full((1, 3, 2, 2), 0.5), ["a", "b"], ["a", "b"], [""], ["h0", "h1", "h2"])
    drawing, _, _ = static_svg(few, "t")
    assert drawing.count("<line") == 3 * 4 + 3  # three panels of 2×2 lines, and the legend's three
    many = AttentionMaps(np.full((2, 3, 2, 2), 0.5), ["a", "b"], ["a", "b"], ["l0", "l1"], ["h0", "h1", "h2"])
    terminal = '<svg class="rich-terminal" viewBox="0 0 100 50" xmlns="http://www.w3.org/2000/svg"></svg>'
    assert with_head_view(terminal, many, "t") == terminal  # six heads: the terminal's grid shows them
    assert with_head_view(terminal, few, "t").count("<line") == 15


def test_too_many_weights_for_lines_is_a_note_and_the_terminal_view(attn, samples, tmp_path, monkeypatch):
    import attncli.output.headview as headview

    monkeypatch.setattr(headview, "MAX_WEIGHTS", 5)
    html, svg = tmp_path / "w.html", tmp_path / "w.svg"
    result = attn("run", samples / "colors.yaml", "--html", html, "--svg", svg)
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "attn: note: 8 weights are too many to draw a line each (at most 5): "
        "the picture shows the terminal view only; --png draws them all\n"
    )
    assert "attn-data" not in html.read_text() and "0.150" in html.read_text()
    assert "line width = weight" not in svg.read_text()
    json.loads(result.stdout)


# --- exploring: temperature and scale sliders that recompute the weights in the page -------------


def probed(html, probe, tmp_path, fragment=""):
    """The page with ``probe`` (a script, run after the page's own) added, loaded; -> (DOM, log)."""
    text = html.read_text()
    page_copy = tmp_path / "probed.html"
    page_copy.write_text(text.replace("</body>", f"<script>{probe}</script></body>"))
    return load(page_copy, fragment)


class Cells(HTMLParser):
    """The explore section's weight cells {(q, k): (w, class)} and outputs {(q, c): value}."""

    def __init__(self, dom):
        super().__init__()
        self.weights, self.outputs, self.body, self.explore = {}, {}, {}, {}
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "section" and a.get("id") == "explore":
            self.explore = a
        elif tag == "td" and a.get("class") in ("weight", "forbidden"):
            w = float(a["data-w"]) if "data-w" in a else None
            self.weights[(int(a["data-q"]), int(a["data-k"]))] = (w, a["class"])
        elif tag == "td" and a.get("class") == "value":
            self.outputs[(int(a["data-q"]), int(a["data-c"]))] = float(a["data-value"])


def move(slider, value):
    return (
        f'var s = document.getElementById("{slider}"); s.value = "{value}"; '
        's.dispatchEvent(new Event("input", {bubbles: true}));'
    )


@pytest.mark.parametrize(
    ("command", "probe", "options"),
    [
        ("run", "", []),  # as the page opens: attn's own numbers
        ("explain", move("temperature", "1"), ["--temperature", "2"]),  # the slider: 2^1
        ("run", move("temperature", "-2"), ["--temperature", "0.25"]),
        ("explain", move("scale", "-1"), ["--scale", str(0.5 / math.sqrt(3))]),  # half of 1/√3
    ],
)
def test_sliders_recompute_the_weights_as_attn_does(attn, samples, tmp_path, command, probe, options):
    html = tmp_path / "page.html"
    result = attn(command, samples / "colors.yaml", "--html", html)
    assert result.exit_code == 0, result.output
    want = attn.json("run", samples / "colors.yaml", *options)
    dom, log = probed(html, probe, tmp_path)
    cells = Cells(dom)
    assert browser_errors(log) == [] and "data-error" not in cells.body and "hidden" not in cells.explore
    got = np.array([[cells.weights[(0, k)][0] for k in range(8)]])
    np.testing.assert_allclose(got, want["weights"], rtol=1e-12)
    np.testing.assert_allclose([[cells.outputs[(0, c)] for c in range(2)]], want["output"], rtol=1e-12)
    drawn = Drawn(dom)  # the head view's lines follow the sliders too
    assert sorted(float(a["data-w"]) for a in drawn.lines) == pytest.approx(sorted(want["weights"][0]), rel=1e-6)
    assert float(cells.explore["data-temperature"]) == want["temperature"]


def test_the_address_sets_the_temperature(attn, samples, tmp_path):
    html = tmp_path / "page.html"
    assert attn("run", samples / "q.csv", samples / "k.csv", samples / "v.csv", "--html", html).exit_code == 0
    want = attn.json("run", samples / "q.csv", samples / "k.csv", samples / "v.csv", "--temperature", "3")
    cells = Cells(load(html, "#temperature=3")[0])
    np.testing.assert_allclose([[cells.weights[(0, k)][0] for k in range(3)]], want["weights"], rtol=1e-12)


def test_forbidden_cells_are_drawn_forbidden(attn, samples, tmp_path):
    html = tmp_path / "page.html"
    args = (samples / "q.csv", samples / "k.csv", samples / "v.csv", "--causal")
    assert attn("explain", *args, "--html", html).exit_code == 0
    cells = Cells(probed(html, move("temperature", "2"), tmp_path)[0])
    assert cells.weights[(0, 0)] == (1.0, "weight")
    assert cells.weights[(0, 1)] == (None, "forbidden") and cells.weights[(0, 2)] == (None, "forbidden")


def test_no_sliders_where_the_page_cannot_redo_the_maths(attn, samples, tmp_path):
    html = tmp_path / "page.html"
    assert attn("run", samples / "colors.yaml", "--softcap", "5", "--html", html).exit_code == 0
    assert '"explore": null' in html.read_text()
    big = tmp_path / "big.npz"
    rng = np.random.default_rng(0)
    np.savez(big, q=rng.normal(size=(65, 4)), k=rng.normal(size=(65, 4)), v=rng.normal(size=(65, 2)))
    assert attn("run", big, "--html", html).exit_code == 0
    assert '"explore": null' in html.read_text()


PROBE_LAYOUT = (
    'var t = document.querySelector("#view text.column");'
    "document.body.dataset.titleLeft = t.getBBox().x;"
    'document.body.dataset.heads = getComputedStyle(document.getElementById("heads")).display;'
)


def test_short_labels_keep_the_queries_title_whole_and_one_head_shows_no_button(attn, tmp_path):
    (tmp_path / "b.yaml").write_text("q: {a: [1, 0]}\nk: {b: [1, 0], c: [0, 1]}\nv: [[1], [2]]\n")
    html = tmp_path / "page.html"
    assert attn("run", tmp_path / "b.yaml", "--html", html).exit_code == 0
    body = Drawn(probed(html, PROBE_LAYOUT, tmp_path)[0]).body
    assert float(body["data-title-left"]) >= 0  # "queries", not "ueries"
    assert body["data-heads"] == "none"  # no lone "weights" button


def test_a_decoder_page_draws_no_forbidden_pair_and_numbers_leave_them_out(tmp_path, attn):
    """The causal triangle travels as NaN: no line, and the numbers say how many are forbidden, never 0."""
    pytest.importorskip("tokenizers")
    import decoder_models as dm

    folder = dm.refs.write_folder(tmp_path / "gpt2", "gpt2", tokenizer=dm.refs.train_tokenizer())
    html = tmp_path / "causal.html"
    result = attn("trace", "The pink elephant", "-m", folder, "--layer", "0", "--html", html)
    assert result.exit_code == 0, result.output
    weights = np.array(json.loads(result.stdout)["weights"], dtype=float)[0]  # [heads, n, n], null as NaN
    n = weights.shape[-1]
    dom, log = load(html, "#heads=0&query=1")
    drawn = Drawn(dom)
    assert browser_errors(log) == [] and "data-error" not in drawn.body
    assert all(int(a["data-k"]) <= int(a["data-q"]) for a in drawn.lines)  # nothing above the diagonal
    numbers = re.search(r'<div id="numbers">(.*?)</div>', dom, re.S).group(1)
    assert f"({n - 2} forbidden)" in numbers and "0.0000" not in numbers
    assert f"{weights[0, 1, 0]:.4f}" in numbers
