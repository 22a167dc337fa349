"""The registries: every input format in FORMATS reads through read_input, by
extension, magic bytes or content; every --format choice has a writer; one
pluraliser, one number parser, one word2vec header parser."""

import io
import json
import os
import re
import threading
import tokenize
from pathlib import Path

import numpy as np
import pytest

from attncli.cli.emit import MATRIX_FORMATS, TABLE, Format
from attncli.errors import AttnError
from attncli.output.writers import WRITERS, Emitted
from attncli.readers import FORMATS, Bundle, Input, NotABundle, detect, read_input, sniff
from attncli.readers.base import LONE
from attncli.text import noun, parse_number, plural
from attncli.vectors.files import word2vec_header

MATRIX = np.array([[1.0, 2.5], [-3.0, 4.0]])


def npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def safetensors_bytes(**arrays) -> bytes:
    from safetensors.numpy import save

    return save(arrays)


# MATRIX in every input format: a format added to FORMATS needs a sample here.
SAMPLES = {
    "csv": b"1,2.5\n-3,4\n",
    "tsv": b"1\t2.5\n-3\t4\n",
    "txt": b"1 2.5\n-3 4\n",
    "npy": npy_bytes(MATRIX),
    "npz": npz_bytes(m=MATRIX),
    "safetensors": safetensors_bytes(m=MATRIX),
    "yaml": b"- [1, 2.5]\n- [-3, 4]\n",
    "json": b"[[1, 2.5], [-3, 4]]\n",
    "jsonl": b"[1, 2.5]\n[-3, 4]\n",
}


def test_every_format_has_a_sample():
    assert set(SAMPLES) == set(FORMATS)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_round_trips_through_read_input(name, tmp_path):
    form, data = FORMATS[name], SAMPLES[name]
    for extension in form.extensions or (".txt",):
        bundle = read_input(data, f"m{extension}")
        assert isinstance(bundle, Bundle) and bundle.single
        np.testing.assert_array_equal(bundle.matrix().values, MATRIX)
        path = tmp_path / f"m{extension}"
        path.write_bytes(data)
        np.testing.assert_array_equal(read_input(path).matrix().values, MATRIX)
    np.testing.assert_array_equal(read_input(data, "<stdin>").matrix().values, MATRIX)  # no extension: content


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_detection_finds_the_registry_entry(name):
    form, data = FORMATS[name], SAMPLES[name]
    for extension in form.extensions:
        assert detect(Input.of(data, f"dir.v2/m{extension.upper()}")) is form
    assert detect(Input.of(data, "no-extension")) is form  # magic bytes, else the text itself
    assert sniff(data) == name


def test_magic_bytes_and_extensions_come_from_the_registry():
    for form in FORMATS.values():
        for magic in form.magic:
            assert sniff(magic + b"\x00 anything") == form.name
    extensions = [e for form in FORMATS.values() for e in form.extensions]
    assert len(extensions) == len(set(extensions)) and all(e.startswith(".") and e == e.lower() for e in extensions)


def test_the_extension_wins_and_txt_or_dat_are_read_by_content():
    assert detect(Input.of(SAMPLES["npy"], "q.csv")).name == "csv"
    assert detect(Input.of(SAMPLES["csv"], "q.txt")).name == "csv"
    assert detect(Input.of(SAMPLES["tsv"], "q.dat")).name == "tsv"
    assert detect(Input.of(SAMPLES["txt"], "q.txt")).name == "txt"


def test_an_explicit_format_overrides_detection():
    assert read_input(b"1 2\n", "m.csv", "txt").matrix().values.tolist() == [[1, 2]]


