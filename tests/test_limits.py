"""Limits on text inputs: stated defaults, a clear error past them, and an
environment variable to raise each for one command."""

import numpy as np
import pytest

from attncli.errors import AttnError, UsageError
from attncli.readers import read_bundle, read_matrix
from attncli.readers.limits import ELEMENTS, LINE, TREE_NODES


def refused(data: bytes, source: str) -> str:
    with pytest.raises(AttnError) as e:
        read_matrix(data, source)
    return str(e.value)


def test_defaults_are_stated():
    assert (ELEMENTS.default, TREE_NODES.default, LINE.default) == (100_000_000, 10_000_000, 10_000_000)


def test_elements_limit_and_raising_it(monkeypatch):
    data = b"1,2,3\n4,5,6\n"  # 6 numbers: 4 separators + 2 newlines + 1 (an upper bound: 7)
    monkeypatch.setenv("ATTN_MAX_ELEMENTS", "5")
    assert (
        refused(data, "a.csv")
        == "a.csv: has about 7 values, more than the limit of 5 (set ATTN_MAX_ELEMENTS to raise it)"
    )
    monkeypatch.setenv("ATTN_MAX_ELEMENTS", "1_000")
    assert read_matrix(data, "a.csv").values.shape == (2, 3)


def test_elements_limit_for_json_and_yaml_is_an_estimate(monkeypatch):
    monkeypatch.setenv("ATTN_MAX_ELEMENTS", "3")
    assert (
        refused(b"[[1, 2, 3, 4]]", "a.json")
        == "a.json: has about 4 values, more than the limit of 3 (set ATTN_MAX_ELEMENTS to raise it)"
    )


def test_yaml_node_limit(monkeypatch):
    monkeypatch.setenv("ATTN_MAX_YAML_NODES", "20")
    with pytest.raises(AttnError, match="expands to more than 20 elements .*set ATTN_MAX_YAML_NODES"):
        read_bundle(b"a: &a [1, 2, 3, 4, 5]\nb: [*a, *a, *a, *a, *a]\n", "b.yaml")
    assert read_bundle(b"a: [1, 2]\n", "b.yaml").matrices["a"].values.tolist() == [[1, 2]]


def test_line_limit(monkeypatch):
    monkeypatch.setenv("ATTN_MAX_LINE", "12")
    assert (
        refused(b"1,2\n" + b"3," * 10 + b"4\n", "a.csv")
        == "a.csv:2: has 21 characters in one line, more than the limit of 12 (set ATTN_MAX_LINE to raise it)"
    )
    assert read_matrix(b"1,2\n3,4\n5,6\n7,8\n", "a.csv").values.shape == (4, 2)


def test_a_long_label_within_the_line_limit_is_read():
    label = "x" * 200_000  # longer than Python's csv default cell limit of 131,072
    m = read_matrix(f'"{label}",1\n'.encode(), "a.csv")
    assert m.row_labels == [label]


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_bad_limit_setting_is_a_usage_error(monkeypatch, value):
    monkeypatch.setenv("ATTN_MAX_ELEMENTS", value)
    with pytest.raises(UsageError, match=f"ATTN_MAX_ELEMENTS='{value}' is not a positive whole number"):
        read_matrix(b"1\n", "a.csv")


def test_binary_inputs_are_not_limited(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTN_MAX_ELEMENTS", "1")
    import io

    buffer = io.BytesIO()
    np.save(buffer, np.ones((3, 3)))
    assert read_matrix(buffer.getvalue(), "a.npy").values.shape == (3, 3)


def test_limit_through_the_cli(attn, samples, tmp_path):
    result = attn("run", samples / "q.csv", samples / "k.csv", samples / "v.csv", env={"ATTN_MAX_ELEMENTS": "4"})
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"attn: error: {samples}/q.csv: has about 11 values, "  # a quick estimate: the comment line counts
        "more than the limit of 4 (set ATTN_MAX_ELEMENTS to raise it)"
    )
