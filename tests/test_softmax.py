"""``attn softmax``: seed 000's numbers, negative arguments, stdin and errors."""

import re

import numpy as np
import pytest


def test_seed_000(attn):
    out = attn.json("softmax", "4.0", "-1.0", "2.1")
    assert np.round(out["weights"], 4).tolist() == [0.8648, 0.0058, 0.1294]
    assert out["input"] == [4.0, -1.0, 2.1] and out["temperature"] == 1


def test_stdin_and_the_extreme_example(attn):
    out = attn.json("softmax", "-", input="30 20 10\n")
    np.testing.assert_allclose(out["weights"], [9.99954600e-01, 4.53978686e-05, 2.06106005e-09], rtol=1e-6)
    assert attn.json("softmax", "-", input="30, 20\n10")["weights"] == out["weights"]
    assert attn.json("softmax", "-", input="30,20,10\n")["weights"] == out["weights"]


@pytest.mark.parametrize(
    "args",
    [
        ["-1", "-2", "-3"],
        ["-1,-2,-3"],
        ["--", "-1", "-2", "-3"],
        ["-1", "-t", "1", "-2", "-3"],
        ["-p", "2", "-1", "-2", "-3"],
        ["-1e0", "-.2e1", "-3."],
    ],
)
def test_negative_numbers_are_arguments_not_options(attn, args):
    out = attn.json("softmax", *args)
    assert out["input"] == [-1, -2, -3]


def test_temperature_and_stability(attn):
    out = attn.json("softmax", "3", "2", "1", "--temperature", "10")
    x = np.array([3, 2, 1]) / 10
    np.testing.assert_allclose(out["weights"], np.exp(x) / np.exp(x).sum())
    assert out["temperature"] == 10
    big = attn.json("softmax", "1000", "1001")  # e^1001 overflows; the stable form does not
    np.testing.assert_allclose(big["weights"], [1 / (1 + np.e), np.e / (1 + np.e)])


def test_minus_infinity_gets_weight_zero(attn):
    out = attn.json("softmax", "-inf", "0")
    assert out == {"input": [None, 0.0], "temperature": 1.0, "weights": [0.0, 1.0]}


def test_table_shows_each_step(attn):
    result = attn("softmax", "4.0", "-1.0", "2.1", "-f", "table")
    assert result.exit_code == 0, result.output
    text = result.stdout
    for part in (
        "softmax of 3 numbers",
        "e^(x − 4)",
        "0.8648",
        "0.0058",
        "0.1294",
        "-1.0000",
        "weight = e^(x − max) / Σ e^(x − max), max = 4 (the largest x)",
        "Σ e^(x − 4) = 1.1563; the weights sum to 1.0000.",
    ):
        assert part in text, part
    text = attn("softmax", "2", "4", "-t", "2", "-f", "table").stdout
    assert "x/2" in text and "e^(x/2 − 2)" in text and "temperature 2" in text


def test_near_one_is_not_written_as_one(attn):
    """Seed 000's point: softmax([30, 20, 10]) puts 0.99995 on the first, not 1."""
    text = attn("softmax", "30", "20", "10", "-f", "table").stdout
    assert "0.99995" in text and "4.5398e-05" in text and "2.0611e-09" in text
    assert not re.search(r"│\s+1\.0000\s*$", text, re.M)  # no weight column reads 1.0000
    assert "Σ e^(x − 30) = 1.00005; the weights sum to 1.0000." in text
    assert "│   1.0000" in attn("softmax", "0", "-inf", "-f", "table").stdout  # exactly 1 stays 1.0000


def test_formulas_follow_the_temperature(attn):
    text = attn("softmax", "30", "20", "10", "-t", "10", "-f", "table").stdout
    assert "weight = e^(x/10 − max) / Σ e^(x/10 − max), max = 3 (the largest x/10)" in text
    assert "e^(x/10 − 3)" in text and "Σ e^(x/10 − 3) = 1.5032" in text
    assert "e^(x − max)" not in text


def test_csv_writes_the_weights(attn):
    assert attn("softmax", "0", "0", "-f", "csv").stdout == "0.5,0.5\n"


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "no numbers given (attn softmax 4.0 -1.0 2.1, or '-' to read them from stdin)"),
        (["1", "x"], "'x' is not a number"),
        (["1", "nan"], "nan is not allowed (-inf is fine, it gets weight 0; NaN and +inf are not)"),
        (["inf", "1"], "inf is not allowed (-inf is fine, it gets weight 0; NaN and +inf are not)"),
        ([","], "no numbers given (attn softmax 4.0 -1.0 2.1)"),
        (["-", "1"], "give numbers or '-' (stdin), not both"),
        (["1", "-t", "0"], "temperature must be a positive finite number, got 0.0"),
        (["1", "-t", "-2"], "temperature must be a positive finite number, got -2.0"),
    ],
)
def test_usage_errors_exit_2(attn, args, message):
    assert attn.fails("softmax", *args, code=2) == message


def test_click_errors_stay_one_line(attn):
    assert attn.fails("softmax", "1", "--bogus", code=2) == "No such option: --bogus (see 'attn softmax --help')"
    assert attn.fails("softmax", "1", "-t", code=2).startswith("Option '-t' requires an argument")


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "<stdin>: no numbers (expected numbers separated by spaces or commas)"),
        ("1 2\n3 four\n", "<stdin>:2: 'four' is not a number"),
        ("1\nnan\n", "<stdin>:2: nan is not allowed (-inf is fine, it gets weight 0; NaN and +inf are not)"),
    ],
)
def test_bad_stdin_exits_1(attn, text, message):
    assert attn.fails("softmax", "-", input=text) == message


def test_numbers_that_read_one_way_only(attn):
    # one word with commas is a list, and so is "30, 20, 10"; U+2212 is a minus
    assert attn.json("softmax", "3,2,1")["input"] == [3, 2, 1]
    assert attn.json("softmax", "30,", "20,", "10")["input"] == [30, 20, 10]
    assert attn.json("softmax", "\u22121", "2")["input"] == [-1, 2]
    assert attn.json("softmax", "1,2,3", "4,5,6")["input"] == [1, 2, 3, 4, 5, 6]  # no word is a decimal comma
