"""Readers: every format, labels, sniffing, and every refusal with its position."""

import io
import re

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.readers import read_bundle, read_matrix, sniff
from attncli.readers.limits import TREE_NODES


def npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npz_bytes(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def error(data: bytes, source: str, **kwargs) -> str:
    with pytest.raises(AttnError) as e:
        read_matrix(data, source, **kwargs)
    return str(e.value)


# ---------------------------------------------------------------- CSV / TSV / text


def test_plain_csv():
    m = read_matrix(b"1,2\n3,4.5\n", "a.csv")
    assert m.values.tolist() == [[1, 2], [3, 4.5]] and m.values.dtype == np.float64
    assert m.row_labels is None and m.col_labels is None


def test_csv_with_header_and_labels():
    m = read_matrix(b"word,x,y\napple,1,2\nbanana,3,4\n", "a.csv")
    assert m.row_labels == ["apple", "banana"] and m.col_labels == ["x", "y"]


def test_csv_header_without_corner_and_labels_without_header():
    assert read_matrix(b"x,y\na,1,2\n", "a.csv").col_labels == ["x", "y"]
    m = read_matrix(b"#fef0d9,1,2\n#fdcc8a,3,4\n", "a.csv")
    assert m.row_labels == ["#fef0d9", "#fdcc8a"] and m.col_labels is None


def test_csv_with_bom_spaces_blank_lines_and_quotes():
    m = read_matrix('\ufeff"a, b", 1 , 2\n\n"c",3,4\n'.encode(), "a.csv")
    assert m.row_labels == ["a, b", "c"] and m.values.tolist() == [[1, 2], [3, 4]]


def test_tsv_and_whitespace_text():
    assert read_matrix(b"x\ty\n1\t2\n", "a.tsv").values.tolist() == [[1, 2]]
    assert read_matrix(b"1 2  3\n4 5 6\n", "a.txt").values.tolist() == [[1, 2, 3], [4, 5, 6]]


@pytest.mark.parametrize(
    "data, message",
    [
        (
            b"1,2\n3,4\n5\n",
            "a.csv:3: row has 1 value, expected 2 like the first row (every row needs the same number of columns)",
        ),
        (b"x,y\n\n1,2\n3,abc\n", "a.csv:4: column 2: 'abc' is not a number"),
        (b"1,2\n3,\n", "a.csv:2: column 2: is empty"),
        (b"1,2\n3,nan\n", "a.csv:2: column 2: nan is not a finite number"),
        (b"1,2\n3,1e400\n", "a.csv:2: column 2: inf is not a finite number"),
        (b"a,1,-inf\n", "a.csv:1: column 3: -inf is not a finite number"),
        (b"", "a.csv: the file is empty (expected rows of numbers)"),
        (b"\n  \n", "a.csv: the file is empty (expected rows of numbers)"),
        (b"x,y\n", "a.csv:1: has a header but no rows of numbers"),
        (b"x,y,z\n1,2\n", "a.csv:1: header has 3 names but rows have 2 values"),
        (
            b"1,2\n\xff\xfe\n",
            "a.csv:2: is not UTF-8 text: it looks like Windows-1252 (Latin-1) text "
            "(save it as UTF-8, in Excel as CSV UTF-8, or convert it: iconv -f WINDOWS-1252 -t UTF-8)",
        ),
        (
            b'"a,1\n2,3\n',
            "a.csv:1: cannot split the line: a quote is opened but never closed "
            '(quote a label that holds a comma: "a, b")',
        ),
        (
            b'x,1\n"a"b,1\n',
            "a.csv:2: cannot split the line: ',' expected after '\"' (quote a label that holds a comma: \"a, b\")",
        ),
    ],
)
def test_csv_errors_name_the_line(data, message):
    assert error(data, "a.csv") == message


def test_csv_line_numbers_count_quoted_newlines():
    assert error(b'"two\nlines",1\nb,x\n', "a.csv") == "a.csv:3: column 2: 'x' is not a number"


def test_mask_csv_allows_minus_infinity_only():
    assert read_matrix(b"0,-inf\n", "m.csv", mask=True).values.tolist() == [[0, -np.inf]]
    assert (
        error(b"0,inf\n", "m.csv", mask=True) == "m.csv:1: column 2: inf is not a finite number (a mask may hold -inf)"
    )


# ---------------------------------------------------------------- NPY / NPZ


def test_npy_float32_kept_and_vector_is_one_row():
    m = read_matrix(npy_bytes(np.arange(3, dtype=np.float32)), "v.npy")
    assert m.values.dtype == np.float32 and m.values.shape == (1, 3)


def test_npy_float16_and_big_endian_are_converted():
    assert read_matrix(npy_bytes(np.ones((2, 2), np.float16)), "h.npy").values.dtype == np.float32
    m = read_matrix(npy_bytes(np.ones((2, 2), ">f8")), "b.npy")
    assert m.values.dtype == np.dtype("=f8") and m.values.sum() == 4


@pytest.mark.parametrize(
    "array, message",
    [
        (
            np.array([[1, 2]], dtype=object),
            "x.npy: holds Python objects (pickled data), which attn never loads "
            "(save a float array: np.save(f, a.astype(float)))",
        ),
        (
            np.ones((2, 2), np.int64),
            "x.npy: holds int64 data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
        ),
        (
            np.ones((2, 2), complex),
            "x.npy: holds complex128 data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
        ),
        (
            np.array([["a", "b"]]),
            "x.npy: holds <U1 data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
        ),
        (
            np.ones((2, 2), bool),
            "x.npy: holds bool data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
        ),
        (np.ones((2, 3, 4)), "x.npy: is 3-D (2×3×4), expected a 2-D matrix"),
        (np.float64(1.0), "x.npy: is 0-D (a scalar), expected a 2-D matrix"),
        (np.ones((0, 3)), "x.npy: is empty (0×3)"),
        (np.array([[1.0, np.nan]]), "x.npy: row 1, column 2: nan is not a finite number"),
    ],
)
def test_npy_refusals(array, message):
    assert error(npy_bytes(array), "x.npy") == message


def test_truncated_npy():
    assert error(npy_bytes(np.ones((4, 4)))[:-10], "x.npy") == (
        "x.npy: its NPY header declares 4×4 float64 values (128 bytes), but 118 bytes of data follow it "
        "(the file is truncated or damaged)"
    )


def test_a_damaged_npy_header_is_attns_line_then_numpys_words():
    message = error(b"\x93NUMPY\x01\x00\x10\x00{'descr': <f8'}    \n", "x.npy")
    assert message.startswith("x.npy: is truncated or damaged (")  # numpy's own words follow, whatever they are


def test_csv_named_npy_is_not_called_pickled():
    assert (
        error(b"1,2\n", "x.npy")
        == "x.npy: is not an NPY file (it does not start with \\x93NUMPY) (name CSV/YAML/JSON files by their extension)"
    )


def test_npy_bool_mask():
    m = read_matrix(npy_bytes(np.eye(2, dtype=bool)), "m.npy", mask=True)
    assert m.values.dtype == bool


def test_npz_bundle_with_labels():
    data = npz_bytes(
        q=np.ones((1, 2)),
        k=np.ones((3, 2)),
        v=np.ones((3, 1)),
        k_labels=np.array(["a", "b", "c"]),
        v_columns=np.array(["value"]),
    )
    bundle = read_bundle(data, "b.npz")
    assert set(bundle.matrices) == {"q", "k", "v"}
    assert bundle.matrices["k"].row_labels == ["a", "b", "c"]
    assert bundle.matrices["v"].col_labels == ["value"]


@pytest.mark.parametrize("encode", [False, True])
def test_npz_byte_string_labels_are_utf8_text(encode):
    """Labels stored as byte strings (dtype S, as h5py and older numpy code
    write them) are decoded as UTF-8, never shown as "b'apple'"."""
    names = ["apple", "pear", "ümlaut"]
    labels = np.array([n.encode() for n in names]) if encode else np.array(names)
    assert labels.dtype.kind == ("S" if encode else "U")
    bundle = read_bundle(npz_bytes(k=np.ones((3, 2)), k_labels=labels, k_columns=labels[:2]), "b.npz")
    assert bundle.matrices["k"].row_labels == names
    assert bundle.matrices["k"].col_labels == names[:2]


def test_npz_byte_string_settings_are_utf8_text():
    bundle = read_bundle(npz_bytes(q=np.ones((1, 2)), similarity=np.array(b"cosine")), "b.npz")
    assert bundle.meta == {"similarity": "cosine"}


def test_npz_names_an_array_once():
    """A zip may hold a member name twice; numpy reads one of them without a word."""
    import warnings
    import zipfile

    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as z:
        warnings.simplefilter("ignore")
        z.writestr("q.npy", npy_bytes(np.ones((1, 2))))
        z.writestr("k.npy", npy_bytes(np.ones((1, 2))))
        z.writestr("q.npy", npy_bytes(np.zeros((1, 2))))
    with pytest.raises(AttnError) as e:
        read_bundle(buffer.getvalue(), "b.npz")
    assert str(e.value) == (
        "b.npz: holds two arrays named 'q': the member 'q.npy' twice "
        "(numpy would read only one of them: save each name once)"
    )


def test_npy_headers_are_checked_against_the_data_in_every_way_of_reading(tmp_path):
    """Memory-mapped from a file, read from bytes (stdin) or as an NPZ member:
    the same line, before numpy maps or reshapes anything (10¹²×10¹² overflowed mmap: exit 70)."""
    from attncli.readers.arrays import map_npy

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 10**12)})
    data = buffer.getvalue() + bytes(8)
    (tmp_path / "x.npy").write_bytes(data)
    said = (
        "its NPY header declares 1000000000000×1000000000000 float32 values (4,000,000,000,000,000,000,000,000 "
        "bytes), but 8 bytes of data follow it (the file is truncated or damaged)"
    )
    with pytest.raises(AttnError) as e:
        map_npy(str(tmp_path / "x.npy"), "x.npy")
    assert str(e.value) == f"x.npy: {said}"
    assert error(data, "x.npy") == f"x.npy: {said}"
    with pytest.raises(AttnError) as e:
        read_bundle(_npz_of(q=data), "b.npz")
    assert str(e.value) == f"b.npz: q: {said}"


