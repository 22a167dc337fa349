"""The C-speed CSV/TSV path gives exactly the arrays, labels and error
messages of the cell-by-cell reader, and steps aside whenever it cannot."""

import numpy as np
import pytest

from attncli.errors import AttnError
from attncli.readers import read_matrix
from attncli.readers.base import Request, decode_text
from attncli.readers.text import read_delimited, read_delimited_fast

CLEAN = [
    b"1,2,3\n4,5,6\n",
    b"1,2,3\r\n4,5,6\r\n",
    b"\xef\xbb\xbfa,b\n1,2\n",
    b"x, y ,z\n 1 , 2,3 \n4,5,6\n\n\n",
    b"1\n2\n3",
    b"1e5,-2.5E-3,+.5,7.\n0,-0,1e-400,3\n",
    b"0,1,2\n0.5,1,2\n3,4,5\n",  # pandas' names for unnamed columns over floats: a header, with a choice
    b"0,1\n1,0\n0,1\n",  # 0,1 over whole numbers: data, with a choice
    b"0,1\n1e3,0\n",
]
FALLBACK = [  # awkward inputs: the same result either way, errors from the slow path
    b"1,2\n3\n",
    b"1,,2\n",
    b"1,2\n\n3,4\n",
    b"nan,1\n",
    b"inf,1\n",
    b"1e400,1\n",
    b"1,2e\n",
    b"0x10,1\n",
    b"1_0,2\n",
    b"1,2\r3,4\n",
    b"1,2\r,3\n",
    b'"a,b",c\n1,2\n',
    b"a,b\n",
    b"a,1\nb,2\n",
    b",a,b\nx,1,2\n",
    b"a,b,c\n1,2\n",
    b"a,,c\n1,2,3\n",
    b"# c\n1,2\n",
    b"1 2,3\n",
    b"\n\n",
    b"- ,1\n",
    b"1,2\n3,4,\n",
    b"a\n1\nx\n",
    b"1\t2\n",
    b"1\t\t2\n",
    b"1\t,2\n",
    b" 1 , 2 \n3,4",
    b"1,2\n3,4,",
]


def slow(data, source, fmt, mask=False):
    return read_delimited(decode_text(data, source), source, fmt, Request(mask=mask))


def outcome(read):
    try:
        m = read()
    except AttnError as e:
        return "error", str(e)
    return m.values.dtype, m.values.tolist(), m.row_labels, m.col_labels, m.choices


@pytest.mark.parametrize("data", CLEAN)
def test_clean_input_takes_the_fast_path_and_agrees(data):
    assert read_delimited_fast(data, "csv") is not None
    assert outcome(lambda: read_matrix(data, "x.csv")) == outcome(lambda: slow(data, "x.csv", "csv"))


@pytest.mark.parametrize("data", FALLBACK)
@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_awkward_input_gives_the_same_result(data, fmt):
    if fmt == "tsv":
        data = data.replace(b",", b"\t")
    source = f"x.{fmt}"
    expected = outcome(lambda: slow(data, source, fmt))
    assert outcome(lambda: read_matrix(data, source)) == expected
    if expected[0] == "error":  # errors always come from the cell-by-cell reader
        assert read_delimited_fast(data, fmt) is None


def test_tsv_with_commas_is_left_to_the_slow_path():
    assert read_delimited_fast(b"1,5\t2\n", "tsv") is None


def test_masks_read_the_same():
    data = b"1,0,1\n0,0,1\n"
    assert outcome(lambda: read_matrix(data, "m.csv", mask=True)) == outcome(lambda: slow(data, "m.csv", "csv", True))


def test_random_numbers_round_trip_exactly():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((300, 7)) * 10.0 ** rng.integers(-30, 30, (300, 7))
    for text in (values.astype(str), values.astype(np.float32).astype(str)):
        data = "\n".join(",".join(row) for row in text).encode()
        fast = read_delimited_fast(data, "csv").values
        assert np.array_equal(fast, slow(data, "x.csv", "csv").values)
