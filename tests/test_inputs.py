"""Files as people have them: Q, K and V saved by pandas, numpy, Excel's
conventions and jq (tests/inputs/, written by scripts/input_files.py) give the
numbers PyTorch gives on the arrays themselves, and every reading the file
alone could not settle is said in one note, with the flag for the other."""

import json
from pathlib import Path

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.readers import TextSettings, read_matrix

from reference import attention

INPUTS = Path(__file__).parent / "inputs"
EXPECTED = json.loads((INPUTS / "expected.json").read_text())


def files(style: str) -> list[Path]:
    return [INPUTS / style.format(name=name) for name in "qkv"]


def pandas_note(names: str) -> str:
    return (
        f"{names}: read the first row 0,1,… as column names, as pandas writes them for unnamed columns: "
        "the rows below are not whole numbers (--no-header reads it as data)"
    )


# Each way of saving, and the notes it must give (None: no note).
SAVED = {
    "{name}_pandas.csv": "pandas",  # pd.DataFrame(a).to_csv(f, index=False): header 0,1,2,3
    "{name}_pandas_index.csv": None,  # df.to_csv(f): ",0,1,2,3" and the index as a first column
    "{name}_excel_eu.csv": "pandas",  # sep=";", decimal=",", CRLF: Excel in much of Europe
    "{name}_excel_sep.csv": None,  # Excel's "sep=;" first line, no header
    "{name}_unicode.txt": "pandas",  # UTF-16 with a BOM, tabs, CRLF: Excel's "Unicode text"
    "{name}_mac.csv": None,  # CR-only line ends
    "{name}_tabs.csv": None,  # tab-separated, named .csv
    "{name}_savetxt.txt": None,  # np.savetxt(f, a, header="c0 c1 c2 c3"): a "# c0 c1 c2 c3" comment line
    "{name}_formula.csv": None,  # minus signs U+2212, copied from a rendered formula
    "{name}.jsonl": None,  # jq -c '.[]' q.json > q.jsonl
    "{name}_records.jsonl": None,  # df.to_json(f, orient="records", lines=True)
    "{name}_split.json": None,  # df.to_json(f, orient="split"): columns, index, data
    "{name}_split_noindex.json": None,  # df.to_json(f, orient="split", index=False)
    "{name}_table.json": None,  # df.to_json(f, orient="table"): a schema and records with the index
    "{name}_table_noindex.json": None,  # df.to_json(f, orient="table", index=False)
    "{name}_records.json": None,  # df.to_json(f, orient="records")
    "{name}_values.json": None,  # df.to_json(f, orient="values")
    "{name}.npy": None,
}


@pytest.mark.parametrize("style", SAVED)
def test_every_way_of_saving_gives_torchs_numbers(attn, style):
    out, notes = attn.json_and_notes("run", *files(style))
    np.testing.assert_allclose(out["output"], EXPECTED["plain"], rtol=1e-13, atol=1e-15)
    assert out["shapes"] == {"q": [3, 4], "k": [5, 4], "v": [5, 2]}
    if SAVED[style] == "pandas":
        assert notes == [pandas_note(", ".join(f"{f}:1" for f in files(style)))]
    else:
        assert notes == []


# pandas' default to_json() (orient="columns") and orient="index" are both a mapping of mappings:
# which is rows and which is columns, the file cannot say, so they are refused, never guessed.
MAPPINGS_OF_MAPPINGS = (
    "is a mapping of mappings, as pandas' to_json() writes by default: it could be columns "
    "of rows or rows of columns (write it with to_json(orient='split') or orient='records')"
)


@pytest.mark.parametrize("orient", ["columns", "index"])
def test_pandas_mappings_of_mappings_are_refused_in_one_line(attn, orient):
    q, k, v = files("{name}_" + orient + ".json")
    assert attn.fails("run", q, k, v) == f"{q}: {MAPPINGS_OF_MAPPINGS}"
    assert attn.fails("run", INPUTS / "q.npy", INPUTS / "k.npy", v) == f"{v}: {MAPPINGS_OF_MAPPINGS}"


@pytest.mark.parametrize("orient", ["split", "table"])
def test_pandas_index_in_json_becomes_the_labels(attn, orient):
    out = attn.json("run", *files("{name}_" + orient + ".json"))  # as the index column of a CSV file
    assert out["queries"] == ["0", "1", "2"] and out["keys"] == ["0", "1", "2", "3", "4"]
    assert out["columns"] == ["0", "1"]
    out = attn.json("run", *files("{name}_" + orient + "_noindex.json"))  # index=False: no labels
    assert out["queries"] == ["q0", "q1", "q2"] and out["columns"] == ["0", "1"]