def _npz_of(**members: bytes) -> bytes:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in members.items():
            z.writestr(f"{name}.npy", data)
    return buffer.getvalue()


def test_npz_errors():
    with pytest.raises(AttnError, match="b.npz: k_labels has 2 names for 3 entries"):
        read_bundle(npz_bytes(k=np.ones((3, 2)), k_labels=np.array(["a", "b"])), "b.npz")
    with pytest.raises(AttnError, match="b.npz: is not a readable NPZ archive"):
        read_bundle(npz_bytes(q=np.ones(2))[:40], "b.npz")
    assert (
        error(npz_bytes(a=np.ones(2), b=np.ones(2)), "b.npz")
        == "b.npz: holds several arrays (a, b), expected one matrix (pass it as the only file to read it as a bundle)"
    )


# ---------------------------------------------------------------- YAML / JSON


def test_yaml_list_of_rows_mapping_and_spec():
    assert read_matrix(b"- [1, 2]\n- [3, 4]\n", "a.yaml").values.tolist() == [[1, 2], [3, 4]]
    m = read_matrix(b"apple: [1, 2]\nbanana: [3, 4]\n", "a.yaml")
    assert m.row_labels == ["apple", "banana"]
    m = read_matrix(b"rows: {a: [255, 51]}\ndivide: 255\ncolumns: [x, y]\n", "a.yaml")
    assert m.values.tolist() == [[1.0, 0.2]] and m.col_labels == ["x", "y"] and m.row_labels == ["a"]
    m = read_matrix(b"rows: [[1], [2]]\nlabels: [a, b]\n", "a.yaml")
    assert m.row_labels == ["a", "b"]


