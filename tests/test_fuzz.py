"""Fuzzing the readers: whatever the bytes, a reader returns the matrix a
correct reader would, or raises AttnError with one line — never another
exception, never NaN, never a hang (inputs are bounded in size).

A longer search on demand (see tests/conftest.py):
    ATTN_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py
"""

import io
import json

import numpy as np
import yaml
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attncli.errors import AttnError
from attncli.output.writers import write_delimited
from attncli.readers import read_bundle, read_matrix
from attncli.text import parse_number

SOURCES = ["a.csv", "a.tsv", "a.txt", "a.yaml", "a.json", "a.jsonl", "a.npy", "a.npz", "<stdin>"]

finite = st.floats(allow_nan=False, allow_infinity=False)
matrices = st.tuples(st.integers(1, 6), st.integers(1, 6)).flatmap(
    lambda shape: arrays(np.float64, shape, elements=finite)
)
label_text = st.text(
    st.characters(categories=("L", "N", "P", "S", "Zs"), exclude_characters="\ufeff"),
    min_size=1,
    max_size=12,
).filter(lambda s: s == s.strip() and parse_number(s) is None)


def labels(n):
    return st.one_of(st.none(), st.lists(label_text, min_size=n, max_size=n))


def check(data: bytes, source: str, mask: bool = False) -> None:
    """The reader's contract, for any bytes."""
    try:
        m = read_matrix(data, source, mask=mask)
    except AttnError as e:
        assert "\n" not in str(e) and str(e)
        return
    assert m.values.ndim == 2 and m.values.size > 0
    if m.values.dtype != bool:
        assert m.values.dtype in (np.float32, np.float64)
        assert not np.isnan(m.values).any()
        assert (~np.isinf(m.values)).all() or mask
    if m.row_labels is not None:
        assert len(m.row_labels) == m.values.shape[0]
    if m.col_labels is not None:
        assert len(m.col_labels) == m.values.shape[1]


def mutate(data: bytes, edits) -> bytes:
    """Apply (position, kind, byte) edits: flip, insert, delete, or cut."""
    out = bytearray(data)
    for pos, kind, byte in edits:
        if not out:
            break
        pos %= len(out)
        if kind == 0:
            out[pos] ^= byte or 1
        elif kind == 1:
            out.insert(pos, byte)
        elif kind == 2:
            del out[pos]
        else:
            del out[pos:]
    return bytes(out)


edit_lists = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 3), st.integers(0, 255)), max_size=6)


# ---------------------------------------------------------------- round trips


@given(matrices, st.data(), st.sampled_from([",", "\t"]))
def test_delimited_round_trip(values, data, delimiter):
    rows = data.draw(labels(values.shape[0]))
    cols = data.draw(labels(values.shape[1]))
    text = io.StringIO()
    write_delimited(text, values, rows, cols, delimiter)
    m = read_matrix(text.getvalue().encode(), "a.csv" if delimiter == "," else "a.tsv")
    np.testing.assert_array_equal(m.values, values)
    assert m.row_labels == rows and m.col_labels == cols


@given(matrices, st.booleans())
def test_yaml_and_json_round_trip(values, as_json):
    text = json.dumps(values.tolist()) if as_json else yaml.safe_dump(values.tolist())
    m = read_matrix(text.encode(), "a.json" if as_json else "a.yaml")
    np.testing.assert_array_equal(m.values, values)


@given(matrices, st.sampled_from([np.float32, np.float64]))
def test_npy_round_trip(values, dtype):
    values = values.clip(-3e38, 3e38)  # inside float32's range
    buffer = io.BytesIO()
    np.save(buffer, values.astype(dtype))
    m = read_matrix(buffer.getvalue(), "<stdin>")
    assert m.values.dtype == dtype
    np.testing.assert_array_equal(m.values, values.astype(dtype))


# ---------------------------------------------------------------- garbage and mutations


@given(st.binary(max_size=600), st.sampled_from(SOURCES), st.booleans())
def test_random_bytes(data, source, mask):
    check(data, source, mask)


@given(st.text(st.sampled_from('0123456789.,;-+e \t\r\n"#:[]{}abnif\u2212'), max_size=300), st.sampled_from(SOURCES))
def test_random_text_of_number_characters(text, source):
    check(text.encode(), source)


def valid_samples():
    values = np.array([[1.5, -2.0, 3.25], [0.0, 4.0, -1e-3]])
    csv_text, tsv_text = io.StringIO(), io.StringIO()
    write_delimited(csv_text, values, ["a", "b"], ["x", "y", "z"], ",")
    write_delimited(tsv_text, values, None, None, "\t")
    npy, npz = io.BytesIO(), io.BytesIO()
    np.save(npy, values.astype(np.float32))
    np.savez(npz, q=values, k=values, v=values, k_labels=np.array(["a", "b"]))
    return {
        "a.csv": csv_text.getvalue().encode(),
        "a.tsv": tsv_text.getvalue().encode(),
        "a.yaml": b"q:\n  divide: 2\n  rows:\n    a: [1, 2e3]\n    b: [.5, 010]\nk: &k [[1, 2], [3, 4]]\nv: *k\n",
        "a.json": json.dumps({"q": values.tolist(), "k": {"a": [1, 2, 3], "b": [4, 5, 6]}}).encode(),
        "a.jsonl": b"[1.5, -2, 3.25]\n[0, 4, -0.001]\n",
        "a_records.jsonl": b'{"x": 1.5, "y": -2}\n{"x": 0, "y": 4}\n',
        "a_eu.csv": "sep=;\r\nx;y;z\r\n1,5;\u22122;3,25\r\n0;4;-0,001\r\n".encode("utf-16"),
        "a.npy": npy.getvalue(),
        "a.npz": npz.getvalue(),
    }


SAMPLES = valid_samples()


@given(st.sampled_from(sorted(SAMPLES)), edit_lists, st.booleans())
def test_mutated_files(source, edits, as_stdin):
    data = mutate(SAMPLES[source], edits)
    check(data, "<stdin>" if as_stdin else source)
    if source.endswith((".yaml", ".json", ".npz")):
        try:
            bundle = read_bundle(data, source)
        except AttnError as e:
            assert "\n" not in str(e)
        else:
            for m in bundle.matrices.values():
                assert m.values.ndim == 2 and np.isfinite(m.values[m.values.dtype != bool]).all()


@given(st.sampled_from(sorted(SAMPLES)), edit_lists)
def test_mutated_input_through_stdin_of_the_cli(source, edits):
    """The CLI on mutated stdin: exit 0 with JSON, or 1/2 with one error line and no output."""
    from typer.testing import CliRunner

    from attncli.cli import app

    data = mutate(SAMPLES[source], edits)
    args = ["run", "-"] if source.endswith((".yaml", ".json", ".npz")) else ["run", "-", "-"][:2] + ["a", "b"]
    result = CliRunner().invoke(app, args, input=data)
    if result.exit_code == 0:
        json.loads(result.stdout)
    else:
        assert result.exit_code in (1, 2), result.output
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("attn: error: ")