@pytest.mark.parametrize("style", ["v_series.json", "v_series_split.json", "v_series_table.json"])
def test_a_series_is_one_column(attn, style):
    """Series.to_json() (a mapping of label: number), and in orient split and table: V as one value per key."""
    out, notes = attn.json_and_notes("run", INPUTS / "q.npy", INPUTS / "k.npy", INPUTS / style)
    np.testing.assert_allclose(out["output"], EXPECTED["v_column"], rtol=1e-13, atol=1e-15)
    assert out["shapes"]["v"] == [5, 1] and out["keys"] == ["0", "1", "2", "3", "4"] and notes == []
    assert out["columns"] == ["value"]  # an unnamed Series is one value per key too


def test_pandas_orients_in_a_bundle(attn, tmp_path):
    """Each bundle entry may be written in its own orient; a mapping of mappings there is refused too."""
    orients = {"q": "split", "k": "table", "v": "values"}
    entries = {n: json.loads((INPUTS / f"{n}_{o}.json").read_text()) for n, o in orients.items()}
    (tmp_path / "b.json").write_text(json.dumps(entries))
    np.testing.assert_allclose(attn.json("run", tmp_path / "b.json")["output"], EXPECTED["plain"], rtol=1e-13)
    entries["k"] = json.loads((INPUTS / "k_columns.json").read_text())
    (tmp_path / "b.json").write_text(json.dumps(entries))
    assert attn.fails("run", tmp_path / "b.json") == f"{tmp_path}/b.json: k: {MAPPINGS_OF_MAPPINGS}"


@pytest.mark.parametrize("orient", ["split", "table"])
def test_an_empty_frame_is_empty(orient):
    data = {
        "split": b'{"columns":["x"],"index":[],"data":[]}',
        "table": b'{"schema":{"fields":[{"name":"index"},{"name":"x"}],"primaryKey":["index"]},"data":[]}',
    }
    with pytest.raises(AttnError) as e:
        read_matrix(data[orient], "a.json")
    assert str(e.value) == "a.json: is empty (expected rows of numbers)"


def test_pandas_orients_in_yaml():
    m = read_matrix(b"columns: [x, y]\nindex: [a, b]\ndata:\n- [1, 2]\n- [3, 4]\n", "a.yaml")
    assert (m.row_labels, m.col_labels, m.values.tolist()) == (["a", "b"], ["x", "y"], [[1, 2], [3, 4]])
    table = (
        b"schema:\n  fields: [{name: key}, {name: x}]\n  primaryKey: [key]\ndata: [{key: a, x: 1}, {key: b, x: 2}]\n"
    )
    m = read_matrix(table, "a.yaml")
    assert (m.row_labels, m.col_labels, m.values.tolist()) == (["a", "b"], ["x"], [[1], [2]])
    m = read_matrix(b"name: ~\nindex: [a, b]\ndata: [1, 2]\n", "a.yaml")  # a Series without a name
    assert (m.row_labels, m.col_labels, m.values.tolist()) == (["a", "b"], None, [[1], [2]])


def test_torch_agrees_live():
    torch = pytest.importorskip("torch")
    q, k, v = (torch.tensor(np.load(INPUTS / f"{n}.npy")) for n in "qkv")
    np.testing.assert_allclose(
        torch.nn.functional.scaled_dot_product_attention(q, k, v).numpy(), EXPECTED["plain"], rtol=1e-13
    )


def test_the_header_flags_settle_it_without_a_note(attn):
    out, notes = attn.json_and_notes("run", *files("{name}_pandas.csv"), "--header")
    assert notes == [] and out["columns"] == ["0", "1"]
    out, notes = attn.json_and_notes("run", *files("{name}_pandas.csv"), "--no-header")  # as the user says
    assert notes == [] and out["shapes"] == {"q": [4, 4], "k": [6, 4], "v": [6, 2]}


def test_pandas_index_becomes_the_labels(attn):
    out = attn.json("run", *files("{name}_pandas_index.csv"))
    assert out["queries"] == ["0", "1", "2"] and out["keys"] == ["0", "1", "2", "3", "4"]
    assert out["columns"] == ["0", "1"]