def test_yaml_flat_list_is_one_row_and_scalar_rows():
    assert read_matrix(b"[1, 2, 3]", "a.yaml").values.shape == (1, 3)
    assert read_matrix(b"apple: 10\nbanana: 5\n", "a.yaml").values.tolist() == [[10], [5]]


def test_yaml_1_1_traps_read_as_a_person_means():
    # YAML 1.1 loads 1e3 as a string and 010 as octal 8: attn reads decimal numbers.
    assert read_matrix(b"- [1e3, 010, 1_000, .5, +2]\n", "a.yaml").values.tolist() == [[1000, 10, 1000, 0.5, 2]]


@pytest.mark.parametrize(
    "data, message",
    [
        (b"- [1, yes]\n", "a.yaml:1: row 1, column 2: 'yes' is not a number (YAML reads it as true/false)"),
        (
            b'- [1, 2]\n- [3, "4"]\n',
            "a.yaml:2: row 2, column 2: '4' is quoted, so it is text, not a number (remove the quotes)",
        ),
        (
            b"- [1, 2]\n- [3]\n",
            "a.yaml:2: row 2 has 1 value, expected 2 like the first row (every row needs the same number of columns)",
        ),
        (b"a: [1, ~]\n", "a.yaml:1: row 'a', column 2: a value is missing"),
        (b"a: [1, abc]\n", "a.yaml:1: row 'a', column 2: 'abc' is not a number"),
        (b"- [1, .nan]\n", "a.yaml:1: row 1, column 2: nan is not a finite number"),
        (b"a: [1]\na: [2]\n", "a.yaml:2: duplicate key 'a'"),
        (
            b"- !!python/object/apply:os.system [echo hi]\n",
            "a.yaml:1: the tag tag:yaml.org,2002:python/object/apply:os.system is not allowed "
            "(attn reads plain YAML: numbers, lists and mappings)",
        ),
        (b"a: &a [*a]\n", "a.yaml:1: a YAML alias refers to itself"),
        (b"[]", "a.yaml:1: is empty (expected rows of numbers)"),
        (b"- [1]\n- []\n", "a.yaml:2: row 2 is empty"),
        (b"hello", "a.yaml:1: expected a list of rows or a mapping of label: row"),
        (b"# only a comment\n", "a.yaml: the file is empty (expected rows of numbers)"),
        (b"- [[1, 2]]\n", "a.yaml:1: row 1, column 1: expected a number, found a list"),
        (b"rows: [[1]]\ndivide: 0\n", "a.yaml:2: divide must not be 0"),
        (b"rows: [[1]]\nlabels: [a, b]\n", "a.yaml: labels has 2 names for 1 entries"),
    ],
)
def test_yaml_errors(data, message):
    assert error(data, "a.yaml") == message


