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
    for name, m in zip("qkv", (q, k, v), strict=True):
        np.save(tmp_path / f"{name}.npy", m)
    files = [tmp_path / f"{n}.npy" for n in "qkv"]
    for emit, expected_shape in (("output", (3, 2)), ("weights", (3, 5))):
        result = attn("run", *files, "--format", "npy", "--emit", emit)
        assert result.exit_code == 0, result.output
        array = np.load(io.BytesIO(result.stdout_bytes))
        assert array.dtype == np.float32 and array.shape == expected_shape
    from attncli import attention

    out, _ = attention(q, k, v, need_weights=False)  # -f npy writes the output alone: the blocked kernel
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
    result = attn(
        "run", samples / "q.csv", samples / "k.csv", samples / "v.csv", "-f", "table", "--causal", "--precision", "5"
    )
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
    assert attn.json("run", *files, "--bias", tmp_path / "add.csv")["weights"] == out["weights"]
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
    out, notes = attn.json_and_notes("run", tmp_path / "b.json")
    assert out["weights"][0] == [0, 0] and out["output"][0] == [0]
    assert notes == ["query q0 may attend to no key (the mask forbids every key): its weights and output are 0"]
    view = attn("run", tmp_path / "b.json", "-f", "table").stdout
    assert "each row sums to 1, or 0 where no key may be attended to" in view


# ---------------------------------------------------------------- errors


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(attn, tmp_path):  # pragma: no cover - CI runs as root
    f = tmp_path / "secret.csv"
    f.write_text("1\n")
    f.chmod(0)
    assert attn.fails("run", f, f, f) == f"{f}: permission denied"


def test_npy_to_a_terminal_is_refused(attn, samples, monkeypatch):
    from attncli.cli import emit as common

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
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 1


def _wait_until_blocked(pid: int, timeout: float = 60.0) -> None:
    """Until the process sleeps and has used no CPU for half a second (a fixed sleep
    fails on a loaded machine, where start-up alone can take longer); where /proc is
    not there, one second."""
    import time
    from pathlib import Path

    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        time.sleep(1.0)
        return
    last, quiet, deadline = None, 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command's name
        state, cpu = fields[0], int(fields[11]) + int(fields[12])  # utime + stime
        quiet = quiet + 1 if state == "S" and cpu == last else 0
        if quiet >= 5:
            return
        last = cpu
        time.sleep(0.1)
    raise AssertionError("attn did not settle to wait on stdin")


def test_ctrl_c_ends_quietly_with_130(samples):
    """Ctrl-C while attn waits for stdin: no traceback, exit code 130."""
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "attncli", "run", "-", str(samples / "k.csv"), str(samples / "v.csv")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_until_blocked(proc.pid)  # started, and waiting on stdin
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "Traceback" not in stderr


def test_a_bug_is_one_line_and_exit_70(attn, samples, monkeypatch):
    """An unexpected exception is attn's fault: one line, exit 70; ATTN_DEBUG=1 re-raises."""
    from attncli.cli import attend

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(attend, "every_step", broken)
    assert (
        attn.fails("run", samples / "colors.yaml", code=70)
        == "internal error: KeyError: 'boom' (a bug in attn: ATTN_DEBUG=1 shows where; please report it)"
    )
    result = attn("run", samples / "colors.yaml", env={"ATTN_DEBUG": "1"})
    assert isinstance(result.exception, KeyError)


def test_byte_string_labels_read_as_text_everywhere(attn, tmp_path):
    """An NPZ bundle whose labels are byte strings (dtype S, as h5py and older
    numpy code write them): JSON, CSV headers and tables show 'apple', never
    "b'apple'"."""
    np.savez(
        tmp_path / "b.npz",
        q=np.eye(2),
        k=np.eye(2),
        v=np.eye(2),
        q_labels=np.array([b"apple", b"p\xc3\xa9ar"]),
        k_labels=np.array([b"fruit", b"tree"]),
        v_columns=np.array([b"red", b"green"]),
    )
    out = attn.json("run", tmp_path / "b.npz")
    assert (out["queries"], out["keys"], out["columns"]) == (["apple", "péar"], ["fruit", "tree"], ["red", "green"])
    csv = attn("run", tmp_path / "b.npz", "-f", "csv", "--labels")
    assert csv.exit_code == 0, csv.output
    table = attn("run", tmp_path / "b.npz", "-f", "table")
    for text in (csv.stdout, table.stdout):
        assert "apple" in text and "péar" in text and "b'" not in text
    assert "red" in csv.stdout.splitlines()[0]


def test_a_text_files_first_comment_lines_are_its_description(attn, samples):
    """samples/q.csv says its vectors are made up (seed 000's footnote): the header shows it, as a bundle's."""
    result = attn("explain", samples / "q.csv", samples / "k.csv", samples / "v.csv", "-f", "table")
    assert result.exit_code == 0, result.output
    assert "Made-up vectors (seed 000's footnote): not word embeddings" in result.stdout.splitlines()[1]
    from attncli.readers import read_input

    bundle = read_input(b"# one\n# two\n1,2\n3,4\n", "x.csv")
    assert bundle.meta == {"description": "one two"} and bundle.matrix().values.tolist() == [[1, 2], [3, 4]]