# ---------------------------------------------------------------- the rules, one by one


def read(data: bytes, source: str = "a.csv", **settings) -> object:
    return read_matrix(data, source, text=TextSettings(**settings))


def test_a_one_hot_first_row_is_data_with_a_note():
    m = read(b"0,1\n1,0\n")
    assert m.values.tolist() == [[0, 1], [1, 0]] and m.col_labels is None
    (choice,) = m.choices
    assert (choice.setting, choice.other, choice.line) == ("header", True, 1)
    assert read(b"0,1\n1,0\n", header=True).col_labels == ["0", "1"]
    assert read(b"0,1\n1,0\n", header=False).choices == []


def test_the_first_row_counting_up_over_floats_is_pandas_header():
    m = read(b"0,1,2\n0.5,1.0,2.0\n")
    assert m.col_labels == ["0", "1", "2"] and m.values.shape == (1, 3)
    assert read(b"0,1,2\n0.5,1.0,2.0\n", header=False).values.shape == (2, 3)
    assert read(b"1,2,3\n0.5,1.0,2.0\n").values.shape == (2, 3)  # not 0,1,…: data, as always, no note
    assert read(b"1,2,3\n0.5,1.0,2.0\n").choices == []


def test_a_named_index_with_unnamed_columns():
    m = read(b"key,0,1\napple,0.5,1.0\nbanana,2.0,3.0\n")  # df.rename_axis("key").to_csv()
    assert m.row_labels == ["apple", "banana"] and m.col_labels == ["0", "1"] and m.values.shape == (2, 2)


def test_labels_flags():
    m = read(b"0,0.5,1.0\n1,2.0,3.0\n", labels=True)  # df.to_csv(header=False): the index, unnamed
    assert m.row_labels == ["0", "1"] and m.values.tolist() == [[0.5, 1.0], [2.0, 3.0]]
    with pytest.raises(AttnError, match="a.csv:1: column 1: 'apple' is not a number"):
        read(b"apple,1\n", labels=False)


def test_delimiter_and_decimal():
    assert read(b"1,5;2,5\n3;4\n").values.tolist() == [[1.5, 2.5], [3, 4]]
    assert read(b"1,5\t2,5\n").values.tolist() == [[1.5, 2.5]]  # tabs and decimal commas
    assert read(b"1|2\n3|4\n", delimiter="|").values.tolist() == [[1, 2], [3, 4]]
    assert read(b"1,5\n2,5\n", decimal=",").values.tolist() == [[1.5], [2.5]]  # one column of decimal commas
    assert read(b"1,5\n2,5\n").values.tolist() == [[1, 5], [2, 5]]  # …which, untold, is two columns
    assert read(b"sep=;\r\n1,5;2\r\n").values.tolist() == [[1.5, 2]]
    assert read(b"sep=|\n1|2\n", "a.txt").values.tolist() == [[1, 2]]
    with pytest.raises(
        AttnError,
        match=r"a.csv:2: column 1: '2,5' is not a number "
        r"\(the decimal mark of this file is '.'\)",
    ):
        read(b"1.5;2\n2,5;3\n")


def test_semicolon_labels_do_not_make_a_semicolon_file():
    m = read(b'x,y\n"a;b",1.5,2\nc,3,4\n')
    assert m.row_labels == ["a;b", "c"] and m.values.tolist() == [[1.5, 2], [3, 4]]


def test_comments_and_colour_labels():
    m = read(b"# made by hand\n#fef0d9,1,2\n# another comment\n#0af,3,4\n")
    assert m.row_labels == ["#fef0d9", "#0af"] and m.values.tolist() == [[1, 2], [3, 4]]
    assert read(b"#\n1 2\n", "a.txt").values.tolist() == [[1, 2]]


def test_encodings():
    text = "x;y\n1,5;\u22122\n"
    for encoding in ("utf-16", "utf-16-be", "utf-32", "utf-8-sig"):
        data = text.encode(encoding)
        if encoding == "utf-16-be":
            data = b"\xfe\xff" + data
        assert read(data).values.tolist() == [[1.5, -2]], encoding


