"""--png and --pdf: matplotlib figures of the weights, with labelled axes, a
colour bar and one panel per head; a one-line error without matplotlib."""

import json
import struct
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from attncli.output.figures import figure  # noqa: E402
from attncli.output.maps import AttentionMaps  # noqa: E402

KEYS = ["#fef0d9", "#fdcc8a", "#fc8d59", "#d7301f", "#f6eff7", "#bdc9e1", "#67a9cf", "#02818a"]


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def panels(fig):
    """The heatmap axes (not the colour bar), in order."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.images and ax.get_label() != "<colorbar>"]


def test_png_and_pdf_beside_json(attn, samples, tmp_path):
    png, pdf = tmp_path / "w.png", tmp_path / "w.pdf"
    result = attn("run", samples / "colors.yaml", "--png", png, "--pdf", pdf)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["columns"] == ["warm", "cool"]
    width, height = png_size(png)
    assert width > 600 and height > 300
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 5000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.pdf", "w.png"]  # nothing half-written left


def test_one_panel_labelled_with_a_colour_bar_from_0_to_1():
    w = np.array([[0.150, 0.128, 0.114, 0.096, 0.158, 0.140, 0.121, 0.093]])
    fig = figure(AttentionMaps.single(w, ["#8517dc"], KEYS), "attn run")
    (ax,) = panels(fig)
    assert ax.get_xlabel() == "keys" and ax.get_ylabel() == "queries"
    assert [t.get_text() for t in ax.get_xticklabels()] == KEYS
    assert [t.get_text() for t in ax.get_yticklabels()] == ["#8517dc"]
    assert ax.images[0].get_clim() == (0.0, 1.0)
    assert fig._suptitle.get_text() == "attn run"
    bar = next(a for a in fig.axes if a.get_label() == "<colorbar>")
    assert bar.get_ylabel() == "weight"
    assert "0.16" in [t.get_text() for t in ax.texts]  # small panels print their weights


def test_a_panel_per_head_and_the_scale_to_the_largest(attn, tmp_path, monkeypatch):
    import attncli.output.figures as figures

    drawn = []
    real = figures.figure
    monkeypatch.setattr(figures, "figure", lambda maps, title: drawn.append(real(maps, title)) or drawn[-1])
    result = attn("self", "the pink elephant tried", "--heads", "2", "--scale-to-max", "--png", tmp_path / "s.png")
    assert result.exit_code == 0, result.output
    weights = np.array(json.loads(result.stdout)["weights"])
    axes = panels(drawn[0])
    assert [ax.get_title() for ax in axes] == ["head 0", "head 1"]
    assert axes[0].images[0].get_clim() == (0.0, pytest.approx(weights.max()))
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["the", "pink", "elephant", "tried"]
    assert axes[1].get_ylabel() == ""  # queries are named once, on the left
    assert png_size(tmp_path / "s.png")[0] > 800


def test_layers_by_heads_grid_and_masked_pairs_in_grey():
    rng = np.random.default_rng(0)
    w = rng.dirichlet(np.ones(5), size=(2, 3, 5))  # [layers, heads, n_q, n_k]
    allowed = np.tril(np.ones((5, 5), bool))
    maps = AttentionMaps(
        w, list("abcde"), list("abcde"), ["layer 0", "layer 1"], ["head 0", "head 1", "head 2"], allowed
    )
    fig = figure(maps, "")
    axes = panels(fig)
    assert len(axes) == 6 and axes[4].get_title() == "layer 1 · head 1"
    shown = axes[0].images[0].get_array()
    assert shown.mask[0, 4] and not shown.mask[4, 0]


def test_many_keys_are_numbered_not_named():
    w = np.full((2, 300), 1 / 300)
    fig = figure(AttentionMaps.single(w, ["a", "b"], [f"k{j}" for j in range(300)]), "")
    labels = [t.get_text() for t in panels(fig)[0].get_xticklabels()]
    assert labels[:3] == ["0", "30", "60"] and len(labels) == 10


def test_without_matplotlib_one_line_and_no_file(attn, samples, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    svg, png = tmp_path / "w.svg", tmp_path / "w.png"
    assert (
        attn.fails("run", samples / "colors.yaml", "--svg", svg, "--png", png)
        == "--png needs matplotlib, from the 'plot' extra (pip install '.[plot]' in attn's source folder)"
    )
    assert (
        attn.fails("run", samples / "colors.yaml", "--pdf", png)
        == "--pdf needs matplotlib, from the 'plot' extra (pip install '.[plot]' in attn's source folder)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_figure_needs_a_file_name(attn, samples):
    assert (
        attn.fails("run", samples / "colors.yaml", "--png", "-", code=2)
        == "a picture needs a file name, not '-' (stdout gets the --format output)"
    )


def test_tensors_draw_a_panel_per_batch_and_head(attn, tmp_path, monkeypatch):
    import attncli.output.figures as figures

    rng = np.random.default_rng(0)
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", rng.normal(size=(2, 3, 5, 4)).astype(np.float32))
    drawn = []
    real = figures.figure
    monkeypatch.setattr(figures, "figure", lambda maps, title: drawn.append(real(maps, title)) or drawn[-1])
    html = tmp_path / "t.html"
    result = attn("run", *(tmp_path / f"{n}.npy" for n in "qkv"), "--png", tmp_path / "t.png", "--html", html)
    assert result.exit_code == 0, result.output
    titles = [ax.get_title() for ax in panels(drawn[0])]
    assert len(titles) == 6 and titles[5] == "batch 1 · head 2"
    data = json.loads(html.read_text().split('id="attn-data">')[1].split("</script>")[0])
    assert data["layerAxis"] == "batch" and data["layers"] == ["batch 0", "batch 1"] and data["shape"] == [2, 3, 5, 5]
