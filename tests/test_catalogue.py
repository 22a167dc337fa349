"""The catalogue of bad inputs: one row per mistake a user can make, with the
files it needs, the command, the exit code and the exact one-line message.

``{d}`` in arguments and messages is the test's folder; ``{s}`` is samples/.
Each row checks: the exit code, nothing on stdout, exactly one line on
stderr, and that line (after ``attn: error: ``) equal to the message, or
starting with it when the row's message ends in ``…`` (Click's own wording).
A row may end with stdin and then the environment variables it sets.
Mistakes that need real file descriptors or FIFOs (closed or full streams)
are in tests/test_hostile.py, with their exact messages too.
"""

import gzip
import io
import pickle

import numpy as np
import pytest


def npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def safetensors(**arrays) -> bytes:
    from safetensors.numpy import save

    return save(arrays)


def zipped(*names: str) -> bytes:
    """A zip archive holding empty members of these names (an .xlsx, a torch.save archive)."""
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            archive.writestr(name, b"")
    return buffer.getvalue()


def npy_claiming(shape, data: bytes = bytes(16)) -> bytes:
    """An NPY float64 header declaring ``shape`` over the bytes ``data``."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buffer.getvalue() + data


def archive(*members) -> bytes:
    """A zip archive of (name, bytes) members, a name possibly twice (as np.savez never writes it)."""
    import warnings
    import zipfile

    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as z:
        warnings.simplefilter("ignore")  # zipfile warns of a duplicate name, and writes it
        for name, data in members:
            z.writestr(name, data)
    return buffer.getvalue()


def bfloat16_npy() -> bytes:
    import ml_dtypes

    return npy(np.ones((2, 2), ml_dtypes.bfloat16))


BOMB = "\n".join(
    ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    + [f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join(['*' + chr(96 + i)] * 10)}]" for i in range(1, 10)]
)
QKV = ["{s}/q.csv", "{s}/k.csv", "{s}/v.csv"]


class TinyModel:
    """A row's model: a tiny random one of the tests' own, written into the row's folder
    under the name it is given (``{"bert": TinyModel("bert")}`` is ``{d}/bert``)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def write(self, path) -> None:
        if self.kind == "bert":
            from test_trace import write_model

            write_model(path)
        else:
            import decoder_models as dm

            dm.refs.write_folder(path, self.kind, tokenizer=dm.refs.train_tokenizer())


BERT, GPT2 = {"bert": TinyModel("bert")}, {"gpt2": TinyModel("gpt2")}
T = ["{d}/q.npy", "{d}/k.npy", "{d}/v.npy"]  # tensors: Q [1, 4, 3, 8], K and V [1, 2, 5, 8]
TENSORS = {
    "q.npy": npy(np.ones((1, 4, 3, 8))),
    "k.npy": npy(np.ones((1, 2, 5, 8))),
    "v.npy": npy(np.ones((1, 2, 5, 8))),
}
KV = ["{s}/k.csv", "{s}/v.csv"]
GRADS = npz(dq=np.ones((1, 4, 3, 8)), dk=np.ones((1, 2, 5, 8)), dv=np.ones((1, 2, 5, 8)))  # of TENSORS
USE = "(every row needs the same number of columns)"