@pytest.mark.parametrize(
    "data, message",
    [
        (
            "1,2\n".encode("utf-16-le"),
            "a.csv: is UTF-16 text without a byte-order mark "
            "(save it as UTF-8, or convert it: iconv -f UTF16LE -t UTF-8)",
        ),
        (
            b"PK\x03\x04\x14\x00",
            "a.csv: is a zip archive (an Excel .xlsx workbook, or an NPZ archive), not text "
            "(save a sheet as CSV UTF-8, or name an NPZ archive .npz)",
        ),
        (b"\x93NUMPY\x01\x00v\x00", "a.csv: is an NPY array, not text (name it .npy)"),
        (
            bytes(range(1, 40)) * 3 + b"\xff",
            "a.csv: is binary data, not text "
            "(attn reads CSV, TSV, YAML and JSON text, or NPY/NPZ arrays by their extension)",
        ),
        (
            b"\xff\xfe1\x00,\x00\x00\xd8",
            "a.csv:1: is not valid UTF-16 text, though it starts with a UTF-16 byte-order mark",
        ),
        (
            "caf\u00e9,1\n".encode("cp1252"),
            "a.csv:1: is not UTF-8 text: it looks like Windows-1252 (Latin-1) text "
            "(save it as UTF-8, in Excel as CSV UTF-8, or convert it: iconv -f WINDOWS-1252 -t UTF-8)",
        ),
    ],
)
def test_other_bytes_are_named(data, message):
    with pytest.raises(AttnError) as e:
        read(data)
    assert str(e.value) == message.replace("UTF16LE", "UTF-16LE")


def test_cr_only_and_minus_signs_everywhere():
    assert read(b"1,2\r3,4\r").values.tolist() == [[1, 2], [3, 4]]
    assert read_matrix("- [\u22121, 2]\n".encode(), "a.yaml").values.tolist() == [[-1, 2]]


def test_true_false_cells_make_a_mask_only():
    assert read_matrix(b"true,FALSE\nFalse,True\n", "m.csv", mask=True).values.tolist() == [[1, 0], [0, 1]]
    with pytest.raises(AttnError, match="m.csv:1: column 2: 'true' is not a number"):
        read_matrix(b"1,true\n", "m.csv")
    with pytest.raises(AttnError) as e:
        read_matrix(b"0,true\n", "m.csv", bias=True)
    assert str(e.value) == (
        "m.csv:1: column 2: 'true' is not a number "
        "(a bias holds numbers to add to the scores; true/false cells make a mask)"
    )


def test_json_lines_and_records():
    assert read_matrix(b"[1, 2]\n\n[3, 4]\n", "a.jsonl").values.tolist() == [[1, 2], [3, 4]]
    assert read_matrix(b"[1, 2]\n[3, 4]\n", "a.json").values.tolist() == [[1, 2], [3, 4]]  # jq into .json
    assert read_matrix(b"[1, 2]\n[3, 4]\n", "<stdin>").values.tolist() == [[1, 2], [3, 4]]
    assert read_matrix(b"10\n5\n2\n", "a.jsonl").values.tolist() == [[10], [5], [2]]
    m = read_matrix(b'[{"x": 1, "y": 2}, {"x": 3, "y": 4}]', "a.json")
    assert m.col_labels == ["x", "y"] and m.values.tolist() == [[1, 2], [3, 4]]
    with pytest.raises(AttnError) as e:
        read_matrix(b'{"x": 1, "y": 2}\n{"y": 3, "x": 4}\n', "a.jsonl")
    assert str(e.value) == (
        "a.jsonl:2: row 2 has the columns y, x, expected x, y like the first row "
        "(every record needs the same names, in the same order)"
    )
    with pytest.raises(AttnError) as e:
        read_matrix(b"[1, 2]\n[3, 4\n", "a.jsonl")
    assert str(e.value) == (
        "a.jsonl:2: invalid JSON Lines: Expecting ',' delimiter (column 6) "
        "(JSON Lines holds one whole JSON value per line)"
    )
    with pytest.raises(AttnError, match=r"a.json:1: invalid JSON: Extra data \(column 8\)"):
        read_matrix(b"[1, 2] [3, 4]\n", "a.json")  # two values on one line is not JSON Lines


# ---------------------------------------------------------------- masks and biases