def test_yaml_syntax_errors_are_attns_line_with_the_position():
    """PyYAML's (libyaml's) own words sit in the middle and may change with a
    release: only attn's prefix, the line and the column are attn's."""
    assert re.fullmatch(r"a\.yaml:2: invalid YAML: .+ \(column 1\)", error(b"- [1, 2\n", "a.yaml"))


@pytest.mark.parametrize("cell", ["!!int 2", "!!float 2", "2", "!!float 2.0", "!!int +2"])
def test_yaml_number_tags_are_numbers(cell):
    assert read_matrix(f"- [1, {cell}]\n".encode(), "a.yaml").values.tolist() == [[1.0, 2.0]]


@pytest.mark.parametrize(
    "cell, tag",
    [
        ("!!str 2", "!!str"),
        ("!!str .inf", "!!str"),
        ("! 2", "!"),
        ("!!timestamp 2", "!!timestamp"),
        ("!!null 2", "!!null"),
        ("!!bool 1", "!!bool"),
        ("!<tag:yaml.org,2002:str> 2", "!!str"),
    ],
)
def test_yaml_tagged_numbers_are_refused_like_quoted_ones(cell, tag):
    text = cell.split()[-1]
    assert error(f"- [1, {cell}]\n".encode(), "a.yaml") == (
        f"a.yaml:1: row 1, column 2: '{text}' is tagged {tag}, so it is not a number (remove the tag)"
    )