def config(**fields) -> str:
    """A config.json of a model whose layers fit TENSORS (4 query heads, 2 K/V heads of 8 features)."""
    import json

    base = {"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4}
    return json.dumps({**base, "num_key_value_heads": 2, **fields})


MODEL = ["--model", "{d}/config.json"]
VECTORS_HINT = "(expected GloVe text, word2vec/fastText text or binary, .npy with a words file)"

CATALOGUE = [
    # ---------------------------------------------------------------- files
    ("missing file", {}, ["run", "{d}/nope.csv", *KV], 1, "{d}/nope.csv: no such file"),
    ("directory", {}, ["run", "{d}", *KV], 1, "{d}: is a directory, expected a file"),
    (
        "empty file",
        {"q.csv": ""},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv: the file is empty (expected rows of numbers)",
    ),
    ("empty stdin", {}, ["run", "-", *KV], 1, "<stdin>: the file is empty (expected rows of numbers)"),
    (
        "not UTF-8",
        {"q.csv": b"1,2,3\n\xff\xfe\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: is not UTF-8 text: it looks like Windows-1252 (Latin-1) text "
        "(save it as UTF-8, in Excel as CSV UTF-8, or convert it: iconv -f WINDOWS-1252 -t UTF-8)",
    ),
    (
        "UTF-16 without a BOM",
        {"q.csv": "1,2,3\n".encode("utf-16-le")},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv: is UTF-16 text without a byte-order mark (save it as UTF-8, or convert it: "
        "iconv -f UTF-16LE -t UTF-8)",
    ),
    (
        "damaged UTF-16",
        {"q.csv": b"\xff\xfe1\x00,\x00\x00\xd8"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:1: is not valid UTF-16 text, though it starts with a UTF-16 byte-order mark",
    ),
    (
        "Excel workbook named .csv",
        {"q.csv": b"PK\x03\x04\x14\x00\x06\x00"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv: is a zip archive (an Excel .xlsx workbook, or an NPZ archive), not text "
        "(save a sheet as CSV UTF-8, or name an NPZ archive .npz)",
    ),
    (
        "NPY named .csv",
        {"q.csv": npy(np.ones((1, 3)))},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv: is an NPY array, not text (name it .npy)",
    ),
    (
        "gzip named .csv",
        {"q.csv": gzip.compress(b"1,2,3\n")},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv: is gzip-compressed, not text (decompress it first: gunzip)",
    ),
    (
        "binary data named .csv",
        {"q.csv": bytes(range(1, 32)) * 4},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv: is binary data, not text "
        "(attn reads CSV, TSV, YAML and JSON text, or NPY/NPZ arrays by their extension)",
    ),
    # ---------------------------------------------------------------- CSV
    (
        "ragged rows",
        {"q.csv": "1,2,3\n4,5\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        f"{{d}}/q.csv:2: row has 2 values, expected 3 like the first row {USE}",
    ),
    (
        "non-numeric cell",
        {"q.csv": "1,2,3\n4,five,6\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 2: 'five' is not a number",
    ),
    ("empty cell", {"q.csv": "1,,3\n"}, ["run", "{d}/q.csv", *KV], 1, "{d}/q.csv:1: column 2: is empty"),
    (
        "NaN",
        {"q.csv": "1,2,3\n4,NaN,6\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 2: nan is not a finite number",
    ),
    (
        "infinity",
        {"q.csv": "x,y,z\n1,2,1e999\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 3: inf is not a finite number",
    ),
    (
        "header and rows disagree",
        {"q.csv": "x,y\n1,2,3\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:1: header has 2 names but rows have 3 values",
    ),
    (
        "unclosed quote",
        {"q.csv": '"fruit,2,1,3\n'},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:1: cannot split the line: a quote is opened but never closed "
        '(quote a label that holds a comma: "a, b")',
    ),
    ("stdin bad cell", {}, ["run", "-", *KV], 1, "<stdin>:1: column 2: 'x' is not a number", "1,x,3\n"),
    (
        "ragged semicolon rows",
        {"q.csv": "1;2;3\n4;5\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: row has 2 values, expected 3 like the first row "
        "(every row needs the same number of columns; cells are split at each semicolon)",
    ),
    (
        "labels without numbers",
        {"q.csv": "apple\nbanana\n"},
        ["run", "{d}/q.csv", *KV, "--no-header"],
        1,
        "{d}/q.csv:1: 'apple' is not a number (a label column needs numbers beside it)",
    ),
    (
        "decimal comma among points",
        {"q.csv": "1.5;2;3\n2,5;3;4\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 1: '2,5' is not a number (the decimal mark of this file is '.')",
    ),
    (
        "thousands separator",
        {"q.csv": 'a,b,c\n2,"1,234.5",3\n'},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 2: '1,234.5' is not a number (thousands separators are not read: write it as 1234.5)",
    ),
    (
        "a column of thousands",
        {"q.csv": 'a,b,c\n"1,234.5",2,3\n"2,000",4,5\n'},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 1: '1,234.5' is not a number (thousands separators are not read: write it as 1234.5)",
    ),
    (
        "a column of decimal commas among points",
        {"q.csv": 'x,y,z\n"1,5",2,3\n"2,5",3,4\n'},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 1: '1,5' is not a number (the decimal mark of this file is '.')",
    ),
    (
        "thousands or decimal comma",
        {"q.csv": 'a,b,c\n2,"1,234",3\n'},
        ["run", "{d}/q.csv", *KV],
        1,
        "{d}/q.csv:2: column 2: '1,234' is not a number (thousands separators are not read ('1,234' would be 1234), "
        "and ',' is not this file's decimal mark (1.234 if it were))",
    ),
    (
        "decimal point with --decimal ,",
        {"q.csv": "1;2.5;3\n"},
        ["run", "{d}/q.csv", *KV, "--decimal", ","],
        1,
        "{d}/q.csv:1: column 2: '2.5' is not a number (the decimal mark of this file is ',')",
    ),
    (
        "text where a number goes",
        {"q.csv": "1,2,3\n4,5,x\n"},
        ["run", "{d}/q.csv", *KV, "--no-header"],
        1,
        "{d}/q.csv:2: column 3: 'x' is not a number",
    ),
    (
        "bad delimiter",
        {},
        ["run", *QKV, "--delimiter", "ab"],
        2,
        "--delimiter 'ab' is not a delimiter (give one character such as ';' or '|', or tab or space)",
    ),
    (
        "delimiter is the decimal mark",
        {},
        ["run", *QKV, "--delimiter", ",", "--decimal", ","],
        2,
        "--delimiter and --decimal are both ',' (cells need another delimiter)",
    ),
    (
        "JSON Lines syntax",
        {"q.jsonl": "[1, 2, 3]\n[3, 4\n"},
        ["run", "{d}/q.jsonl", *KV],
        1,
        "{d}/q.jsonl:2: invalid JSON Lines: Expecting ',' delimiter (column 6) "
        "(JSON Lines holds one whole JSON value per line)",
    ),
    (
        "records with other names",
        {"q.json": '[{"x": 1, "y": 2, "z": 3}, {"x": 1, "y": 2, "w": 3}]'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: row 2 has the columns x, y, w, expected x, y, z like the first row "
        "(every record needs the same names, in the same order)",
    ),
    # ---------------------------------------------------------------- shapes
    (
        "Q and K d_k differ",
        {"q.csv": "1,2\n"},
        ["run", "{d}/q.csv", *KV],
        1,
        "Q is 1×2 but K is 3×3 (Q and K need the same number of columns, d_k)",
    ),
    (
        "K and V rows differ",
        {"v.csv": "1\n2\n"},
        ["run", "{s}/q.csv", "{s}/k.csv", "{d}/v.csv"],
        1,
        "K is 3×3 but V is 2×1 (K and V need the same number of rows: one value per key)",
    ),
    (
        "mask shape",
        {"m.csv": "1,0\n"},
        ["run", *QKV, "--mask", "{d}/m.csv"],
        1,
        "the mask is 1×2 but the weights are 1×3 (queries × keys) (give a 1×3 mask, or 1×3 for every query)",
    ),
    (
        "mask with NaN",
        {"m.csv": "1,nan,0\n"},
        ["run", *QKV, "--mask", "{d}/m.csv"],
        1,
        "{d}/m.csv:1: column 2: nan is not a finite number (a mask may hold -inf)",
    ),
    (
        "float mask that is a bias",
        {"m.npy": npy(np.array([[0, -np.inf, 0]], np.float32))},
        ["run", *QKV, "--mask", "{d}/m.npy"],
        1,
        "{d}/m.npy: the mask holds -inf, but a mask holds only 1 (may attend) and 0 (may not) "
        "(to add numbers to the scores, give the file as --bias FILE)",
    ),
    (
        "bundle mask that is a bias",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\nmask: [[0.5]]\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml: the mask holds 0.5, but a mask holds only 1 (may attend) and 0 (may not) "
        "(to add numbers to the scores, name the entry bias)",
    ),
    (
        "boolean bias",
        {"b.npy": npy(np.array([[True, False, True]]))},
        ["run", *QKV, "--bias", "{d}/b.npy"],
        1,
        "{d}/b.npy: holds booleans, but a bias is added to the scores "
        "(booleans say where a query may attend: give them as a mask)",
    ),
    (
        "true/false in a bias",
        {"b.csv": "0,true,0\n"},
        ["run", *QKV, "--bias", "{d}/b.csv"],
        1,
        "{d}/b.csv:1: column 2: 'true' is not a number "
        "(a bias holds numbers to add to the scores; true/false cells make a mask)",
    ),
    (
        "bias with +inf",
        {"b.csv": "0,inf,0\n"},
        ["run", *QKV, "--bias", "{d}/b.csv"],
        1,
        "{d}/b.csv:1: column 2: inf is not a finite number (a mask may hold -inf)",
    ),
    # ---------------------------------------------------------------- NPY
    (
        "pickled NPY",
        {"q.npy": npy(np.array([[1, "a"]], dtype=object))},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: holds Python objects (pickled data), which attn never loads "
        "(save a float array: np.save(f, a.astype(float)))",
    ),
    (
        "complex NPY",
        {"q.npy": npy(np.ones((1, 3), complex))},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: holds complex128 data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
    ),
    (
        "string NPY",
        {"q.npy": npy(np.array([["a", "b", "c"]]))},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: holds <U1 data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
    ),
    (
        "integer NPY",
        {"q.npy": npy(np.ones((1, 3), int))},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: holds int64 data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
    ),
    (
        "3-D NPY where a matrix is needed",
        {"x.npy": npy(np.ones((1, 3, 1)))},
        ["self", "{d}/x.npy"],
        1,
        "{d}/x.npy: is 3-D (1×3×1), expected a 2-D matrix",
    ),
    (
        "truncated NPY",
        {"q.npy": npy(np.ones((4, 3)))[:-5]},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: its NPY header declares 4×3 float64 values (96 bytes), but 91 bytes of data follow it "
        "(the file is truncated or damaged)",
    ),
    (
        "NPY header claiming 10¹²×10¹² over 16 bytes",
        {"q.npy": npy_claiming((10**12, 10**12))},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: its NPY header declares 1000000000000×1000000000000 float64 values "
        "(8,000,000,000,000,000,000,000,000 bytes), but 16 bytes of data follow it (the file is truncated or damaged)",
    ),
    (
        "NPY header claiming 10³⁰ rows, on stdin",
        {},
        ["run", "-", *KV],
        1,
        "<stdin>: its NPY header declares 1000000000000000000000000000000×3 float64 values "
        "(24,000,000,000,000,000,000,000,000,000,000 bytes), but 16 bytes of data follow it "
        "(the file is truncated or damaged)",
        npy_claiming((10**30, 3)),
    ),
    (
        "NPY header with a negative shape",
        {"q.npy": npy_claiming((-2, 1))},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: its NPY header declares the shape -2×1, which no array has (the file is damaged)",
    ),
    (
        "NPY with bytes past its array",
        {"q.npy": npy(np.ones((1, 3))) + npy(np.ones((1, 3)))},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: 152 bytes follow the 1×3 float64 array its NPY header declares "
        "(an NPY file holds one array: save several in an NPZ archive with np.savez)",
    ),
    (
        "damaged NPY header",
        {"q.npy": b"\x93NUMPY\x01\x00\x10\x00{'descr': <f8'}    \n"},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: is truncated or damaged (…",
    ),
    (
        "CSV named .npy",
        {"q.npy": "1,2,3\n"},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: is not an NPY file (it does not start with \\x93NUMPY) "
        "(name CSV/YAML/JSON files by their extension)",
    ),
    # ---------------------------------------------------------------- tensors and variants
    (
        "heads that do not group",
        {**TENSORS, "q.npy": npy(np.ones((1, 3, 3, 8)))},
        ["run", *T],
        1,
        "Q has 3 heads but K and V have 2 (for grouped-query attention the K/V heads must divide the query heads)",
    ),
    (
        "leading axes that do not broadcast",
        {**TENSORS, "q.npy": npy(np.ones((3, 4, 3, 8))), "k.npy": npy(np.ones((2, 2, 5, 8)))},
        ["run", *T],
        1,
        "Q is 3×4×3×8 but K is 2×2×5×8 (their leading axes [batch, heads] must be equal or 1)",
    ),
    (
        "sinks per head",
        {**TENSORS, "s.npy": npy(np.ones(3))},
        ["run", *T, "--sinks", "{d}/s.npy"],
        1,
        "sinks: 3 given for 4 query heads (give one per query head, or one for all)",
    ),
    (
        "ALiBi slopes per head",
        {**TENSORS, "s.npy": npy(np.ones(2))},
        ["run", *T, "--alibi-slopes", "{d}/s.npy"],
        1,
        "ALiBi slopes: 2 given for 4 query heads (give one per query head, or one for all)",
    ),
    (
        "rope dim past d_k",
        TENSORS,
        ["run", *T, "--rope", "neox", "--rope-dim", "10"],
        1,
        "rope dim is 10 but Q and K have d_k = 8 (rotate at most every feature of a head)",
    ),
    (
        "rope on odd d_k",
        {},
        ["run", *QKV, "--rope", "gptj"],
        1,
        "RoPE rotates features in pairs, but d_k = 3 is odd (give an even rope dim of at most d_k)",
    ),
    (
        "bfloat16 NPY",
        {"q.npy": bfloat16_npy()},
        ["run", "{d}/q.npy", *KV],
        1,
        "{d}/q.npy: holds raw 2-byte values (|V2), perhaps bfloat16 saved through ml_dtypes, which NPY cannot name "
        "(save bfloat16 in a safetensors file, or as float32: a.astype(np.float32))",
    ),
    (
        "PyTorch file",
        {"q.pt": b"PK\x03\x04"},
        ["run", "{d}/q.pt", *KV],
        1,
        "{d}/q.pt: is a PyTorch file (torch.save), which attn does not read: it would have to unpickle it "
        "(save the tensor with np.save(f, t.numpy()) or in a safetensors file)",
    ),
    (
        "PyTorch archive without its extension",
        {"q.bin": zipped("archive/data.pkl", "archive/data/0")},
        ["run", "{d}/q.bin", *KV],
        1,
        "{d}/q.bin: is a PyTorch file (torch.save), which attn does not read: it would have to unpickle it "
        "(save the tensor with np.save(f, t.numpy()) or in a safetensors file)",
    ),
    (
        "Excel workbook",
        {"q.xlsx": zipped("[Content_Types].xml", "xl/workbook.xml")},
        ["run", "{d}/q.xlsx", *KV],
        1,
        "{d}/q.xlsx: is an Excel workbook, which attn does not read (save the sheet as CSV (Excel: File > Save As > "
        "CSV UTF-8), or with pandas: read_excel(f).to_csv(...))",
    ),
    (
        "Excel workbook by its content",
        {"q": zipped("[Content_Types].xml", "xl/workbook.xml")},
        ["run", "{d}/q", *KV],
        1,
        "{d}/q: is an Excel workbook, which attn does not read (save the sheet as CSV (Excel: File > Save As > "
        "CSV UTF-8), or with pandas: read_excel(f).to_csv(...))",
    ),
    (
        "Excel 97 workbook",
        {"q.dat": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(64)},
        ["run", "{d}/q.dat", *KV],
        1,
        "{d}/q.dat: is an Excel workbook, which attn does not read (save the sheet as CSV (Excel: File > Save As > "
        "CSV UTF-8), or with pandas: read_excel(f).to_csv(...))",
    ),
    (
        "Parquet file",
        {"q.parquet": b"PAR1" + bytes(16)},
        ["run", "{d}/q.parquet", *KV],
        1,
        "{d}/q.parquet: is a Parquet file, which attn does not read (save it with pandas: read_parquet(f).to_csv(...), "
        "or np.save)",
    ),
    (
        "HDF5 file",
        {"q.txt": b"\x89HDF\r\n\x1a\n" + bytes(16)},
        ["run", "{d}/q.txt", *KV],
        1,
        "{d}/q.txt: is an HDF5 file, which attn does not read (save the dataset with "
        "np.save(f, h5py.File(path)[name][()]))",
    ),
    (
        "MATLAB file",
        {"q.mat": b"MATLAB 5.0 MAT-file, Platform: x" + bytes(16)},
        ["run", "{d}/q.mat", *KV],
        1,
        "{d}/q.mat: is a MATLAB file, which attn does not read (save the variable with np.save(f, "
        "scipy.io.loadmat(path)[name]))",
    ),
    (
        "pickle on stdin",
        {},
        ["run", "-", *KV],
        1,
        "<stdin>: is a Python pickle, which attn never unpickles (save the array with np.save, "
        "or a DataFrame with to_csv)",
        pickle.dumps([[1.0, 2.0]]),
    ),
    (
        "NPZ with a member name twice",
        {"b.npz": archive(("q.npy", npy(np.ones((2, 2)))), ("q.npy", npy(np.zeros((2, 2)))))},
        ["self", "{d}/b.npz"],
        1,
        "{d}/b.npz: holds two arrays named 'q': the member 'q.npy' twice "
        "(numpy would read only one of them: save each name once)",
    ),
    (
        "NPZ with q and q.npy",
        {"b.npz": archive(("q.npy", npy(np.ones((2, 2)))), ("q", npy(np.zeros((2, 2)))))},
        ["self", "{d}/b.npz"],
        1,
        "{d}/b.npz: holds two arrays named 'q': the members 'q.npy' and 'q' "
        "(numpy would read only one of them: save each name once)",
    ),
    (
        "NPZ member claiming 10¹²×10¹²",
        {"b.npz": archive(("q.npy", npy_claiming((10**12, 10**12))))},
        ["self", "{d}/b.npz"],
        1,
        "{d}/b.npz: q: its NPY header declares 1000000000000×1000000000000 float64 values "
        "(8,000,000,000,000,000,000,000,000 bytes), but 16 bytes of data follow it (the file is truncated or damaged)",
    ),
    (
        "NPZ byte-string labels not UTF-8",
        {"b.npz": npz(x=np.ones((2, 2)), x_labels=np.array([b"apple", b"p\xe9ar"]))},
        ["self", "{d}/b.npz"],
        1,
        "{d}/b.npz: x_labels entry 2 is not UTF-8 text: b'p\\xe9ar' "
        "(byte strings are read as UTF-8: save them as str, or encode them as UTF-8)",
    ),
    (
        "NPZ byte-string setting not UTF-8",
        {"b.npz": npz(q=np.ones((2, 2)), k=np.ones((2, 2)), v=np.ones((2, 2)), similarity=np.array(b"cos\xedne"))},
        ["run", "{d}/b.npz"],
        1,
        "{d}/b.npz: similarity is not UTF-8 text: b'cos\\xedne' "
        "(byte strings are read as UTF-8: save them as str, or encode them as UTF-8)",
    ),
    (
        "damaged safetensors",
        {"b.safetensors": safetensors(q=np.ones((2, 2)))[:-3]},
        ["run", "{d}/b.safetensors"],
        1,
        "{d}/b.safetensors: is not a readable safetensors file (…",
    ),
    (
        "integer safetensors",
        {"b.safetensors": safetensors(q=np.ones((2, 2), np.int32), k=np.ones((2, 2)), v=np.ones((2, 2)))},
        ["run", "{d}/b.safetensors"],
        1,
        "{d}/b.safetensors: q: holds int32 data; attn reads float arrays "
        "(save it with a.astype(np.float32) or float64)",
    ),
    (
        "safetensors with two tensors as Q",
        {"q.safetensors": safetensors(a=np.ones((2, 2)), b=np.ones((2, 2)))},
        ["run", "{d}/q.safetensors", *KV],
        1,
        "{d}/q.safetensors: holds several tensors (a, b), expected one "
        "(pass it as the only file to read it as a bundle)",
    ),
    (
        "bundle setting",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\nrope_dim: two\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:4: rope_dim: expected a number, found 'two'",
    ),
    (
        "bundle window",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\nwindow: wide\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:4: window: expected LEFT,RIGHT (two whole numbers, -1 for unbounded), got 'wide' "
        "(a causal sliding window of W keys is W-1,0)",
    ),
    (
        "window without a comma",
        {},
        ["run", *QKV, "--window", "4"],
        2,
        "--window: expected LEFT,RIGHT (two whole numbers, -1 for unbounded), got '4' "
        "(a causal sliding window of W keys is W-1,0)",
    ),
    (
        "window below -1",
        {},
        ["run", *QKV, "--window", "-2,0"],
        2,
        "the window's left side must be a whole number ≥ -1, got -2 (-1 means unbounded on that side)",
    ),
    ("zero softcap", {}, ["run", *QKV, "--softcap", "0"], 2, "softcap must be a positive finite number, got 0.0"),
    (
        "subnormal temperature",
        {},
        ["run", *QKV, "-t", "1e-320"],
        2,
        "temperature 1e-320 is too small: scale / temperature overflows "
        "(use a larger temperature (or a smaller scale))",
    ),
    (
        "softcap beyond float32",
        {
            "q.npy": npy(np.ones((2, 4), np.float32)),
            "k.npy": npy(np.ones((3, 4), np.float32)),
            "v.npy": npy(np.ones((3, 4), np.float32)),
        },
        ["run", *T, "--softcap", "1e300"],
        2,
        "softcap 1e+300 is outside float32's range (1.18e-38 to 3.4e+38) (give a softcap within it, "
        "or pass float64 data)",
    ),
    (
        "subnormal softcap",
        {},
        ["run", *QKV, "--softcap", "1e-320"],
        2,
        "softcap 9.99989e-321 is outside float64's range (2.23e-308 to 1.8e+308) (give a softcap within it)",
    ),
    (
        "float16 baseline overflows",
        {
            "out.npy": npy(np.ones((2, 4), np.float16)),
            "q.npy": npy(np.ones((2, 4), np.float16)),
            "k.npy": npy(np.ones((3, 4), np.float16)),
            "v.npy": npy(np.ones((3, 4), np.float16)),
        },
        ["check", "{d}/out.npy", *T, "--scale", "1e5"],
        1,
        "the naive float16 baseline overflows on these inputs, so the rule has no tolerance for the output "
        "(scale Q or K down, or give one: --factor 0 --atol A)",
    ),
    (
        "float16 gradient baseline overflows",
        {
            "dq.npy": npy(np.ones((2, 4), np.float16)),
            "dk.npy": npy(np.ones((3, 4), np.float16)),
            "dv.npy": npy(np.ones((3, 4), np.float16)),
            "q.npy": npy(np.ones((2, 4), np.float16)),
            "k.npy": npy(np.ones((3, 4), np.float16)),
            "v.npy": npy(np.ones((3, 4), np.float16)),
        },
        ["check", "--grad", "{d}/dq.npy", "{d}/dk.npy", "{d}/dv.npy", *T, "--dout", "{d}/q.npy", "--scale", "1e5"],
        1,
        "the naive float16 baseline overflows on these inputs, so the rule has no tolerance for dq "
        "(scale Q or K down, or give one: --factor 0 --atol A)",
    ),
    (
        "scores overflow float32",
        {
            "q.npy": npy(np.ones((2, 4), np.float32)),
            "k.npy": npy(np.ones((3, 4), np.float32)),
            "v.npy": npy(np.ones((3, 4), np.float32)),
        },
        ["run", *T, "-t", "1e-39"],
        1,
        "attention scores overflow float32: scale · q·k / temperature is too large (scale Q or K down, "
        "use a smaller scale or a larger temperature, or pass float64 data)",
    ),
    (
        "zero rope theta",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-theta", "0"],
        2,
        "rope theta must be a positive finite number, got 0.0",
    ),
    (
        "odd rope dim",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-dim", "3"],
        2,
        "rope dim must be a positive even number, got 3 (features are rotated in pairs)",
    ),
    (
        "rope offset past 2^32",
        TENSORS,
        ["run", *T, "--rope", "neox", "--rope-offset", "-" + "9" * 30],
        2,
        f"rope offset -{'9' * 30} is outside ±2^32 (±4,294,967,296) "
        "(float64 keeps RoPE angles within 1e-6 radians only up to position 2^32)",
    ),
    (
        "last rope position past 2^32",
        TENSORS,
        ["run", *T, "--rope", "neox", "--rope-offset", "4294967295"],
        2,
        "the last query's RoPE position, 4,294,967,295 + 2, is past 2^32 (4,294,967,296) "
        "(float64 keeps RoPE angles within 1e-6 radians only up to position 2^32)",
    ),
    (
        "bundle rope offset past 2^32",
        {"b.yaml": "q: [[1, 2]]\nk: [[1, 2]]\nv: [[1]]\nrope: neox\nrope_offset: 4294967297\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:5: rope offset 4294967297 is outside ±2^32 (±4,294,967,296) "
        "(float64 keeps RoPE angles within 1e-6 radians only up to position 2^32)",
    ),
    (
        "bundle number past float64",
        {"b.json": '{"q": [[1]], "k": [[1]], "v": [[1]], "scale": 1' + "0" * 400 + "}"},
        ["run", "{d}/b.json"],
        1,
        "{d}/b.json: scale: 100000000000000000000000000000000000000… is too large (float64 holds up to 1.8e308)",
    ),
    (
        "rope setting without rope",
        {},
        ["run", *QKV, "--rope-offset", "2"],
        2,
        "--rope-offset goes with --rope (add --rope neox or --rope gptj)",
    ),
    (
        "unknown rope style",
        {},
        ["run", *QKV, "--rope", "llama"],
        2,
        "Invalid value for '--rope': 'llama' is not one of…",
    ),
    (
        "tensor head out of range",
        TENSORS,
        ["run", *T, "--head", "4"],
        2,
        "--head 4 but there are 4 query heads (they are numbered from 0 to 3)",
    ),
    (
        "batch out of range",
        TENSORS,
        ["run", *T, "--batch", "1"],
        2,
        "--batch 1 but there is 1 batch (the only one is 0)",
    ),
    (
        "grad head out of range in a pipe",
        TENSORS,
        ["grad", *T, "--dout", "{d}/q.npy", "--head", "9", "-f", "json"],
        2,
        "--head 9 but there are 4 query heads (they are numbered from 0 to 3)",
    ),
    # ---------------------------------------------------------------- attn check
    (
        "check without inputs",
        {},
        ["check", "{d}/out.npy"],
        2,
        "expected OUT and one bundle, or OUT and three files Q K V, got 1 file",
    ),
    (
        "check negative factor",
        {},
        ["check", "o", *QKV, "--factor", "-1"],
        2,
        "--factor must be a finite number ≥ 0, got -1.0",
    ),
    (
        "check OUT of another shape",
        {"out.npy": npy(np.ones((2, 1)))},
        ["check", "{d}/out.npy", *QKV],
        1,
        "OUT is 2×1 but the output of Q, K and V is 1×1 (the same inputs, options and layout as the kernel's)",
    ),
    (
        "check integer OUT",
        {"out.npy": npy(np.ones((1, 1), int))},
        ["check", "{d}/out.npy", *QKV],
        1,
        "{d}/out.npy: holds int64 data; attn reads float arrays (save it with a.astype(np.float32) or float64)",
    ),
    (
        "check stdin twice",
        {},
        ["check", "-", "-", "k", "v"],
        2,
        "stdin ('-') is named more than once, but can be read only once (save all but one input to a file)",
    ),
    (
        "check --seed without --rows",
        {},
        ["check", "o", *QKV, "--seed", "3"],
        2,
        "--seed chooses the random rows of --rows (add --rows K)",
    ),
    (
        "check --rows of gradients",
        {},
        ["check", "--grad", "g", *QKV, "--rows", "4"],
        2,
        "--rows checks rows of the output, not gradients (leave out --rows or --grad)",
    ),
    (
        "check --rows fewer than the block edges",
        {**TENSORS, "out.npy": npy(np.ones((1, 4, 3, 8)))},
        ["check", "{d}/out.npy", *T, "--rows", "1"],
        2,
        "--rows 1 is fewer than the 2 rows every sampled check takes here: the first and last row of each block "
        "of 256 queries and the rows where the causal or window band meets a block of 1024 keys "
        "(give --rows 2 or more)",
    ),
    # ---------------------------------------------------------------- attn grad
    (
        "grad without dout",
        TENSORS,
        ["grad", *T],
        2,
        "the backward pass needs the output's gradient dO (give --dout FILE, or a bundle entry dout)",
    ),
    (
        "grad dout of another shape",
        {**TENSORS, "do.npy": npy(np.ones((1, 4, 3, 7)))},
        ["grad", *T, "--dout", "{d}/do.npy"],
        1,
        "dO is 1×4×3×7 but the output is 1×4×3×8 (give the gradient of the output, one number per output cell)",
    ),
    (
        "grad emit of a gradient not computed",
        {**TENSORS, "do.npy": npy(np.ones((1, 4, 3, 8)))},
        ["grad", *T, "--dout", "{d}/do.npy", "-f", "npy", "--emit", "dsinks"],
        2,
        "--emit dsinks: this command writes dq or dk or dv",
    ),
    (
        "grad top view",
        TENSORS,
        ["grad", *T, "--view", "top"],
        2,
        "attn grad has no top view: a gradient has no heaviest keys (--view auto, compact or numbers)",
    ),
    (
        "check dout without --grad",
        {},
        ["check", "o", *QKV, "--dout", "d"],
        2,
        "--dout is for checking gradients (add --grad)",
    ),
    (
        "check bad grad factor",
        {},
        ["check", "--grad", "g", *QKV, "--grad-factor", "dz=3"],
        2,
        "--grad-factor dz=3: expected NAME=F with NAME one of dq, dk, dv, dsinks, dbias and F a finite number ≥ 0",
    ),
    (
        "check grads without dk",
        {**TENSORS, "g.npz": npz(dq=np.ones((1, 4, 3, 8)))},
        ["check", "--grad", "{d}/g.npz", *T],
        1,
        "{d}/g.npz: the gradients have no dk, dv (an NPZ or safetensors bundle with dq, dk, dv (and dsinks, "
        "dbias), as attn grad writes)",
    ),
    (
        "check grads without dout",
        {**TENSORS, "g.npz": GRADS},
        ["check", "--grad", "{d}/g.npz", *T],
        2,
        "the backward pass needs the output's gradient dO (give --dout FILE, or a bundle entry dout)",
    ),
    (
        "check grads of another shape",
        {
            **TENSORS,
            "do.npy": npy(np.ones((1, 4, 3, 8))),
            "g.npz": npz(dq=np.ones((1, 4, 3, 7)), dk=np.ones((1, 2, 5, 8)), dv=np.ones((1, 2, 5, 8))),
        },
        ["check", "--grad", "{d}/g.npz", *T, "--dout", "{d}/do.npy"],
        1,
        "dq is 1×4×3×7 but the reference dq is 1×4×3×8 (the same inputs, options and layout as the kernel's)",
    ),
    (
        "check dsinks without sinks",
        {
            **TENSORS,
            "do.npy": npy(np.ones((1, 4, 3, 8))),
            "g.npz": npz(
                dq=np.ones((1, 4, 3, 8)), dk=np.ones((1, 2, 5, 8)), dv=np.ones((1, 2, 5, 8)), dsinks=np.ones(4)
            ),
        },
        ["check", "--grad", "{d}/g.npz", *T, "--dout", "{d}/do.npy"],
        1,
        "dsinks is given but there is no dsinks to compare it with (dsinks needs sinks and dbias a bias)",
    ),
    (
        "explain dout without --grad",
        {},
        ["explain", *QKV, "--dout", "d"],
        2,
        "--dout is for the backward pass (add --grad)",
    ),
    (
        "explain grad without dout",
        {},
        ["explain", *QKV, "--grad"],
        2,
        "the backward pass needs the output's gradient dO (give --dout FILE, or a bundle entry dout)",
    ),
    (
        "check grads with five files",
        {},
        ["check", "--grad", "a", "b", "c", "d", "e"],
        2,
        "expected the gradients (one bundle, or dQ dK dV) and one bundle or three files Q K V, got 5 files",
    ),
    # ---------------------------------------------------------------- YAML / JSON
    (
        "YAML boolean",
        {"b.yaml": "q: [[1, 2]]\nk: [[1, yes]]\nv: [[1]]\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:2: k: row 1, column 2: 'yes' is not a number (YAML reads it as true/false)",
    ),
    (
        "YAML quoted number",
        {"q.yaml": '- [1, "2", 3]\n'},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: row 1, column 2: '2' is quoted, so it is text, not a number (remove the quotes)",
    ),
    (
        "YAML null",
        {"q.yaml": "- [1, ~, 3]\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: row 1, column 2: a value is missing",
    ),
    (
        "YAML python tag",
        {"b.yaml": "q: !!python/object/apply:os.system ['echo pwned']\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:1: the tag tag:yaml.org,2002:python/object/apply:os.system is not allowed "
        "(attn reads plain YAML: numbers, lists and mappings)",
    ),
    (
        "YAML alias bomb",
        {"b.yaml": BOMB},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:7: expands to more than 10,000,000 elements (YAML aliases repeat whole subtrees; "
        "write the numbers out, or set ATTN_MAX_YAML_NODES to raise the limit)",
    ),
    (
        "YAML syntax",
        {"q.yaml": "- [1, 2\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:2: invalid YAML: …",
    ),  # then PyYAML's words and the column
    (
        "YAML !!str number",
        {"q.yaml": "- [1, !!str 2, 3]\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: row 1, column 2: '2' is tagged !!str, so it is not a number (remove the tag)",
    ),
    (
        "YAML !!timestamp number",
        {"q.yaml": "- [1, !!timestamp 2, 3]\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: row 1, column 2: '2' is tagged !!timestamp, so it is not a number (remove the tag)",
    ),
    (
        "YAML non-specific tag on a number",
        {"q.yaml": "- [1, ! 2, 3]\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: row 1, column 2: '2' is tagged !, so it is not a number (remove the tag)",
    ),
    (
        "YAML !!bool on a number in a mask",
        {"m.yaml": "- [1, !!bool 0, 1]\n"},
        ["run", *QKV, "--mask", "{d}/m.yaml"],
        1,
        "{d}/m.yaml:1: row 1, column 2: '0' is tagged !!bool, so it is not a number (remove the tag)",
    ),
    (
        "YAML !!binary number",
        {"q.yaml": "- [1, !!binary 2, 3]\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: the tag tag:yaml.org,2002:binary is not allowed (attn reads plain YAML: numbers, lists and "
        "mappings)",
    ),
    (
        "YAML custom tag on a number",
        {"q.yaml": "- [1, !foo 2, 3]\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: the tag !foo is not allowed (attn reads plain YAML: numbers, lists and mappings)",
    ),
    (
        "JSON syntax",
        {"q.json": "[[1, 2],\n [3 4]]"},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json:2: invalid JSON: Expecting ',' delimiter (column 5)",
    ),
    ("JSON NaN", {"q.json": "[[1, NaN, 3]]"}, ["run", "{d}/q.json", *KV], 1, "{d}/q.json: NaN is not a finite number"),
    (
        "pandas' default to_json()",
        {"q.json": '{"x": {"0": 1.0, "1": 2.0}, "y": {"0": 3.0, "1": 4.0}}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: is a mapping of mappings, as pandas' to_json() writes by default: it could be columns of rows "
        "or rows of columns (write it with to_json(orient='split') or orient='records')",
    ),
    (
        "pandas' to_json() in a bundle",
        {"b.yaml": "q: {x: {a: 1}, y: {a: 2}}\nk: [[1, 2]]\nv: [[1]]\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:1: q: is a mapping of mappings, as pandas' to_json() writes by default: it could be columns of "
        "rows or rows of columns (write it with to_json(orient='split') or orient='records')",
    ),
    (
        "one row a mapping",
        {"q.json": '{"a": [1, 2, 3], "b": {"x": 1}}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: row 'b' is a mapping, other rows are not (write every row as a list of numbers)",
    ),
    (
        "split data not rows",
        {"q.json": '{"columns": ["x"], "data": [1, 2]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='split': data must be a list of rows",
    ),
    (
        "split columns not a list",
        {"q.json": '{"columns": "x", "data": [[1]]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='split': columns must be a list of names",
    ),
    (
        "split columns too few",
        {"q.json": '{"columns": ["x", "y"], "index": [0], "data": [[1, 2, 3]]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='split': 2 column names for rows of 3 values",
    ),
    (
        "split index too long",
        {"q.json": '{"columns": ["x", "y", "z"], "index": [0, 1], "data": [[1, 2, 3]]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='split': the index has 2 labels for 1 row",
    ),
    (
        "split MultiIndex",
        {"q.json": '{"columns": ["x", "y", "z"], "index": [["a", "b"]], "data": [[1, 2, 3]]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='split': the index has several levels; attn reads one level of row labels "
        "(reset_index() the other levels first)",
    ),
    (
        "split index not a list",
        {"q.json": '{"columns": ["x", "y", "z"], "index": 0, "data": [[1, 2, 3]]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='split': the index must be a list of row labels",
    ),
    (
        "split index null",
        {"q.json": '{"columns": ["x", "y", "z"], "index": ["a", null], "data": [[1, 2, 3], [4, 5, 6]]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='split': row 2 has no label (its index is null) "
        "(give every row a label, or write it with index=False)",
    ),
    (
        "table field without a name",
        {"q.json": '{"schema": {"fields": [{"type": "number"}]}, "data": [{"x": 1}]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='table': every schema field needs a name",
    ),
    (
        "table MultiIndex",
        {
            "q.json": '{"schema": {"fields": [{"name": "a"}, {"name": "b"}, {"name": "x"}], '
            '"primaryKey": ["a", "b"]}, "data": [{"a": 1, "b": 2, "x": 1}]}'
        },
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='table': the index has 2 levels; attn reads one level of row labels "
        "(reset_index() the other levels first)",
    ),
    (
        "table data not records",
        {"q.json": '{"schema": {"fields": [{"name": "x"}]}, "data": [[1]]}'},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: pandas' orient='table': data must be a list of records",
    ),
    (
        "table record in another order",
        {
            "q.json": '{"schema": {"fields": [{"name": "index"}, {"name": "x"}, '
            '{"name": "y"}, {"name": "z"}], "primaryKey": ["index"]}, '
            '"data": [{"index": 0, "x": 1, "z": 2, "y": 3}]}'
        },
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: row 1 has the columns index, x, z, y, expected index, x, y, z as the schema's fields name them "
        "(every record needs the same names, in the same order)",
    ),
    (
        "bundle without v",
        {"b.yaml": "q: [[1]]\nk: [[1]]\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml: the bundle has no v (a bundle holds q, k and v, and optionally mask, bias, sinks, alibi_slopes)",
    ),
    (
        "bundle extra entry",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\nw: [[1]]\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml: the bundle has an unexpected entry 'w' "
        "(a bundle holds q, k and v, and optionally mask, bias, sinks, alibi_slopes)",
    ),
    (
        "bundle q and Q",
        {"b.yaml": "q: [[1]]\nQ: [[2]]\nk: [[1]]\nv: [[1]]\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:2: has both 'q' and 'Q', which name the same entry (entry names ignore case: keep one of them)",
    ),
    (
        "JSON bundle q and Q",
        {"b.json": '{"q": [[1]], "k": [[1]], "v": [[1]], "Q": [[2]]}'},
        ["run", "{d}/b.json"],
        1,
        "{d}/b.json: has both 'q' and 'Q', which name the same entry (entry names ignore case: keep one of them)",
    ),
    (
        "NPZ bundle q and Q",
        {"b.npz": npz(q=np.ones((1, 1)), Q=np.ones((1, 1)), k=np.ones((1, 1)), v=np.ones((1, 1)))},
        ["run", "{d}/b.npz"],
        1,
        "{d}/b.npz: has both 'q' and 'Q', which name the same entry (entry names ignore case: keep one of them)",
    ),
    (
        "unknown bundle setting",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\ntemprature: 5\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:4: the bundle has an unknown setting 'temprature' (did you mean 'temperature'? "
        "a bundle may set description, rgb, causal, causal_align, scale, temperature, similarity, window, softcap, "
        "alibi, rope, rope_theta, rope_dim, rope_offset, rope_features, rope_scaling)",
    ),
    (
        "bundle setting not a boolean",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\ncausal: 3\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:4: causal: expected true or false, found 3",
    ),
    (
        "bundle setting not a choice",
        {"b.json": '{"q": [[1]], "k": [[1]], "v": [[1]], "similarity": "cos"}'},
        ["run", "{d}/b.json"],
        1,
        "{d}/b.json: similarity: expected dot or cosine, found 'cos'",
    ),
    (
        "bundle scale not positive",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\nscale: 0\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:4: scale must be a positive finite number, got 0.0",
    ),
    (
        "bundle setting without a value",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\nscale: ~\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:4: scale: a value is missing",
    ),
    (
        "bundle setting not a number",
        {"b.yaml": "q: [[1]]\nk: [[1]]\nv: [[1]]\ntemperature: hot\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:4: temperature: expected a number, found 'hot'",
    ),
    (
        "CSV as bundle",
        {"q.csv": "1\n"},
        ["run", "{d}/q.csv"],
        1,
        "{d}/q.csv: a CSV file holds one matrix, not a bundle "
        "(give three files Q K V, or one YAML/JSON/NPZ/safetensors bundle with q, k and v)",
    ),
    # ---------------------------------------------------------------- usage (exit 2)
    ("two files", {}, ["run", "a", "b"], 2, "expected one bundle file or three files Q K V, got 2"),
    (
        "emit a matrix run has not",
        {},
        ["run", "{s}/colors.yaml", "--emit", "q", "-f", "csv"],
        2,
        "--emit q: this command writes output or weights",
    ),
    (
        "stdin twice",
        {},
        ["run", "-", "-", "x"],
        2,
        "stdin ('-') is named more than once, but can be read only once (save all but one input to a file)",
    ),
    (
        "stdin as file and mask",
        {},
        ["run", "-", "k", "v", "--mask", "-"],
        2,
        "stdin ('-') is named more than once, but can be read only once (save all but one input to a file)",
    ),
    (
        "zero scale",
        {},
        ["run", "{s}/colors.yaml", "--scale", "0"],
        2,
        "scale must be a positive finite number, got 0.0",
    ),
    (
        "negative scale",
        {},
        ["run", "{s}/colors.yaml", "--scale", "-2"],
        2,
        "scale must be a positive finite number, got -2.0",
    ),
    (
        "NaN scale",
        {},
        ["run", "{s}/colors.yaml", "--scale", "nan"],
        2,
        "scale must be a positive finite number, got nan",
    ),
    (
        "zero temperature",
        {},
        ["run", "{s}/colors.yaml", "-t", "0"],
        2,
        "temperature must be a positive finite number, got 0.0",
    ),
    (
        "infinite temperature",
        {},
        ["run", "{s}/colors.yaml", "-t", "inf"],
        2,
        "temperature must be a positive finite number, got inf",
    ),
    (
        "unknown format",
        {},
        ["run", "--format", "xml", "a"],
        2,
        "Invalid value for '--format' / '-f': 'xml' is not one of…",
    ),
    ("no files", {}, ["run"], 2, "Missing argument 'FILE...'…"),
    ("unknown command", {}, ["frobnicate"], 2, "No such command 'frobnicate'…"),
    (
        "option given twice",
        {},
        ["run", *QKV, "--scale", "1", "--scale", "2"],
        2,
        "--scale is given 2 times; give it once (see 'attn run --help')",
    ),
    (
        "flag given both ways",
        {},
        ["explain", *QKV, "--causal", "--no-causal"],
        2,
        "--causal is given 2 times; give it once (see 'attn explain --help')",
    ),
    (
        "check option given twice",
        {},
        ["check", "out.npy", *QKV, "--window", "1,0", "--window", "2,0"],
        2,
        "--window is given 2 times; give it once (see 'attn check --help')",
    ),
    (
        "top with another view",
        {},
        ["run", "{s}/colors.yaml", "--top", "3", "--view", "numbers"],
        2,
        "--top 3 shows the top view, not --view numbers (give one of them)",
    ),
    ("no top keys", {}, ["run", "{s}/colors.yaml", "--top", "0"], 2, "Invalid value for '--top'…"),
    ("unknown view", {}, ["run", "{s}/colors.yaml", "--view", "pie"], 2, "Invalid value for '--view'…"),
    (
        "figure to stdout",
        {},
        ["run", "{s}/colors.yaml", "--png", "-"],
        2,
        "a picture needs a file name, not '-' (stdout gets the --format output)",
    ),
    (
        "figure to a missing folder",
        {},
        ["self", "the pink elephant", "--pdf", "{d}/no/such/x.pdf"],
        1,
        "{d}/no/such/x.pdf: cannot write: no such directory",
    ),
    # ---------------------------------------------------------------- lookup
    (
        "unknown word",
        {},
        ["lookup", "fruit", "--keys", "apple,banan,chair"],
        1,
        "unknown word 'banan' (did you mean 'banana'?)",
    ),
    (
        "unknown words",
        {},
        ["lookup", "fruit", "--keys", "apple,banan,chiar"],
        1,
        "unknown words 'banan', 'chiar' (did you mean 'banana', 'chair'?)",
    ),
    (
        "word not in own vectors",
        {"g.txt": "fruit 1 0\napple 0 1\n"},
        ["lookup", "fruit", "--keys", "apple,pear", "--vectors", "{d}/g.txt"],
        1,
        "unknown word 'pear' (not in {d}/g.txt)",
    ),
    ("phrase without words", {}, ["lookup", "...", "--keys", "apple"], 1, "no words in '...'"),
    (
        "no key left",
        {},
        ["lookup", "fruit", "--keys", "zuko,zukoo", "--unknown", "skip"],
        1,
        "no key has a word in the bundled GloVe 6B 50d table (--unknown skip left them all out)",
    ),
    (
        "unknown policy with a model",
        {},
        ["lookup", "fruit", "-k", "apple", "--model", "DIR", "--unknown", "zero"],
        2,
        "--unknown is for word vectors; --model embeds any text",
    ),
    (
        "unknown policy misspelt",
        {},
        ["lookup", "fruit", "-k", "apple", "--unknown", "ignore"],
        2,
        "Invalid value for '--unknown': 'ignore' is not one of…",
    ),
    ("no keys", {}, ["lookup", "fruit"], 2, "give the keys with --keys a,b,c or --dict FILE"),
    ("keys and dict", {}, ["lookup", "fruit", "--keys", "a", "--dict", "x.yaml"], 2, "give --keys or --dict, not both"),
    (
        "dict twice",
        {},
        ["lookup", "fruit", "--dict", "x.yaml", "-d", "y.yaml"],
        2,
        "--dict is given 2 times; give it once (see 'attn lookup --help')",
    ),
    (
        "empty key",
        {},
        ["lookup", "fruit", "--keys", "apple,,chair"],
        2,
        "--keys has an empty item in 'apple,,chair' (separate items with single commas)",
    ),
    (
        "empty keys",
        {},
        ["lookup", "fruit", "--keys", ""],
        2,
        "--keys has an empty item in '' (separate items with single commas)",
    ),
    (
        "values and keys counts",
        {},
        ["lookup", "fruit", "--keys", "apple,chair", "--values", "1"],
        2,
        "2 keys but 1 value (give one value per key)",
    ),
    (
        "non-numeric value",
        {},
        ["lookup", "fruit", "--keys", "apple,chair", "--values", "1,two"],
        2,
        "--values: 'two' is not a number",
    ),
    (
        "infinite value",
        {},
        ["lookup", "fruit", "--keys", "apple,chair", "--values", "1,inf"],
        2,
        "--values must be finite numbers",
    ),
    (
        "values with dict",
        {},
        ["lookup", "fruit", "--dict", "x.yaml", "--values", "1"],
        2,
        "--values goes with --keys; a --dict file holds its own values",
    ),
    (
        "output without values",
        {},
        ["lookup", "fruit", "--keys", "apple", "--emit", "output"],
        2,
        "--emit output needs values (give --values or --dict, or use --emit weights)",
    ),
    (
        "words without npy",
        {},
        ["lookup", "fruit", "--keys", "apple", "--words", "w.txt"],
        2,
        "--words goes with a .npy --vectors file",
    ),
    (
        "dict without keys",
        {"d.csv": "1,2\n3,4\n"},
        ["lookup", "fruit", "--dict", "{d}/d.csv"],
        1,
        "{d}/d.csv: has no keys (write a mapping key: value, or put the keys in the first column)",
    ),
    (
        "dict with text value",
        {"d.yaml": "apple: ten\n"},
        ["lookup", "fruit", "--dict", "{d}/d.yaml"],
        1,
        "{d}/d.yaml:1: row 'apple', column 1: 'ten' is not a number",
    ),
    ("missing dict", {}, ["lookup", "fruit", "--dict", "{d}/none.yaml"], 1, "{d}/none.yaml: no such file"),
    (
        "ragged vectors",
        {"v.txt": "fruit 1 0\napple 0 1 2\n"},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.txt"],
        1,
        "{d}/v.txt:2: expected 2 numbers after the word, found 3",
    ),
    (
        "word2vec header count",
        {"v.txt": "3 2\nfruit 1 0\napple 0 1\n"},
        ["lookup", "fruit", "--keys", "apple,pear", "--vectors", "{d}/v.txt"],
        1,
        "{d}/v.txt:1: the header says 3 words but the file has 2",
    ),
    (
        "word2vec header dimension",
        {"v.txt": "2 3\nfruit 1 0\napple 0 1\n"},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.txt"],
        1,
        "{d}/v.txt:2: expected 3 numbers after the word, found 2",
    ),
    (
        "binary garbage vectors",
        {"v.bin": bytes(range(256)) * 2},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.bin"],
        1,
        "{d}/v.bin…",
    ),
    (
        "empty vectors",
        {"v.txt": ""},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.txt"],
        1,
        f"{{d}}/v.txt: empty file, no word vectors {VECTORS_HINT}",
    ),
    (
        "NaN in vectors",
        {"v.txt": "fruit 1 nan\napple 1 2\n"},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.txt"],
        1,
        "{d}/v.txt:1: 'fruit' has a non-finite value (nan)",
    ),
    (
        "text in vectors",
        {"v.txt": "fruit 1 x\n"},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.txt"],
        1,
        f"{{d}}/v.txt:1: 'x' is not a number {VECTORS_HINT}",
    ),
    (
        "missing vectors",
        {},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/nope.txt"],
        1,
        "{d}/nope.txt: no such file",
    ),
    # ---------------------------------------------------------------- self
    (
        "heads do not divide d_attn",
        {"x.csv": "1,2,3,4\n5,6,7,8\n"},
        ["self", "{d}/x.csv", "--heads", "3"],
        1,
        "W_Q is 4×4: d_attn = 4 does not split into 3 heads (the number of heads must divide d_attn)",
    ),
    (
        "W_Q does not chain",
        {"x.csv": "1,2,3,4\n", "wq.csv": "1,2\n3,4\n"},
        ["self", "{d}/x.csv", "--wq", "{d}/wq.csv"],
        1,
        "X is 1×4 but W_Q is 2×2 (W_Q needs 4 rows, one per column of X)",
    ),
    (
        "unknown word in a sentence",
        {},
        ["self", "the pink elephnat"],
        1,
        "unknown word 'elephnat' (did you mean 'elephant'?)",
    ),
    ("sentence without words", {}, ["self", "..."], 1, "no words in '...' (give a sentence or a matrix file)"),
    (
        "sentence without known words",
        {},
        ["self", "Zuko", "--unknown", "skip"],
        1,
        "no word of 'Zuko' is in the bundled GloVe 6B 50d table (--unknown skip left them all out)",
    ),
    (
        "unknown policy without a sentence",
        {"x.csv": "1,2\n"},
        ["self", "{d}/x.csv", "--unknown", "zero"],
        2,
        "--unknown is about the words of a sentence, but X and Z are files",
    ),
    (
        "many unknown words",
        {},
        ["lookup", "fruit", "--keys", ",".join(f"xqzzvw{c}" for c in "abcdefghijkl")],
        1,
        "unknown words "
        + ", ".join(f"'xqzzvw{c}'" for c in "abcdefghij")
        + ", … (12 in all) (not among the 140,000 words of the bundled GloVe 6B 50d table)",
    ),
    (
        "self bundle extra entry",
        {"b.yaml": "x: [[1, 2]]\nwz: [[1, 2]]\n"},
        ["self", "{d}/b.yaml"],
        1,
        "{d}/b.yaml: the bundle has an unexpected entry 'wz' "
        "(a bundle holds x and any of context, wq, wk, wv, wo, bq, bk, bv, bo, mask, bias)",
    ),
    (
        "self bundle heads below 1",
        {"b.yaml": "x: [[1, 2]]\nheads: 0\n"},
        ["self", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:2: heads: must be at least 1, found 0",
    ),
    (
        "self bundle heads not whole",
        {"b.yaml": "x: [[1, 2]]\nheads: 1.5\n"},
        ["self", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:2: heads: expected a whole number, found 1.5",
    ),
    (
        "self bundle unknown setting",
        {"b.yaml": "x: [[1, 2]]\nhead: 1\n"},
        ["self", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:2: the bundle has an unknown setting 'head' (did you mean 'heads'? a bundle may set description, "
        "heads, seed, d_attn, d_out, columns, causal, causal_align, scale, temperature, similarity, "
        "window, softcap, alibi, rope, rope_theta, rope_dim, rope_offset, rope_features, rope_scaling)",
    ),
    (
        "self float mask",
        {"x.csv": "1,2\n3,4\n", "m.csv": "0,-inf\n0,0\n"},
        ["self", "{d}/x.csv", "--mask", "{d}/m.csv"],
        1,
        "{d}/m.csv: the mask holds -inf, but a mask holds only 1 (may attend) and 0 (may not) "
        "(to add numbers to the scores, give the file as --bias FILE)",
    ),
    (
        "head out of range",
        {"x.csv": "1,2\n3,4\n"},
        ["self", "{d}/x.csv", "--heads", "2", "--head", "2"],
        2,
        "--head 2 but there are 2 heads (heads are numbered from 0 to 1)",
    ),
    ("zero heads", {"x.csv": "1,2\n"}, ["self", "{d}/x.csv", "--heads", "0"], 2, "Invalid value for '--heads' / '-H'…"),
    # ---------------------------------------------------------------- explain, softmax, trace
    (
        "explain unknown query",
        {},
        ["explain", *QKV, "--query", "3"],
        2,
        "--query 3: no such query (Q has row 0; give a number or a label)",
    ),
    (
        "explain shapes",
        {"q.csv": "1,2\n"},
        ["explain", "{d}/q.csv", *KV],
        1,
        "Q is 1×2 but K is 3×3 (Q and K need the same number of columns, d_k)",
    ),
    ("softmax text", {}, ["softmax", "1", "x"], 2, "'x' is not a number"),
    (
        "softmax NaN",
        {},
        ["softmax", "1", "nan"],
        2,
        "nan is not allowed (-inf is fine, it gets weight 0; NaN and +inf are not)",
    ),
    ("softmax bad stdin", {}, ["softmax", "-"], 1, "<stdin>:2: 'four' is not a number", "1 2\n3 four\n"),
    (
        "softmax decimal commas",
        {},
        ["softmax", "1,5", "2,5"],
        2,
        "'1,5' could be one number written with a decimal comma, or two numbers "
        "(write 1.5 for one number; separate numbers by spaces or by commas, not both)",
    ),
    (
        "softmax decimal commas on stdin",
        {},
        ["softmax", "-"],
        1,
        "<stdin>:2: '2,5' could be one number written with a decimal comma, or two numbers "
        "(write 2.5 for one number; separate numbers by spaces or by commas, not both)",
        "1\n2,5 3\n",
    ),
    (
        "softmax temperature twice",
        {},
        ["softmax", "1", "2", "-t", "1", "--temperature", "2"],
        2,
        "--temperature is given 2 times; give it once (see 'attn softmax --help')",
    ),
    ("trace without a model", {}, ["trace", "the car"], 2, "no model given (pass --model DIR or set ATTN_MODEL)"),
    (
        "trace not a model folder",
        {"notes.txt": "hi"},
        ["trace", "the car", "-m", "{d}"],
        1,
        "{d}: not a model folder: no config.json (a model folder holds config.json, "
        "model.safetensors and vocab.txt or tokenizer.json)",
    ),
    (
        "trace --generate on an encoder",
        BERT,
        ["trace", "the car", "-m", "{d}/bert", "--generate", "3"],
        2,
        "--generate: BERT is an encoder, which predicts no next token "
        "(generate with a decoder: GPT-2, Llama, Mistral, Qwen2, Gemma, Gemma 2, Gemma 3)",
    ),
    (
        "trace --top-next on an encoder",
        BERT,
        ["trace", "the car", "-m", "{d}/bert", "--top-next", "3"],
        2,
        "--top-next: BERT is an encoder, which predicts no next token "
        "(predict with a decoder: GPT-2, Llama, Mistral, Qwen2, Gemma, Gemma 2, Gemma 3)",
    ),
    (
        "trace a text longer than a decoder's positions",
        GPT2,
        ["trace", "The car" * 20, "-m", "{d}/gpt2"],
        1,
        "the text is 40 tokens but the model takes at most 32 (shorten it)",
    ),
    (
        "trace --generate past a decoder's positions",
        GPT2,
        ["trace", "The car" * 10, "-m", "{d}/gpt2", "--generate", "13"],
        1,
        "the text is 20 tokens and 13 more to generate but the model takes at most 32 (shorten it or generate fewer)",
    ),
    (
        "trace --query not among a decoder's tokens",
        GPT2,
        ["trace", "The car", "-m", "{d}/gpt2", "--query", "bus"],
        2,
        "--query 'bus' is not a token of the text (its tokens: The ' car')",
    ),
    (
        "trace --summary with --query",
        {},
        ["trace", "the car", "-m", "{d}", "--summary", "--query", "car"],
        2,
        "--summary summarises every query of every head; --query shows weights (give one of them)",
    ),
    (
        "trace --explain on Gemma 3 (QK-norm)",
        {"gemma3": TinyModel("gemma3_text")},
        ["trace", "The car", "-m", "{d}/gemma3", "--query", "car", "--layer", "0", "--head", "0", "--explain"],
        2,
        "--explain: Gemma 3 normalises each head's q and k (QK-norm) after the projections, which explain does "
        "not show yet (see the head's weights with --layer and --head)",
    ),
    (
        "trace --lens with --summary",
        GPT2,
        ["trace", "The car", "-m", "{d}/gpt2", "--lens", "--summary"],
        2,
        "--lens is a view of its own, and so is --summary (give one of them)",
    ),
    (
        "trace --lens with --head",
        GPT2,
        ["trace", "The car", "-m", "{d}/gpt2", "--lens", "--head", "1"],
        2,
        "--lens reads whole layers, not heads (leave out --head; --layer picks rows)",
    ),
    (
        "trace --lens as csv",
        GPT2,
        ["trace", "The car", "-m", "{d}/gpt2", "--lens", "-f", "csv"],
        2,
        "--lens is a table: csv writes weights (use json, or leave out --lens)",
    ),
    (
        "trace --lens on an encoder",
        BERT,
        ["trace", "the car", "-m", "{d}/bert", "--lens"],
        2,
        "--lens: BERT is an encoder, which predicts no next token "
        "(predict with a decoder: GPT-2, Llama, Mistral, Qwen2, Gemma, Gemma 2, Gemma 3)",
    ),
    (
        "trace --summary as npy",
        {},
        ["trace", "the car", "-m", "{d}", "--summary", "-f", "npy"],
        2,
        "--summary is a table: npy writes weights (use json, or leave out --summary)",
    ),
    (
        "trace --summary as safetensors",
        {},
        ["trace", "the car", "-m", "{d}", "--summary", "-f", "safetensors"],
        2,
        "--summary is a table: safetensors writes weights (use json, or leave out --summary)",
    ),
    (
        "trace --aggregate as csv of every layer",
        {},
        ["trace", "the car", "-m", "{d}", "--aggregate", "mean", "-f", "csv"],
        2,
        "csv writes one matrix (pick one --layer, or use json or npy)",
    ),
    (
        "trace --generate negative",
        {},
        ["trace", "the car", "-m", "{d}", "--generate", "-1"],
        2,
        "Invalid value for '--generate' / '-g'…",
    ),
    (
        "trace --aggregate unknown",
        {},
        ["trace", "the car", "-m", "{d}", "--aggregate", "sum"],
        2,
        "Invalid value for '--aggregate'…",
    ),
    (
        "trace --explain without --layer",
        {},
        ["trace", "the car", "-m", "{d}", "--head", "0", "--query", "car", "--explain"],
        2,
        "--explain walks one token through one head of one layer: it needs one --layer L "
        "(e.g. --layer 9 --head 4 --query it --explain)",
    ),
    (
        "trace --explain with two heads",
        {},
        ["trace", "the car", "-m", "{d}", "--layer", "0", "--head", "0", "--head", "1", "--query", "car", "--explain"],
        2,
        "--explain walks one token through one head of one layer: it needs one --head H (2 given) "
        "(e.g. --layer 9 --head 4 --query it --explain)",
    ),
    (
        "trace --explain without --query",
        {},
        ["trace", "the car", "-m", "{d}", "--layer", "0", "--head", "0", "--explain"],
        2,
        "--explain walks one token through one head of one layer: it needs --query TOKEN "
        "(e.g. --layer 9 --head 4 --query it --explain)",
    ),
    (
        "trace --explain alone",
        {},
        ["trace", "the car", "-m", "{d}", "--explain"],
        2,
        "--explain walks one token through one head of one layer: it needs one --layer L, one --head H and "
        "--query TOKEN (e.g. --layer 9 --head 4 --query it --explain)",
    ),
    (
        "trace --explain with --summary",
        {},
        ["trace", "the car", "-m", "{d}", "--layer", "0", "--head", "0", "--query", "car", "--explain", "--summary"],
        2,
        "--explain walks one token through one head; --summary summarises every head (give one of them)",
    ),
    (
        "trace --explain with --aggregate",
        {},
        ["trace", "the car", "-m", "{d}", "--layer", "0", "--query", "car", "--explain", "--aggregate", "mean"],
        2,
        "--explain walks one token through one head; --aggregate combines heads (give one of them)",
    ),
    (
        "picture to a missing folder",
        {},
        ["run", "{s}/colors.yaml", "--svg", "{d}/no/such/x.svg"],
        1,
        "{d}/no/such/x.svg: cannot write: no such directory",
    ),
    # ---------------------------------------------------------------- hostile inputs and environments
    (
        "picture over an input",
        {"q.csv": "1,2,3\n"},
        ["run", "{d}/q.csv", *KV, "--svg", "{d}/q.csv"],
        2,
        "{d}/q.csv: --svg names an input of this run "
        "(attn never writes over its inputs: give the picture another name)",
    ),
    (
        "picture over the dictionary",
        {"f.yaml": "apple: 1\n"},
        ["lookup", "fruit", "--dict", "{d}/f.yaml", "--html", "{d}/./f.yaml"],
        2,
        "{d}/./f.yaml: --html names {d}/f.yaml, an input of this run "
        "(attn never writes over its inputs: give the picture another name)",
    ),
    (
        "picture over stdin",
        {},
        ["softmax", "-", "--svg", "-"],
        2,
        "a picture needs a file name, not '-' (stdout gets the --format output)",
    ),
    ("picture with an empty name", {}, ["softmax", "1", "--html", ""], 2, "--html needs a file name, not ''"),
    (
        "picture over a model file",
        {"config.json": "{}"},
        ["trace", "x", "-m", "{d}", "--svg", "{d}/config.json"],
        2,
        "{d}/config.json: --svg names an input of this run "
        "(attn never writes over its inputs: give the picture another name)",
    ),
    (
        "two pictures, one file",
        {},
        ["softmax", "1", "--svg", "{d}/x.svg", "--html", "{d}/x.svg"],
        2,
        "{d}/x.svg: --svg and --html name the same file (give each picture its own name)",
    ),
    (
        "picture is a directory",
        {},
        ["self", "{s}/three_spaces.yaml", "--svg", "{d}"],
        1,
        "{d}: is a directory, expected a file",
    ),
    (
        "YAML nested too deeply",
        {"q.yaml": "- " * 20 + "1\n"},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: is nested too deeply to be a matrix (a matrix needs at most 8 levels of lists and mappings)",
    ),
    (
        "YAML flow lists nested past libyaml's own limit",
        {"q.yaml": "[" * 2000 + "]" * 2000},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: is nested too deeply to be a matrix (a matrix needs at most 8 levels of lists and mappings)",
    ),
    (
        "YAML flow mappings as keys nested past libyaml's own limit",
        {"q.yaml": "- " + "{" * 1500 + "}" * 1500},
        ["run", "{d}/q.yaml", *KV],
        1,
        "{d}/q.yaml:1: a mapping key must be a plain name",
    ),
    (
        "JSON nested too deeply",
        {},
        ["run", "-", *KV],
        1,
        "<stdin>: is nested too deeply to be a matrix (a matrix needs at most 8 levels of lists and mappings)",
        "[" * 100_000 + "]" * 100_000,
    ),
    (
        "JSON 5,000-digit number",
        {"q.json": "[[" + "7" * 5000 + ", 1, 1]]"},
        ["run", "{d}/q.json", *KV],
        1,
        "{d}/q.json: " + "7" * 39 + "… is too large (5,000 digits)",
    ),
    ("stdin word line", {}, ["softmax", "-"], 1, "<stdin>:3: 'e' is not a number", "1 2\n3 4 1e5\ne 6\n"),
    (
        "control characters in a file name",
        {},
        ["run", "{d}/no\x1b[2Jpe.csv", *KV],
        1,
        "{d}/no\\x1b[2Jpe.csv: no such file",
    ),
    ("a file name that is not UTF-8", {}, ["run", "{d}/\udcff.csv", *KV], 1, "{d}/\\xff.csv: no such file"),
    (
        "stdin past the stream limit",
        {},
        ["run", "-", *KV],
        1,
        "<stdin>: holds more than 10 bytes, the limit for stdin, a pipe or a device "
        "(save it to a file, or set ATTN_MAX_STREAM_BYTES to raise the limit)",
        "1,2,3\n4,5,6\n",
        {"ATTN_MAX_STREAM_BYTES": "10"},
    ),
    (
        "limit that is not a number",
        {},
        ["run", *QKV],
        2,
        "ATTN_MAX_ELEMENTS='١٠' is not a positive whole number",
        None,
        {"ATTN_MAX_ELEMENTS": "١٠"},
    ),
    (
        "vectors with an endless line",
        {"v.txt": "fruit " + "1 " * 60},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.txt"],
        1,
        "{d}/v.txt:1: has 101 characters in one line, more than the limit of 100 (set ATTN_MAX_LINE to raise it)",
        None,
        {"ATTN_MAX_LINE": "100"},
    ),
    (
        "truncated gzip vectors",
        {"v.gz": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03KK"},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.gz"],
        1,
        "{d}/v.gz: is a damaged or truncated gzip file (…",
    ),  # then Python's gzip's words
    (
        "NPZ vectors with a member name twice",
        {
            "v.npz": archive(
                ("vectors.npy", npy(np.ones((2, 2)))),
                ("vectors.npy", npy(np.zeros((2, 2)))),
                ("words.npy", npy(np.array(["fruit", "apple"]))),
            )
        },
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.npz"],
        1,
        "{d}/v.npz: holds two arrays named 'vectors': the member 'vectors.npy' twice "
        "(numpy would read only one of them: save each name once)",
    ),
    (
        "NPY vectors claiming 10¹²×10¹²",
        {"v.npy": npy_claiming((10**12, 10**12)), "w.txt": "fruit\napple\n"},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.npy", "--words", "{d}/w.txt"],
        1,
        "{d}/v.npy: its NPY header declares 1000000000000×1000000000000 float64 values "
        "(8,000,000,000,000,000,000,000,000 bytes), but 16 bytes of data follow it (the file is truncated or damaged)",
    ),
    (
        "NPZ vectors with byte-string words not UTF-8",
        {"v.npz": npz(vectors=np.ones((2, 2)), words=np.array([b"fruit", b"\xe4pfel"]))},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.npz"],
        1,
        "{d}/v.npz: words entry 2 is not UTF-8 text: b'\\xe4pfel' "
        "(byte strings are read as UTF-8: save them as str, or encode them as UTF-8)",
    ),
    (
        "word2vec header absurd dimension",
        {"v.txt": "2 99999999999999\nfruit 1\n"},
        ["lookup", "fruit", "--keys", "apple", "--vectors", "{d}/v.txt"],
        1,
        "{d}/v.txt:1: the header says the vectors have 99,999,999,999,999 dimensions, more than the limit of "
        "100,000,000 values (a damaged header? set ATTN_MAX_ELEMENTS to raise the limit)",
    ),
    (
        "absurd --d-attn",
        {},
        ["self", "{s}/q.csv", "--d-attn", "1" + "0" * 23],
        2,
        "--d-attn 100,000,000,000,000,000,000,000: a random W_Q of 3×100,000,000,000,000,000,000,000 would hold "
        "300,000,000,000,000,000,000,000 values, more than the limit of 100,000,000 "
        "(a smaller --d-attn, or set ATTN_MAX_ELEMENTS to raise the limit)",
    ),
    (
        "--query in other digits",
        {},
        ["explain", *QKV, "--query", "²"],
        2,
        "--query ²: no such query (Q has row 0; give a number or a label)",
    ),
    (
        "config.json layer_norm_eps text",
        {
            "config.json": '{"model_type": "bert", "vocab_size": 9, "hidden_size": 4, '
            '"num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 4, "max_position_embeddings": 8, '
            '"layer_norm_eps": "small"}'
        },
        ["trace", "the car", "-m", "{d}"],
        1,
        "{d}/config.json: layer_norm_eps must be a positive number, got 'small'",
    ),
    (
        "config.json nested too deeply",
        {"config.json": "[" * 100_000 + "]" * 100_000},
        ["trace", "the car", "-m", "{d}"],
        1,
        "{d}/config.json: not valid JSON: nested too deeply",
    ),
    (
        "max_seq_length not a number",
        {
            "config.json": '{"model_type": "bert", "vocab_size": 9, "hidden_size": 4, '
            '"num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 4, "max_position_embeddings": 8}',
            "sentence_bert_config.json": '{"max_seq_length": "long"}',
        },
        ["trace", "the car", "-m", "{d}"],
        1,
        "{d}/sentence_bert_config.json: max_seq_length must be a positive whole number, got 'long'",
    ),
    (
        "--model of an unknown model_type",
        {**TENSORS, "config.json": config(model_type="jamba")},
        ["run", *T, *MODEL],
        1,
        "{d}/config.json: no attention conventions for model_type 'jamba' (attn knows bert, bloom, cohere, cohere2, "
        "deepseek_v3, falcon, gemma, gemma2, gemma3, gemma3_text, gpt2, gpt_neox, gpt_oss, gptj, llama, mistral, "
        "mixtral, mpt, olmo2, phi3, qwen2, qwen3, t5; without --model, the options (--scale, --causal, --rope, "
        "--window…) still work)",
    ),
    (
        "--layer out of range",
        {**TENSORS, "config.json": config()},
        ["explain", *T, *MODEL, "--layer", "2"],
        2,
        "--layer 2 is out of range: {d}/config.json has 2 layers (give a layer from 0 to 1)",
    ),
    (
        "--model whose layers differ, no --layer",
        {**TENSORS, "config.json": config(model_type="gemma2", head_dim=8)},
        ["grad", *T, *MODEL, "--dout", "{d}/q.npy"],
        2,
        "{d}/config.json's 2 layers differ in window: give --layer N (a layer from 0 to 1)",
    ),
    (
        "--layer without --model",
        TENSORS,
        ["run", *T, "--layer", "1"],
        2,
        "--layer goes with --model (add --model config.json (or the model's folder))",
    ),
    (
        "--model config field of the wrong type",
        {**TENSORS, "config.json": config(num_attention_heads="4")},
        ["run", *T, *MODEL],
        1,
        "{d}/config.json: num_attention_heads must be a positive whole number, got '4'",
    ),
    (
        "--model unknown RoPE scaling type",
        {**TENSORS, "config.json": config(rope_scaling={"rope_type": "mrope"})},
        ["run", *T, *MODEL],
        1,
        "{d}/config.json: rope_scaling type 'mrope' is not yet supported (attn applies linear, dynamic, llama3, "
        "yarn, longrope RoPE scaling)",
    ),
    (
        "--model RoPE scaling field of the wrong type",
        {**TENSORS, "config.json": config(rope_scaling={"rope_type": "linear", "factor": "8"})},
        ["run", *T, *MODEL],
        1,
        "{d}/config.json: rope_scaling: rope scaling's factor must be a positive finite number, got '8'",
    ),
    (
        "--model head counts disagree",
        {**TENSORS, "config.json": config(hidden_size=64, num_attention_heads=8)},
        ["check", "{d}/q.npy", *T, *MODEL],
        1,
        "Q has 4 heads but {d}/config.json gives 8 (num_attention_heads) (the tensors of that model's layer, "
        "[batch, heads, seq, dim]; or another --model)",
    ),
    (
        "--model K/V head count disagrees",
        {**TENSORS, "config.json": config(num_key_value_heads=1)},
        ["run", *T, *MODEL],
        1,
        "K has 2 heads but {d}/config.json gives 1 (num_key_value_heads) (the tensors of that model's layer, "
        "[batch, heads, seq, dim]; or another --model)",
    ),
    (
        "--model head size disagrees",
        {**TENSORS, "config.json": config(hidden_size=64)},
        ["run", *T, *MODEL],
        1,
        "Q's rows have 8 features but {d}/config.json gives a head 16 wide (hidden_size/num_attention_heads) "
        "(one head's features per row; or another --model)",
    ),
    (
        "--model of gpt-oss without sinks",
        {**TENSORS, "config.json": config(model_type="gpt_oss", head_dim=8)},
        ["run", *T, *MODEL, "--layer", "1"],
        2,
        "{d}/config.json: gpt-oss adds a learned sink logit per head: give it with --sinks FILE "
        "(the model's model.layers.1.self_attn.sinks)",
    ),
    (
        "--model of T5 without its bias",
        {
            **TENSORS,
            "k.npy": npy(np.ones((1, 4, 5, 8))),
            "v.npy": npy(np.ones((1, 4, 5, 8))),
            "config.json": '{"model_type": "t5", "d_model": 32, "num_layers": 2, "num_heads": 4, "d_kv": 8}',
        },
        ["run", *T, *MODEL],
        2,
        "{d}/config.json: T5 adds a relative position bias: give it with --bias FILE (the model's position_bias, "
        "which layer 0's relative_attention_bias makes for every layer)",
    ),
    (
        "--model of a BERT with relative positions",
        {**TENSORS, "config.json": config(model_type="bert", position_embedding_type="relative_key")},
        ["run", *T, *MODEL],
        1,
        "{d}/config.json: position_embedding_type 'relative_key' is not yet supported (attn derives BERT's "
        "attention with absolute positions, which attention does not see)",
    ),
    (
        "--model names nothing",
        TENSORS,
        ["run", *T, "--model", "{d}/nothing.json"],
        1,
        "{d}/nothing.json: no such file or folder (give a model's config.json, the folder that holds it, or a "
        ".gguf file)",
    ),
    (
        "--model folder without config.json",
        TENSORS,
        ["run", *T, "--model", "{d}"],
        1,
        "{d}: not a model folder: no config.json (a model folder holds config.json, model.safetensors and "
        "vocab.txt or tokenizer.json)",
    ),
    (
        "--model config not an object",
        {**TENSORS, "config.json": "[1, 2]"},
        ["run", *T, *MODEL],
        1,
        "{d}/config.json: expected a JSON object (a model's config.json)",
    ),
    (
        "--rope-scaling of an unknown kind",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-scaling", "magic:factor=2"],
        2,
        "--rope-scaling: unknown RoPE scaling 'magic' (use linear, dynamic, llama3, yarn or longrope "
        "(e.g. yarn:factor=32,original_max_position_embeddings=4096))",
    ),
    (
        "--rope-scaling field unknown",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-scaling", "linear:factr=2"],
        2,
        "--rope-scaling: linear RoPE scaling has no field 'factr' (it takes factor)",
    ),
    (
        "--rope-scaling field missing",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-scaling", "yarn:factor=2"],
        2,
        "--rope-scaling: yarn rope scaling needs original_max_position_embeddings (the context length the model "
        "was trained at, e.g. 8192 for Llama 3.1)",
    ),
    (
        "--rope-scaling value not a number",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-scaling", "linear:factor=x"],
        2,
        "--rope-scaling: factor='x' is not a number (fields take numbers, true/false, or a list such as [1,1.5])",
    ),
    (
        "--rope-scaling without FIELD=VALUE",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-scaling", "linear:factor"],
        2,
        "--rope-scaling: expected FIELD=VALUE, got 'factor' "
        "(e.g. yarn:factor=32,original_max_position_embeddings=4096)",
    ),
    (
        "--rope-scaling JSON not an object",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-scaling", "{{factor"],
        2,
        "--rope-scaling: not a JSON object (give config.json's rope_scaling object, or "
        "e.g. yarn:factor=32,original_max_position_embeddings=4096)",
    ),
    (
        "--rope-scaling JSON with rope_theta",
        {},
        ["run", *QKV, "--rope", "neox", "--rope-scaling", '{{"rope_type": "linear", "factor": 2, "rope_theta": 5}}'],
        2,
        "--rope-scaling: rope_theta is not a field of RoPE scaling (give it as --rope-theta)",
    ),
    (
        "--rope-scaling without --rope",
        {},
        ["run", *QKV, "--rope-scaling", "linear:factor=2"],
        2,
        "--rope-scaling goes with --rope (add --rope neox or --rope gptj)",
    ),
    (
        "--rope-features without --rope",
        {},
        ["run", *QKV, "--rope-features", "last"],
        2,
        "--rope-features goes with --rope (add --rope neox or --rope gptj)",
    ),
    (
        "bundle rope_scaling of an unknown kind",
        {"b.yaml": "q: [[1, 0]]\nk: [[1, 0]]\nv: [[1]]\nrope: neox\nrope_scaling: {rope_type: magic}\n"},
        ["run", "{d}/b.yaml"],
        1,
        "{d}/b.yaml:5: rope_scaling: unknown RoPE scaling 'magic' (use linear, dynamic, llama3, yarn or longrope "
        "(e.g. yarn:factor=32,original_max_position_embeddings=4096))",
    ),
    (
        "convert a folder",
        {"m/config.json": "{}"},
        ["convert", "{d}/m", "{d}/out"],
        2,
        "{d}/m is a folder: convert reads a .gguf file (a Hugging Face folder needs no converting)",
    ),
    (
        "convert a file that does not exist",
        {},
        ["convert", "{d}/m.gguf", "{d}/out"],
        1,
        "{d}/m.gguf: no such file",
    ),
    (
        "convert a file that is not a GGUF",
        {"m.gguf": "not a gguf"},
        ["convert", "{d}/m.gguf", "{d}/out"],
        1,
        "{d}/m.gguf: is not a GGUF file (it does not start with GGUF)",
    ),
    (
        "convert into a folder that holds anything",
        {"m.gguf": b"GGUF\x03\x00\x00\x00" + bytes(16), "out/notes.txt": "mine"},
        ["convert", "{d}/m.gguf", "{d}/out"],
        2,
        "{d}/out: DIR is a folder that is not empty (attn writes a new folder and never over files: give a new "
        "name, or an empty folder)",
    ),
    (
        "convert into a file",
        {"m.gguf": b"GGUF\x03\x00\x00\x00" + bytes(16), "out": "mine"},
        ["convert", "{d}/m.gguf", "{d}/out"],
        2,
        "{d}/out: DIR is a file, not a folder (give the name of a new folder)",
    ),
    (
        "convert into a folder whose parent does not exist",
        {"m.gguf": b"GGUF\x03\x00\x00\x00" + bytes(16)},
        ["convert", "{d}/m.gguf", "{d}/no/out"],
        1,
        "{d}/no/out: cannot write: no such directory",
    ),
    (
        "convert into the GGUF itself",
        {"m.gguf": b"GGUF\x03\x00\x00\x00" + bytes(16)},
        ["convert", "{d}/m.gguf", "{d}/m.gguf"],
        2,
        "{d}/m.gguf: DIR names an input of this run (attn never writes over its inputs: give a new folder)",
    ),
    (
        "convert into no name",
        {"m.gguf": b"GGUF\x03\x00\x00\x00" + bytes(16)},
        ["convert", "{d}/m.gguf", ""],
        2,
        "DIR needs a folder name, not ''",
    ),
    (
        "convert as csv",
        {"m.gguf": b"GGUF\x03\x00\x00\x00" + bytes(16)},
        ["convert", "{d}/m.gguf", "{d}/out", "-f", "csv"],
        2,
        "--format csv: this command writes table or json",
    ),
]


@pytest.mark.parametrize("row", CATALOGUE, ids=[row[0] for row in CATALOGUE])
def test_catalogue(attn, samples, tmp_path, row):
    _, files, args, code, message, *rest = row
    stdin, env = (rest + [None, None])[:2]
    for name, content in files.items():
        path = tmp_path / name
        if isinstance(content, TinyModel):
            content.write(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)  # "out/notes.txt": a folder holding a file
            path.write_bytes(content.encode() if isinstance(content, str) else content)
    fill = {"d": str(tmp_path), "s": str(samples)}
    line = attn.fails(*(a.format(**fill) for a in args), code=code, input=stdin, env=env)
    expected = message.replace("{d}", fill["d"]).replace("{s}", fill["s"])
    if expected.endswith("…"):
        assert line.startswith(expected[:-1]), line
    else:
        assert line == expected


def test_catalogue_covers_every_command(attn):
    from typer.main import get_command

    from attncli.cli import app

    covered = {row[2][0] for row in CATALOGUE}
    assert set(get_command(app).commands) <= covered