def test_a_float_mask_of_zeros_is_a_bias_as_in_pytorch(attn):
    out = attn.json("run", *files("{name}.npy"), "--bias", INPUTS / "float_zeros.npy")
    np.testing.assert_allclose(out["output"], EXPECTED["bias_zeros"], rtol=1e-6)  # float32 bias, float64 inputs
    masked, notes = attn.json_and_notes("run", *files("{name}.npy"), "--mask", INPUTS / "float_zeros.npy")
    assert masked["output"] == [[0, 0]] * 3  # the user's word: a mask of 0s forbids every pair, and is told so
    assert notes == [
        f"{INPUTS / 'float_zeros.npy'}: the mask's cells are all 0, so no query may attend to any "
        "key; if it is PyTorch's float attn_mask, which is added to the scores, give the file as "
        "--bias FILE",
        "queries q0, q1, q2 may attend to no key (the mask forbids every key): their weights and outputs are 0",
    ]
    line = attn.fails("run", *files("{name}.npy"), "--mask", INPUTS / "float_additive.npy")
    assert line.endswith(
        "the mask holds -inf, but a mask holds only 1 (may attend) and 0 (may not) "
        "(to add numbers to the scores, give the file as --bias FILE)"
    )


def test_an_additive_float_mask_as_a_bias_and_true_false_cells_as_a_mask(attn):
    biased = attn.json("run", *files("{name}.npy"), "--bias", INPUTS / "float_additive.npy")
    np.testing.assert_allclose(biased["output"], EXPECTED["bias_additive"], rtol=1e-13)
    masked, notes = attn.json_and_notes("run", *files("{name}.npy"), "--mask", INPUTS / "mask_pandas.csv")
    np.testing.assert_allclose(masked["output"], EXPECTED["mask_allowed"], rtol=1e-13)
    assert masked["weights"] == biased["weights"]
    assert notes == [pandas_note(f"{INPUTS / 'mask_pandas.csv'}:1")]
    for saved in ("mask_split.json", "mask_table.json"):  # df.to_json(orient=…): true/false cells
        masked, notes = attn.json_and_notes("run", *files("{name}.npy"), "--mask", INPUTS / saved)
        np.testing.assert_allclose(masked["output"], EXPECTED["mask_allowed"], rtol=1e-13)
        assert notes == []


def test_a_bias_of_zeros_and_ones_is_added_not_a_mask(attn, tmp_path):
    np.save(tmp_path / "b.npy", np.array([[0.0, 1.0, 0.0, 1.0, 0.0]]))
    q, k, v = (np.load(INPUTS / f"{n}.npy") for n in "qkv")
    out = attn.json("run", *files("{name}.npy"), "--bias", tmp_path / "b.npy")

    bias = np.tile([0.0, 1, 0, 1, 0], (len(q), 1))
    np.testing.assert_allclose(out["output"], attention(q, k, v, bias=bias)[0], rtol=1e-13)


def test_bundles_take_mask_and_bias_by_name(attn, tmp_path):
    (tmp_path / "b.yaml").write_text("q: [[1, 0]]\nk: [[1, 0], [0, 1]]\nv: [[1], [2]]\nbias: [[0, 1]]\n")
    out = attn.json("run", tmp_path / "b.yaml")
    w = np.exp([1 / np.sqrt(2), 1])
    assert out["weights"][0] == pytest.approx((w / w.sum()).tolist())
    (tmp_path / "m.yaml").write_text("q: [[1, 0]]\nk: [[1, 0], [0, 1]]\nv: [[1], [2]]\nmask: [[0, 1]]\n")
    assert attn.json("run", tmp_path / "m.yaml")["output"] == [[2.0]]


# ---------------------------------------------------------------- bundle settings


BUNDLE = "q: [[1, 0], [0, 1]]\nk: [[1, 0], [0, 1]]\nv: [[1], [2]]\n"


def test_bundle_settings_are_honoured_and_the_command_line_wins(attn, tmp_path):
    (tmp_path / "b.yaml").write_text(BUNDLE + "causal: true\nscale: 1\ntemperature: 5\nsimilarity: cosine\n")
    out = attn.json("run", tmp_path / "b.yaml")
    assert (out["causal"], out["scale"], out["temperature"], out["similarity"]) == ("top-left", 1, 5, "cosine")
    assert out["weights"][0] == [1, 0]
    out = attn.json("run", tmp_path / "b.yaml", "--no-causal", "-t", "1", "--scale", "2", "--similarity", "dot")
    assert (out["causal"], out["scale"], out["temperature"], out["similarity"]) == (False, 2, 1, "dot")
    explained = attn.json("explain", tmp_path / "b.yaml")
    assert explained["temperature"] == 5 and explained["allowed"] == [[True, False], [True, True]]