def test_a_redundant_bool_tag_in_a_mask_is_kept():
    m = read_matrix(b"- [!!bool true, false]\n", "m.yaml", mask=True)
    assert m.values.tolist() == [[1.0, 0.0]]


@pytest.mark.parametrize(
    "data, message",
    [
        (b"[[1, NaN]]", "a.json: NaN is not a finite number"),
        (b"[[1e400]]", "a.json: row 1, column 1: inf is not a finite number"),
        (b'[[1, "2"]]', "a.json: row 1, column 2: '2' is text, not a number"),
        (b"[[1, true]]", "a.json: row 1, column 2: true is not a number"),
        (b"[[1, null]]", "a.json: row 1, column 2: a value is missing"),
        (b'{"a": [1], "a": [2]}', "a.json: duplicate key 'a'"),
        (b"[[1, 2],\n [3 4]]", "a.json:2: invalid JSON: Expecting ',' delimiter (column 5)"),
        (
            b"[" * 100000 + b"]" * 100000,
            "a.json: is nested too deeply to be a matrix (a matrix needs at most 8 levels of lists and mappings)",
        ),
    ],
)
def test_json_errors(data, message):
    assert error(data, "a.json") == message


def test_alias_bomb_is_refused_quickly():
    lines = [b"a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 10):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 10)}]".encode())
    with pytest.raises(AttnError, match=f"expands to more than {TREE_NODES.default:,} elements"):
        read_bundle(b"\n".join(lines), "bomb.yaml")


def test_yaml_bundle_keeps_meta_and_masks():
    bundle = read_bundle(b"description: hi\nq: [[1]]\nmask: [[true, false]]\n", "b.yaml")
    assert bundle.meta == {"description": "hi"}
    assert bundle.matrices["mask"].values.tolist() == [[1.0, 0.0]]


def test_bundle_must_be_a_mapping_and_text_formats_are_not_bundles():
    with pytest.raises(AttnError, match="b.yaml:1: a bundle must be a mapping"):
        read_bundle(b"- [1]\n", "b.yaml")
    with pytest.raises(AttnError, match="b.csv: a CSV file holds one matrix, not a bundle"):
        read_bundle(b"1,2\n", "b.csv")


# ---------------------------------------------------------------- sniffing


@pytest.mark.parametrize(
    "data, fmt",
    [
        (npy_bytes(np.ones(2)), "npy"),
        (npz_bytes(a=np.ones(2)), "npz"),
        (b'{"q": [[1]]}', "json"),
        (b"[[1, 2]]", "json"),
        (b"# comment\nq:\n  - [1]\n", "yaml"),
        (b"- [1, 2]\n", "yaml"),
        (b"#fef0d9,1,2\n", "csv"),
        (b"1\t2\n", "tsv"),
        (b"30 20 10\n", "txt"),
    ],
)
def test_sniff(data, fmt):
    assert sniff(data) == fmt


def test_stdin_content_is_sniffed():
    assert read_matrix(b"a: [1, 2]\n", "<stdin>").row_labels == ["a"]
    assert read_matrix(npy_bytes(np.ones((1, 2))), "<stdin>").values.shape == (1, 2)
