"""``attn run`` end to end: samples, formats, pipes and every error path."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest

from attncli.cli import app


def test_colors_sample_reproduces_seed_003(attn, samples):
    out = attn.json("run", samples / "colors.yaml")
    assert np.round(out["weights"], 3).tolist() == [[0.150, 0.128, 0.114, 0.096, 0.158, 0.140, 0.121, 0.093]]
    assert np.round(out["output"], 3).tolist() == [[0.488, 0.512]]
    assert out["queries"] == ["#8517dc"]
    assert out["keys"][:2] == ["#fef0d9", "#fdcc8a"]
    assert out["columns"] == ["warm", "cool"]
    assert out["scale"] == pytest.approx(1 / np.sqrt(3))


def test_three_files_footnote_example(attn, samples):
    out = attn.json("run", samples / "q.csv", samples / "k.csv", samples / "v.csv")
    expected = np.exp(np.array([-3, 0, 3]) / np.sqrt(3))
    expected /= expected.sum()
    np.testing.assert_allclose(out["weights"], [expected], rtol=1e-12)
    np.testing.assert_allclose(out["output"], [[expected @ [10, 5, 2]]], rtol=1e-12)
    assert out["queries"] == ["fruit"] and out["keys"] == ["apple", "banana", "chair"]
    assert out["shapes"] == {"q": [1, 3], "k": [3, 3], "v": [3, 1]}


def test_stdin_for_any_one_input(attn, samples):
    q = (samples / "q.csv").read_text()
    piped = attn.json("run", "-", samples / "k.csv", samples / "v.csv", input=q)
    direct = attn.json("run", samples / "q.csv", samples / "k.csv", samples / "v.csv")
    assert piped == direct
    bundle = attn.json("run", "-", input=(samples / "colors.yaml").read_text())
    assert bundle["columns"] == ["warm", "cool"]


def test_default_labels_and_json_fields(attn, tmp_path):
    for name in "qkv":
        (tmp_path / f"{name}.csv").write_text("1,0\n0,1\n")
    out = attn.json("run", *(tmp_path / f"{n}.csv" for n in "qkv"))
    assert out["queries"] == ["q0", "q1"] and out["keys"] == ["k0", "k1"] and out["columns"] == ["d0", "d1"]
    assert set(out) >= {"queries", "keys", "weights", "output", "scale", "temperature", "similarity", "causal"}


def test_npy_round_trip_keeps_float32(attn, tmp_path):
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=s).astype(np.float32) for s in ((3, 4), (5, 4), (5, 2)))
    for name, m in zip("qkv", (q, k, v)):
        np.save(tmp_path / f"{name}.npy", m)
    files = [tmp_path / f"{n}.npy" for n in "qkv"]
    for emit, expected_shape in (("output", (3, 2)), ("weights", (3, 5))):
        result = attn("run", *files, "--format", "npy", "--emit", emit)
        assert result.exit_code == 0, result.output
        array = np.load(io.BytesIO(result.stdout_bytes))
        assert array.dtype == np.float32 and array.shape == expected_shape
    from attncli import attention

    out, _ = attention(q, k, v)
    result = attn("run", *files, "-f", "npy")
    np.testing.assert_array_equal(np.load(io.BytesIO(result.stdout_bytes)), out)


def test_csv_output_reads_back_with_labels(attn, samples, tmp_path):
    result = attn("run", samples / "q.csv", samples / "k.csv", samples / "v.csv", "-f", "csv", "--emit", "weights")
    assert result.stdout.splitlines()[0] == ",apple,banana,chair"
    from attncli.readers import read_matrix

    m = read_matrix(result.stdout_bytes, "w.csv")
    assert m.row_labels == ["fruit"] and m.col_labels == ["apple", "banana", "chair"]
    assert m.values.sum() == pytest.approx(1.0)


def test_tsv_output_of_unlabelled_data_is_plain(attn, tmp_path):
    for name in "qkv":
        (tmp_path / f"{name}.csv").write_text("1,0\n0,1\n")
    result = attn("run", *(tmp_path / f"{n}.csv" for n in "qkv"), "-f", "tsv")
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(rows) == 2 and all(len(r) == 2 for r in rows)
    np.testing.assert_allclose(np.array(rows, dtype=float).sum(axis=1), 1.0)


def test_table_view_shows_labels_header_and_outputs(attn, samples):
    result = attn("run", samples / "colors.yaml", "--format", "table")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "Q 1×3 · K 8×3 · V 8×2 → output 1×2" in text
    assert "scale 1/√3 = 0.5774" in text
    for label in ("#8517dc", "#fef0d9", "#02818a", "warm", "cool", "0.150", "0.488", "0.512"):
        assert label in text
    assert "\x1b[" not in text  # nothing coloured into a pipe


def test_table_precision_and_masked_cells(attn, samples):
    result = attn("run", samples / "q.csv", samples / "k.csv", samples / "v.csv",
                  "-f", "table", "--causal", "--precision", "5")
    assert "1.00000" in result.stdout and "–" in result.stdout
    assert "causal (top-left) · 2 of 3 pairs masked" in result.stdout


def test_options_reach_the_maths(attn, samples):
    files = [samples / "q.csv", samples / "k.csv", samples / "v.csv"]
    out = attn.json("run", *files, "--scale", "0.5", "--temperature", "2")
    expected = np.exp(np.array([-3, 0, 3]) * 0.25)
    np.testing.assert_allclose(out["weights"], [expected / expected.sum()])
    assert out["scale"] == 0.5 and out["temperature"] == 2
    cos = attn.json("run", *files, "--similarity", "cosine")
    assert cos["scale"] == 1.0 and cos["similarity"] == "cosine"


def test_mask_file_and_bundle_mask(attn, samples, tmp_path):
    files = [samples / "q.csv", samples / "k.csv", samples / "v.csv"]
    (tmp_path / "m.csv").write_text("1,0,1\n")
    out = attn.json("run", *files, "--mask", tmp_path / "m.csv")
    assert out["weights"][0][1] == 0
    (tmp_path / "add.csv").write_text("0,-inf,0\n")
    assert attn.json("run", *files, "--mask", tmp_path / "add.csv")["weights"] == out["weights"]
    (tmp_path / "b.yaml").write_text("q: [[1, 0]]\nk: [[1, 0], [0, 1]]\nv: [[1], [2]]\nmask: [[false, true]]\n")
    assert attn.json("run", tmp_path / "b.yaml")["output"] == [[2.0]]


def test_causal_alignment(attn, tmp_path):
    (tmp_path / "q.csv").write_text("1,0\n")
    (tmp_path / "k.csv").write_text("1,0\n0,1\n")
    (tmp_path / "v.csv").write_text("1\n2\n")
    files = [tmp_path / f"{n}.csv" for n in "qkv"]
    assert attn.json("run", *files, "--causal")["output"] == [[1.0]]
    assert attn.json("run", *files, "--causal-align", "bottom-right")["causal"] == "bottom-right"
    assert attn.json("run", *files, "--causal-align", "bottom-right")["output"][0][0] > 1


def test_fully_masked_row_is_zero_in_json(attn, tmp_path):
    (tmp_path / "b.json").write_text('{"q": [[1], [2]], "k": [[1], [1]], "v": [[3], [4]], "mask": [[0, 0], [1, 1]]}')
    out = attn.json("run", tmp_path / "b.json")
    assert out["weights"][0] == [0, 0] and out["output"][0] == [0]


# ---------------------------------------------------------------- errors


def test_missing_directory_and_empty_files(attn, samples, tmp_path):
    k, v = samples / "k.csv", samples / "v.csv"
    assert attn.fails("run", tmp_path / "nope.csv", k, v) == f"{tmp_path}/nope.csv: no such file"
    assert attn.fails("run", tmp_path, k, v) == f"{tmp_path}: is a directory, expected a file"
    (tmp_path / "e.csv").write_text("")
    assert attn.fails("run", tmp_path / "e.csv", k, v) == \
        f"{tmp_path}/e.csv: the file is empty (expected rows of numbers)"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(attn, tmp_path):  # pragma: no cover - CI runs as root
    f = tmp_path / "secret.csv"
    f.write_text("1\n")
    f.chmod(0)
    assert attn.fails("run", f, f, f) == f"{f}: permission denied"


def test_ragged_and_non_numeric_with_line_numbers(attn, samples, tmp_path):
    k, v = samples / "k.csv", samples / "v.csv"
    (tmp_path / "q.csv").write_text("1,2,3\n4,5\n")
    assert attn.fails("run", tmp_path / "q.csv", k, v).startswith(f"{tmp_path}/q.csv:2: row has 2 values")
    (tmp_path / "q.csv").write_text("1,2,3\n4,five,6\n")
    assert attn.fails("run", tmp_path / "q.csv", k, v) == f"{tmp_path}/q.csv:2: column 2: 'five' is not a number"
    (tmp_path / "q.csv").write_text("1,2,3\n4,NaN,6\n")
    assert attn.fails("run", tmp_path / "q.csv", k, v) == \
        f"{tmp_path}/q.csv:2: column 2: nan is not a finite number"


def test_stdin_errors_are_named_stdin(attn, samples):
    assert attn.fails("run", "-", samples / "k.csv", samples / "v.csv", input="1,x\n") == \
        "<stdin>:1: column 2: 'x' is not a number"


def test_dimension_mismatches_name_both_shapes(attn, samples, tmp_path):
    (tmp_path / "q.csv").write_text("1,2\n")
    assert attn.fails("run", tmp_path / "q.csv", samples / "k.csv", samples / "v.csv") == \
        "Q is 1×2 but K is 3×3 (Q and K need the same number of columns, d_k)"
    (tmp_path / "v.csv").write_text("1\n2\n")
    assert attn.fails("run", samples / "q.csv", samples / "k.csv", tmp_path / "v.csv") == \
        "K is 3×3 but V is 2×1 (K and V need the same number of rows: one value per key)"


def test_wrong_shaped_mask(attn, samples, tmp_path):
    (tmp_path / "m.csv").write_text("1,0\n")
    assert attn.fails("run", samples / "q.csv", samples / "k.csv", samples / "v.csv", "--mask", tmp_path / "m.csv") \
        == "the mask is 1×2 but the weights are 1×3 (queries × keys) (give a 1×3 mask, or 1×3 for every query)"


def test_npy_errors_through_the_cli(attn, samples, tmp_path):
    np.save(tmp_path / "obj.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    np.save(tmp_path / "c.npy", np.ones((1, 3), complex))
    np.save(tmp_path / "cube.npy", np.ones((1, 3, 1)))
    k, v = samples / "k.csv", samples / "v.csv"
    assert "holds Python objects (pickled data)" in attn.fails("run", tmp_path / "obj.npy", k, v)
    assert "holds complex128 data" in attn.fails("run", tmp_path / "c.npy", k, v)
    assert "is 3-D (1×3×1)" in attn.fails("run", tmp_path / "cube.npy", k, v)
    (tmp_path / "t.npy").write_bytes((tmp_path / "cube.npy").read_bytes()[:-4])
    assert "is truncated or damaged" in attn.fails("run", tmp_path / "t.npy", k, v)


def test_yaml_errors_through_the_cli(attn, tmp_path):
    (tmp_path / "b.yaml").write_text("q: [[1, 2]]\nk: [[1, yes]]\nv: [[1]]\n")
    assert attn.fails("run", tmp_path / "b.yaml") == \
        f"{tmp_path}/b.yaml:2: k: row 1, column 2: 'yes' is not a number (YAML reads it as true/false)"
    (tmp_path / "b.yaml").write_text("q: !!python/object/apply:os.system ['echo pwned']\n")
    assert "is not allowed" in attn.fails("run", tmp_path / "b.yaml")


def test_bundle_entries(attn, tmp_path):
    (tmp_path / "b.yaml").write_text("q: [[1]]\nk: [[1]]\n")
    assert attn.fails("run", tmp_path / "b.yaml") == \
        f"{tmp_path}/b.yaml: the bundle has no v (a bundle holds q, k and v, and optionally mask)"
    (tmp_path / "b.yaml").write_text("q: [[1]]\nk: [[1]]\nv: [[1]]\nw: [[1]]\n")
    assert attn.fails("run", tmp_path / "b.yaml") == \
        f"{tmp_path}/b.yaml: the bundle has an unexpected entry 'w' (a bundle holds q, k and v, and optionally mask)"
    (tmp_path / "q.csv").write_text("1\n")
    assert attn.fails("run", tmp_path / "q.csv").startswith(f"{tmp_path}/q.csv: a CSV file holds one matrix")


@pytest.mark.parametrize("args, message", [
    (["run", "a", "b"], "expected one bundle file or three files Q K V, got 2"),
    (["run", "-", "-", "x"], "stdin ('-') is named more than once, but can be read only once "
                             "(save all but one input to a file)"),
])
def test_our_usage_errors_exit_2(attn, args, message):
    assert attn.fails(*args, code=2) == message


@pytest.mark.parametrize("args, start", [
    (["run", "--format", "xml", "a"], "Invalid value for '--format' / '-f': 'xml' is not one of"),
    (["run"], "Missing argument 'FILE...'"),
    (["run", "a", "--precision", "-1"], "Invalid value for '--precision' / '-p'"),
    (["frobnicate"], "No such command 'frobnicate'"),
])
def test_click_usage_errors_are_one_line_and_exit_2(attn, args, start):
    message = attn.fails(*args, code=2)
    assert message.startswith(start) and message.endswith("--help')")


def test_stdin_named_by_mask_and_file(attn):
    assert "stdin ('-') is named more than once" in attn.fails("run", "-", "k", "v", "--mask", "-", code=2)


@pytest.mark.parametrize("option", ["--scale", "--temperature"])
@pytest.mark.parametrize("value", ["0", "-2", "nan", "inf"])
def test_bad_scale_or_temperature_exit_2(attn, samples, option, value):
    message = attn.fails("run", samples / "colors.yaml", option, value, code=2)
    assert message.startswith(f"{option[2:]} must be a positive finite number")


def test_npy_to_a_terminal_is_refused(attn, samples, monkeypatch):
    from attncli.commands import common

    monkeypatch.setattr(common, "is_terminal", lambda: True)
    result = attn("run", samples / "colors.yaml", "-f", "npy")
    assert result.exit_code == 2
    assert "refusing to write binary NPY to a terminal (redirect it: > out.npy)" in result.stderr


def test_every_command_has_help_with_examples(attn):
    from typer.main import get_command

    commands = get_command(app).commands
    assert "run" in commands
    for name in commands:
        result = attn(name, "--help")
        assert result.exit_code == 0, result.output
        assert "Examples" in result.stdout, f"attn {name} --help has no examples"
        assert commands[name].help, f"attn {name} has no help text"


def test_no_arguments_shows_help(attn):
    result = attn()
    assert result.exit_code == 0 and "Usage" in result.stdout


def test_version(attn):
    from attncli import __version__

    assert attn("--version").stdout.strip() == f"attn {__version__}"


def test_module_entry_point_and_closed_pipe(samples, tmp_path):
    """`python -m attncli ... | head -1` ends quietly, with no traceback."""
    rng = np.random.default_rng(0)
    big = tmp_path / "b.npz"
    np.savez(big, q=rng.normal(size=(3000, 8)), k=rng.normal(size=(50, 8)), v=rng.normal(size=(50, 8)))
    proc = subprocess.run(
        f"{sys.executable} -m attncli run {big} -f csv | head -1",
        shell=True, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0
    assert proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 1


def test_ctrl_c_ends_quietly_with_130(samples):
    """Ctrl-C while attn waits for stdin: no traceback, exit code 130."""
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "attncli", "run", "-", str(samples / "k.csv"), str(samples / "v.csv")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    time.sleep(1.0)  # let it start and block on stdin
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in stderr