def test_bundle_setting_names_ignore_case_and_dashes(attn, tmp_path):
    (tmp_path / "b.json").write_text(
        json.dumps({"q": [[1, 0]], "k": [[1, 0], [0, 1]], "v": [[1], [2]], "Causal-Align": "bottom-right"})
    )
    assert attn.json("run", tmp_path / "b.json")["causal"] == "bottom-right"


def test_npz_settings(attn, tmp_path):
    np.savez(tmp_path / "b.npz", q=np.eye(2), k=np.eye(2), v=np.ones((2, 1)), causal=True, scale=0.5)
    out = attn.json("run", tmp_path / "b.npz")
    assert out["causal"] == "top-left" and out["scale"] == 0.5


def test_seed_000_values_per_key(attn, tmp_path):
    (tmp_path / "b.yaml").write_text(
        "q: [2, 1, 3]\nk: {apple: [-1, 2, -1], banana: [1.5, 0, -1], chair: [4, -2, -1]}\nv: [10, 5, 2]\n"
    )
    out = attn.json("run", tmp_path / "b.yaml")
    import attncli

    q, k = np.array([2.0, 1, 3]), np.array([[-1, 2, -1], [1.5, 0, -1], [4, -2, -1]])
    expected, _ = attncli.attention(q, k, np.array([10.0, 5, 2]))  # the Python API, seed 000's way
    assert out["shapes"]["v"] == [3, 1] and out["output"] == [[pytest.approx(float(expected))]]
    np.save(tmp_path / "v.npy", np.array([10.0, 5, 2]))  # a 1-D V file too
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "k.npy", k)
    assert attn.json("run", tmp_path / "q.npy", tmp_path / "k.npy", tmp_path / "v.npy")["output"] == out["output"]


def test_self_bundle_settings(attn, tmp_path):
    (tmp_path / "s.yaml").write_text(
        "x: [[1, 0], [0, 1], [1, 1]]\nheads: 2\nseed: 3\ncausal: true\ndescription: three tokens\n"
    )
    out = attn.json("self", tmp_path / "s.yaml", random=True)
    assert (out["heads"], out["seed"], out["causal"]) == (2, 3, "top-left")
    assert np.array(out["weights"]).shape == (2, 3, 3)
    assert "three tokens" in attn("self", tmp_path / "s.yaml", "-f", "table").stdout  # the description, shown
    out = attn.json("self", tmp_path / "s.yaml", "--heads", "1", "--seed", "0", "--no-causal", random=True)
    assert (out["heads"], out["seed"], out["causal"]) == (1, 0, False)
    (tmp_path / "c.yaml").write_text("x: [[1, 2, 3], [4, 5, 6]]\ncolumns: true\n")  # seed 004's columns
    out = attn.json("self", tmp_path / "c.yaml", random=True)
    assert len(out["queries"]) == 3 and out["d_in"] == 2
    assert len(attn.json("self", tmp_path / "c.yaml", "--rows", random=True)["queries"]) == 2


@pytest.mark.parametrize("style", [s for s in SAVED if not s.endswith(".npy")])
def test_every_way_of_saving_works_from_stdin(attn, style):
    q, k, v = files(style)
    out, _ = attn.json_and_notes("run", "-", k, v, input=q.read_bytes())
    np.testing.assert_allclose(out["output"], EXPECTED["plain"], rtol=1e-13, atol=1e-15)


def test_one_value_per_key_is_called_value(attn, tmp_path):
    """Seed 000's v: [10, 5, 2] (and any unnamed one-column V): its output column is "value", not "d0"."""
    (tmp_path / "b.yaml").write_text("q: [2, 1, 3]\nk: [[-1, 2, -1], [1.5, 0, -1], [4, -2, -1]]\nv: [10, 5, 2]\n")
    assert attn.json("run", tmp_path / "b.yaml")["columns"] == ["value"]
    assert "value" in attn("explain", tmp_path / "b.yaml", "-f", "table").stdout
    (tmp_path / "v2.yaml").write_text("q: [2, 1, 3]\nk: [[-1, 2, -1], [1.5, 0, -1]]\nv: [[1, 2], [3, 4]]\n")
    assert attn.json("run", tmp_path / "v2.yaml")["columns"] == ["d0", "d1"]