def test_a_float_npy_file_is_memory_mapped_and_bytes_are_not(tmp_path):
    path = tmp_path / "k.npy"
    path.write_bytes(SAMPLES["npy"])
    assert isinstance(read_input(path).matrix().values, np.memmap)
    assert isinstance(read_input(Input.file(path, "K")).matrix().values, np.memmap)
    assert not isinstance(read_input(SAMPLES["npy"], "k.npy").matrix().values, np.memmap)
    (tmp_path / "i.npy").write_bytes(npy_bytes(np.eye(2, dtype=bool)))  # not floats: read, not mapped
    assert read_input(tmp_path / "i.npy", mask=True).matrix().values.dtype == bool


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", ["k.npy", "k"])
def test_a_fifo_is_read_once(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as f:
            f.write(SAMPLES["npy"])

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        np.testing.assert_array_equal(read_input(fifo).matrix().values, MATRIX)
    finally:
        writer.join(5)


def test_input_is_read_once_and_names_errors_by_the_given_name(tmp_path):
    path = tmp_path / "q.csv"
    path.write_bytes(b"1,2\n")
    source = Input.file(path, "Q")
    assert source.mappable and source.data() == b"1,2\n" and not source.mappable
    path.unlink()
    assert source.data() == b"1,2\n"
    with pytest.raises(AttnError, match=r"^Q: no such file$"):
        read_input(Input.file(path, "Q"))
    with pytest.raises(ValueError):
        read_input(b"1,2\n")  # bytes need a name
    with pytest.raises(ValueError):
        Input("x", path="x", data=b"")


# ---------------------------------------------------------------- bundles


def test_a_bundle_of_a_single_matrix_format_is_refused_in_data_terms():
    for name in ("csv", "tsv", "txt", "npy"):
        with pytest.raises(NotABundle) as e:
            read_input(SAMPLES[name], f"b.{name}", bundle=True)
        assert str(e.value) == (
            f"b.{name}: a {name.upper()} file holds one matrix, not a bundle "
            "(named matrices come in NPZ/SAFETENSORS/YAML/JSON files)"
        )


def test_bundles_from_yaml_json_and_npz():
    yaml = read_input(b"description: hi\nq: [[1]]\nmask: [[true]]\n", "b.yaml", bundle=True)
    assert list(yaml.matrices) == ["q", "mask"] and yaml.meta == {"description": "hi"} and not yaml.single
    assert yaml.matrices["mask"].values.dtype == np.float64  # a mask entry takes booleans
    npz = read_input(npz_bytes(q=MATRIX, mask=np.eye(2, dtype=bool)), "b.npz", bundle=True)
    assert list(npz.matrices) == ["q", "mask"] and npz.matrices["mask"].values.dtype == bool
    with pytest.raises(ValueError):
        npz.matrix()


def test_a_bundle_only_when_it_has_one_of_the_names():
    tree = b"X: [[1, 2]]\nwq: [[1], [2]]\n"
    assert set(read_input(tree, "b.yaml", bundle={"x"}).matrices) == {"X", "wq"}
    single = read_input(b"a: [1, 2]\nb: [3, 4]\n", "m.yaml", bundle={"x"})
    assert single.single and single.matrix().row_labels == ["a", "b"]
    assert set(read_input(npz_bytes(x=MATRIX, wq=MATRIX), "b.npz", bundle={"x"}).matrices) == {"x", "wq"}
    assert read_input(npz_bytes(a=MATRIX), "m.npz", bundle={"x"}).single
    assert read_input(SAMPLES["csv"], "m.csv", bundle={"x"}).single
    with pytest.raises(AttnError, match="holds several arrays \\(a, b\\), expected one matrix"):
        read_input(npz_bytes(a=MATRIX, b=MATRIX), "m.npz", bundle={"x"})
    assert list(Bundle.of(read_input(SAMPLES["csv"], "m.csv").matrix()).matrices) == [LONE]


def _string_literals(path: Path):
    with open(path, "rb") as f:
        for token in tokenize.tokenize(f.readline):
            if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                yield token.start[0], token.string


def test_no_reader_message_names_a_command_line_flag():
    package = Path(__file__).parent.parent / "attncli"
    for folder in ("readers", "vectors"):
        for path in sorted((package / folder).glob("*.py")):
            for line, text in _string_literals(path):
                assert not re.search(r"--[a-z]", text), f"{path.name}:{line}: {text}"


# ---------------------------------------------------------------- writers


def test_the_cli_formats_are_table_and_the_writers():
    assert [f.value for f in Format] == [TABLE, *WRITERS]
    assert {f.value for f in MATRIX_FORMATS} == {name for name, w in WRITERS.items() if not w.whole}
    assert all(w.name == name for name, w in WRITERS.items())


@pytest.mark.parametrize("name", [name for name, w in WRITERS.items() if not w.whole])
def test_every_matrix_writer_reads_back(name):
    writer = WRITERS[name]
    stream = io.BytesIO() if writer.binary else io.StringIO()
    writer.write(stream, Emitted(MATRIX, ["a", "b"], ["x", "y"]))
    data = stream.getvalue() if writer.binary else stream.getvalue().encode()
    m = read_input(data, f"out.{name}").matrix()
    np.testing.assert_array_equal(m.values, MATRIX)
    if not writer.binary:
        assert m.row_labels == ["a", "b"] and m.col_labels == ["x", "y"]


def test_the_json_writer_writes_the_whole_result():
    out = io.StringIO()
    WRITERS["json"].write(out, {"weights": MATRIX, "queries": ["a", "b"]})
    assert json.loads(out.getvalue()) == {"weights": MATRIX.tolist(), "queries": ["a", "b"]}


def test_writers_flatten_leading_axes_into_labelled_rows():
    weights = np.arange(12.0).reshape(2, 3, 2)  # [heads, n_q, n_k]
    out = io.StringIO()
    WRITERS["csv"].write(out, Emitted(weights, ["the", "cat", "sat"], ["k0", "k1"]))
    lines = out.getvalue().splitlines()
    assert lines[0] == ",k0,k1" and lines[1] == "0:the,0.0,1.0" and lines[4] == "1:the,6.0,7.0" and len(lines) == 7
    out = io.StringIO()
    WRITERS["tsv"].write(out, Emitted(weights.reshape(1, 2, 3, 2)))
    assert out.getvalue().splitlines()[3] == "0:1:0\t6.0\t7.0"
    binary = io.BytesIO()
    WRITERS["npy"].write(binary, Emitted(weights, ["the", "cat", "sat"]))
    np.testing.assert_array_equal(np.load(io.BytesIO(binary.getvalue())), weights)


# ---------------------------------------------------------------- one of each helper


def test_one_pluraliser():
    assert [plural(n, "value") for n in (0, 1, 2)] == ["0 values", "1 value", "2 values"]
    assert plural(1, "query", "queries") == "1 query" and plural(3, "query", "queries") == "3 queries"
    assert noun(1, "word") == "word" and noun(2, "word") == "words"


def test_one_number_parser():
    assert [parse_number(t) for t in ("2", " -1.5e3 ", "1_000", "x", "", "1,5")] == [2, -1500, 1000, None, None, None]
    assert parse_number("-inf") == -np.inf and np.isnan(parse_number("nan"))


def test_one_word2vec_header_parser():
    assert word2vec_header(b"3 50\n") == (3, 50) and word2vec_header("3 50\r\n") == (3, 50)
    for line in (b"3\n", b"3 50 1\n", b"the 1 2\n", "3 ५", b"-3 2", b""):
        assert word2vec_header(line) is None
