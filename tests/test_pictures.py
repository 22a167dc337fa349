"""--svg and --html: the terminal view as a file, written whole or not at all."""

import json
import os
import xml.etree.ElementTree as ET

import pytest

from attncli.errors import AttnError
from attncli.output import pictures as common

LABELS = ("#8517dc", "#fef0d9", "#02818a", "warm", "cool")


def svg_text(path):
    """All the text an SVG shows (Rich writes spaces as no-break spaces)."""
    root = ET.parse(path).getroot()  # parses as XML, or raises
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return "".join(root.itertext()).replace("\xa0", " ")


@pytest.mark.parametrize("command", ["run", "explain"])
def test_svg_and_html_alongside_json_on_stdout(attn, samples, tmp_path, command):
    svg, html = tmp_path / "v.svg", tmp_path / "v.html"
    result = attn(command, samples / "colors.yaml", "--svg", svg, "--html", html)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["columns"] == ["warm", "cool"]  # stdout is unchanged
    shown = svg_text(svg)
    page = html.read_text()
    for label in LABELS:
        assert label in shown and label in page, label
    assert "48.8 % warm, 51.2 % cool" in shown
    assert f"<title>attn {command}</title>" in page
    assert 'fill="#8517dc"' in svg.read_text()  # the query's swatch
    assert sorted(os.listdir(tmp_path)) == ["v.html", "v.svg"]  # no temporary files left


def test_pictures_keep_colour_under_no_color_and_fit_the_view(attn, samples, tmp_path):
    svg = tmp_path / "v.svg"
    result = attn("explain", samples / "colors.yaml", "--svg", svg, env={"NO_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert 'fill="#8517dc"' in svg.read_text()
    assert "3. Scaled scores" in svg_text(svg)


def test_picture_with_table_and_softmax(attn, samples, tmp_path):
    result = attn(
        "run", samples / "q.csv", samples / "k.csv", samples / "v.csv", "-f", "table", "--svg", tmp_path / "r.svg"
    )
    assert "apple" in result.stdout and "apple" in svg_text(tmp_path / "r.svg")
    attn("softmax", "4.0", "-1.0", "2.1", "--html", tmp_path / "s.html")
    assert "0.8648" in (tmp_path / "s.html").read_text()


def test_existing_file_is_replaced(attn, samples, tmp_path):
    svg = tmp_path / "v.svg"
    svg.write_text("old")
    attn("run", samples / "colors.yaml", "--svg", svg)
    assert "#8517dc" in svg_text(svg)


def test_unwritable_paths_are_one_line_errors(attn, samples, tmp_path):
    colors = samples / "colors.yaml"
    assert (
        attn.fails("run", colors, "--svg", tmp_path / "no" / "v.svg")
        == f"{tmp_path}/no/v.svg: cannot write: no such directory"
    )
    assert attn.fails("explain", colors, "--html", tmp_path) == f"{tmp_path}: is a directory, expected a file"
    assert (
        attn.fails("run", colors, "--svg", "-", code=2)
        == "a picture needs a file name, not '-' (stdout gets the --format output)"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_directory(attn, samples, tmp_path):  # pragma: no cover - CI runs as root
    tmp_path.chmod(0o500)
    try:
        assert (
            attn.fails("run", samples / "colors.yaml", "--svg", tmp_path / "v.svg")
            == f"{tmp_path}/v.svg: cannot write: permission denied"
        )
    finally:
        tmp_path.chmod(0o700)


def test_interrupted_write_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "v.svg"

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(common.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        common.write_atomically(str(target), "<svg/>")
    assert os.listdir(tmp_path) == []


def test_failed_rename_is_an_error_and_leaves_nothing(tmp_path, monkeypatch):
    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(common.os, "replace", full)
    with pytest.raises(AttnError, match="cannot write: No space left on device"):
        common.write_atomically(str(tmp_path / "v.html"), "<html/>")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "args, shown",
    [
        (
            ["lookup", "fruit", "--keys", "apple,banana,chair", "--values", "10,5,2"],
            ("query fruit", "banana", "weighted sum"),
        ),
        (["self", "the pink elephant", "--heads", "2", "--d-attn", "4"], ("head 0 of 2", "elephant", "output")),
    ],
)
def test_pictures_from_lookup_and_self(attn, tmp_path, args, shown):
    svg = tmp_path / "v.svg"
    result = attn(*args, "--svg", svg)
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout still gets the JSON
    text = svg_text(svg)
    for piece in shown:
        assert piece in text, piece
