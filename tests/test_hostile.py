"""Hostile inputs and a hostile environment, tried as a careless user and a
fuzzer would: nothing lost, nothing crashes, nothing hangs, one line on a
failure, and exit 70 only for a bug in attn.

One section per class: output paths that name an input; inputs that can be
read only once (FIFOs, ``<(…)``, stdin, /dev/zero); closed and full standard
streams; deep nesting; environment values and options past what Python's
int() or numpy take; numpy warnings; control characters and markup in
labels; big tables; Ctrl-C. The situations that need real file descriptors
run as shell commands, all at once (``shell`` below), so they cost about
one start of attn in time.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attncli.errors import AttnError
from attncli.readers import read_matrix
from attncli.text import printable

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
QKV = [str(SAMPLES / name) for name in ("q.csv", "k.csv", "v.csv")]


def closed_in_stderr(text: str) -> None:
    """A failure's stderr: exactly one attn line, no traceback, no warning."""
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attn: error: "), text


# ---------------------------------------------------------------- situations with real file descriptors

# name -> (a bash script run in a folder holding q.csv, k.csv, v.csv, q.npy, deep*.yaml; its exit code;
#          its stderr, exactly; what its stdout starts with, or None for nothing)
SHELL = {
    "stdout on a full disk": (
        "attn run q.csv k.csv v.csv > /dev/full",
        1,
        "attn: error: <stdout>: cannot write: No space left on device\n",
        None,
    ),
    "a table on a full disk": (
        "attn run q.csv k.csv v.csv -f table > /dev/full",
        1,
        "attn: error: <stdout>: cannot write: No space left on device\n",
        None,
    ),
    "NPY on a full disk": (
        "attn run q.csv k.csv v.csv -f npy --emit weights > /dev/full",
        1,
        "attn: error: <stdout>: cannot write: No space left on device\n",
        None,
    ),
    "stdout that cannot encode ×": (
        "PYTHONIOENCODING=ascii attn run q.csv k.csv v.csv -f table",
        1,
        "attn: error: <stdout>: cannot write '\\xd7': stdout's encoding is ascii (set "
        "PYTHONIOENCODING=utf-8, or use a UTF-8 locale)\n",
        None,
    ),
    "help on a full disk": (
        "attn --help > /dev/full",
        1,
        "attn: error: <stdout>: cannot write: No space left on device\n",
        None,
    ),
    "the version on a full disk": (
        "attn --version > /dev/full",
        1,
        "attn: error: <stdout>: cannot write: No space left on device\n",
        None,
    ),
    "a command's help on a full disk": (
        "attn run --help > /dev/full",
        1,
        "attn: error: <stdout>: cannot write: No space left on device\n",
        None,
    ),
    "stdin closed": (
        "attn run - k.csv v.csv <&-",
        1,
        "attn: error: <stdin>: is closed (pipe the input in, or give a file name)\n",
        None,
    ),
    "stdout closed": (
        "attn softmax 1 2 >&-",
        1,
        "attn: error: stdout is closed, so the result has nowhere to go (redirect it to a file, or to /dev/null)\n",
        None,
    ),
    "stderr full on a failure": ("attn run nope.csv k.csv v.csv 2>/dev/full", 1, "", None),
    "stderr closed on a failure": ("attn run nope.csv k.csv v.csv 2>&-", 1, "", None),
    "a table into a closed pipe": ("attn run q.csv k.csv v.csv -f table | true; exit ${PIPESTATUS[0]}", 141, "", None),
    "JSON into a closed pipe": ("attn run q.csv k.csv v.csv | true; exit ${PIPESTATUS[0]}", 141, "", None),
    "help into a closed pipe": ("attn --help | true; exit ${PIPESTATUS[0]}", 141, "", None),
    "a command's help into a closed pipe": ("attn run --help | true; exit ${PIPESTATUS[0]}", 141, "", None),
    "CSV into a closed pipe": ("attn softmax 1 2 -f csv | true; exit ${PIPESTATUS[0]}", 141, "", None),
    "stdout appended to an input": (
        "cp q.csv qq.csv; attn run qq.csv k.csv v.csv >> qq.csv; code=$?; cmp -s qq.csv q.csv || exit 99; exit $code",
        2,
        "attn: error: stdout is qq.csv, an input of this run (redirect the output to another file)\n",
        None,
    ),
    "a picture over the file stdin reads": (
        "cp q.csv qs.csv; attn run - k.csv v.csv --svg qs.csv < qs.csv; code=$?; cmp -s qs.csv q.csv || exit 99; "
        "exit $code",
        2,
        "attn: error: qs.csv: --svg names <stdin>, an input of this run "
        "(attn never writes over its inputs: give the picture another name)\n",
        None,
    ),
    "a picture into the pipe stdin reads": (
        "echo | attn softmax 1 2 --svg /dev/stdin",
        2,
        "attn: error: /dev/stdin: --svg names <stdin>, an input of "
        "this run (attn never writes over its inputs: give the picture another name)\n",
        None,
    ),
    "a picture to /dev/stdout": (
        "attn run q.csv k.csv v.csv --svg /dev/stdout -f json > both.txt; code=$?; "
        "grep -q '\"weights\"' both.txt || exit 99; head -c 4 both.txt; exit $code",
        0,
        "",
        b"<svg",
    ),
    "a picture to a device": (
        # root gets a device node of its own; anyone else cannot rename over /dev/null anyway
        "mknod null c 1 3 2>/dev/null && dev=null || dev=/dev/null; attn run q.csv k.csv v.csv --svg $dev -f json "
        "> /dev/null; code=$?; test -c $dev || exit 99; exit $code",
        0,
        "",
        None,
    ),
    "a picture to a FIFO nobody reads": (
        "mkfifo lonely; timeout 60 attn run q.csv k.csv v.csv --svg lonely -f json; code=$?; test -p lonely || "
        "exit 99; exit $code",
        1,
        "attn: error: lonely: cannot write: no program read from this pipe within 5 s (start the reader first)\n",
        None,
    ),
    "a picture to a FIFO with a reader": (
        "mkfifo pic; cat pic > got.svg & timeout 60 attn run q.csv k.csv v.csv --svg pic -f json > /dev/null; "
        "code=$?; wait; test -p pic || exit 99; head -c 4 got.svg; exit $code",
        0,
        "",
        b"<svg",
    ),
    "a FIFO as input": (
        "mkfifo qf; cat q.csv > qf & timeout 60 attn run qf k.csv v.csv; code=$?; wait; exit $code",
        0,
        "",
        b'{"queries"',
    ),
    "an NPY FIFO as input": (
        "mkfifo qn; cat q.npy > qn & timeout 60 attn run qn k.csv v.csv; code=$?; wait; exit $code",
        0,
        "",
        b'{"queries"',
    ),
    "process substitution": ("timeout 60 attn run <(cat q.csv) k.csv <(cat v.csv)", 0, "", b'{"queries"'),
    "an NPY by process substitution": ("timeout 60 attn run <(cat q.npy) k.csv v.csv", 0, "", b'{"queries"'),
    "a dictionary by process substitution": (
        "timeout 60 attn lookup fruit --dict <(cat fruit.yaml)",
        0,
        "",
        b'{"queries"',
    ),
    "one FIFO named twice": (
        "mkfifo twice; (cat q.csv > twice &); timeout 60 attn run twice twice k.csv; code=$?; "
        "timeout 5 cat twice > /dev/null; exit $code",
        2,
        "attn: error: twice is a pipe named more than once, but "
        "a pipe can be read only once (save it to a file first)\n",
        None,
    ),
    "stdin named as - and /dev/stdin": (
        "cat q.csv | timeout 60 attn run - k.csv /dev/stdin",
        2,
        "attn: error: stdin ('-') is named more than "
        "once, but can be read only once (save all but one input to a file)\n",
        None,
    ),
    "YAML nested 50,000 deep": (
        "attn run deep.yaml",
        1,
        "attn: error: deep.yaml:1: is nested too deeply to be "
        "a matrix (a matrix needs at most 8 levels of lists and mappings)\n",
        None,
    ),
    "YAML nested 50,000 deep on stdin": (
        "attn run - k.csv v.csv < deep-block.yaml",
        1,
        "attn: error: <stdin>:1: is nested too deeply to be a "
        "matrix (a matrix needs at most 8 levels of lists and mappings)\n",
        None,
    ),
    "YAML mappings nested 50,000 deep": (
        "attn self deep-map.yaml",
        1,
        "attn: error: deep-map.yaml:1: is nested too deeply to be a matrix "
        "(a matrix needs at most 8 levels of lists and mappings)\n",
        None,
    ),
    "/dev/zero as an input": (
        "ATTN_MAX_STREAM_BYTES=1000000 timeout 60 attn run /dev/zero k.csv v.csv",
        1,
        "attn: error: /dev/zero: holds more than 1,000,000 bytes, the limit for stdin, a pipe or a device (save "
        "it to a file, or set ATTN_MAX_STREAM_BYTES to raise the limit)\n",
        None,
    ),
    "/dev/zero as word vectors": (
        "ATTN_MAX_LINE=1000000 timeout 60 attn lookup fruit --keys apple --vectors /dev/zero",
        1,
        "attn: error: /dev/zero:1: has 1,000,001 characters in one line, more than the limit of 1,000,000 "
        "(set ATTN_MAX_LINE to raise it)\n",
        None,
    ),
}


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    """Every SHELL script, started at once; their (exit code, stdout, stderr) by name."""
    folder = tmp_path_factory.mktemp("hostile")
    for name in ("q.csv", "k.csv", "v.csv", "fruit.yaml"):
        shutil.copy(SAMPLES / name, folder)
    np.save(folder / "q.npy", np.array([[1.0, 2.0, 3.0]]))
    (folder / "deep.yaml").write_text("[" * 50_000 + "]" * 50_000)
    (folder / "deep-block.yaml").write_text("- " * 50_000 + "1\n")
    (folder / "deep-map.yaml").write_text("{a: " * 50_000 + "1" + "}" * 50_000)
    bin_folder = folder / "bin"
    bin_folder.mkdir()
    (bin_folder / "attn").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m attncli "$@"\n')
    (bin_folder / "attn").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_folder}{os.pathsep}{os.environ['PATH']}"}
    procs = {
        name: subprocess.Popen(
            ["bash", "-c", script],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for name, (script, *_) in SHELL.items()
    }
    results = {}
    deadline = time.monotonic() + 120
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # a hang is a failure of its own case, not of the whole run
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += b"(hung: killed after 120 s)"
        results[name] = (proc.returncode, out, err.decode())
    return results


@pytest.mark.parametrize("name", SHELL)
def test_real_streams_and_paths(shell, name):
    _, code, stderr, stdout = SHELL[name]
    got_code, got_out, got_err = shell[name]
    assert (got_code, got_err) == (code, stderr), got_err
    if stdout is None:
        assert got_out == b""
    else:
        assert got_out.startswith(stdout), got_out[:200]


# ---------------------------------------------------------------- output paths


@pytest.fixture
def inputs(tmp_path):
    for name in ("q.csv", "k.csv", "v.csv", "fruit.yaml"):
        shutil.copy(SAMPLES / name, tmp_path)
    return tmp_path


@pytest.mark.parametrize("option", ["--svg", "--html"])
@pytest.mark.parametrize("how", ["path", "relative", "symlink", "hard link"])
def test_a_picture_never_overwrites_an_input(attn, inputs, option, how, monkeypatch):
    monkeypatch.chdir(inputs)
    q = inputs / "q.csv"
    before = q.read_bytes()
    target = {"path": q, "relative": "./q.csv", "symlink": inputs / "link.svg", "hard link": inputs / "hard.svg"}[how]
    if how == "symlink":
        os.symlink(q, target)
    if how == "hard link":
        os.link(q, target)
    line = attn.fails("run", q, inputs / "k.csv", inputs / "v.csv", option, target, code=2)
    assert line.startswith(f"{target}: {option} names ") and "an input of this run" in line
    assert q.read_bytes() == before


def test_a_picture_never_overwrites_a_mask_or_vectors(attn, inputs):
    mask = inputs / "m.csv"
    mask.write_text("1,0,1\n")
    assert attn.fails("run", *QKV, "--mask", mask, "--html", mask, code=2).startswith(f"{mask}: --html names")
    vectors = inputs / "g.txt"
    vectors.write_text("fruit 1 0\napple 0 1\n")
    assert attn.fails("lookup", "fruit", "--keys", "apple", "--vectors", vectors, "--svg", vectors, code=2).startswith(
        f"{vectors}: --svg names"
    )
    assert mask.read_text() == "1,0,1\n" and vectors.read_text() == "fruit 1 0\napple 0 1\n"


def test_a_picture_through_a_symlink_keeps_the_symlink(attn, inputs):
    real, link = inputs / "real.svg", inputs / "link.svg"
    real.write_text("old")
    os.symlink(real, link)
    result = attn("run", *QKV, "--svg", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and real.read_text().startswith("<svg")


def test_an_archive_that_would_not_fit_in_memory_is_refused(attn, tmp_path, monkeypatch):
    import attncli.readers.limits as limits

    archive = tmp_path / "b.npz"
    np.savez_compressed(archive, q=np.zeros((100, 100)), k=np.zeros((100, 100)), v=np.zeros((100, 1)))
    import zipfile

    expanded = sum(info.file_size for info in zipfile.ZipFile(archive).infolist())  # 160,800 bytes and headers
    monkeypatch.setattr(limits, "memory_available", lambda: 50_000)
    assert (
        attn.fails("run", archive)
        == f"{archive}: its arrays expand to {expanded:,} bytes, more than the 50,000 bytes of memory free"
    )


def test_a_new_picture_is_written_whole(attn, inputs):
    svg = inputs / "new.svg"
    result = attn("run", *QKV, "--svg", svg)
    assert result.exit_code == 0 and svg.read_text().startswith("<svg")
    assert sorted(p.name for p in inputs.iterdir() if p.name.startswith(".")) == []  # no temporary left


# ---------------------------------------------------------------- inputs read once


def test_a_fifo_is_read_once(attn, inputs):
    fifo = inputs / "q.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b"1,2,3\n"))
    writer.start()
    data = attn.json("run", fifo, inputs / "k.csv", inputs / "v.csv")
    writer.join()
    assert data["shapes"]["q"] == [1, 3]


def test_a_pipe_by_its_descriptor_is_read_once(attn):
    """What ``<(cat q.csv)`` hands attn: /dev/fd/N, a pipe with no extension to go by."""
    read_end, write_end = os.pipe()
    writer = threading.Thread(
        target=lambda: (os.write(write_end, b"q: [[1, 2, 3]]\nk: [[1, 2, 3]]\nv: [[5]]\n"), os.close(write_end))
    )
    writer.start()
    try:
        data = attn.json("run", f"/dev/fd/{read_end}")
    finally:
        writer.join()
        os.close(read_end)
    assert data["output"] == [[5.0]]


def test_a_stream_stops_at_its_limit(attn, monkeypatch):
    monkeypatch.setenv("ATTN_MAX_STREAM_BYTES", "1000")
    assert attn.fails("run", "/dev/zero", *QKV[1:]) == (
        "/dev/zero: holds more than 1,000 bytes, the limit for stdin, a pipe or a device "
        "(save it to a file, or set ATTN_MAX_STREAM_BYTES to raise the limit)"
    )


# ---------------------------------------------------------------- the environment: exit 1 or 2, never 70


@pytest.mark.parametrize("value", ["", " ", "abc", "-5", "0", "٣", "1e3", "99999999999999999999999"])
def test_any_columns_value_draws_a_table_and_a_picture(attn, tmp_path, value):
    svg = tmp_path / "x.svg"
    result = attn("run", *QKV, "-f", "table", "--svg", svg, env={"COLUMNS": value})
    assert result.exit_code == 0, result.output
    assert "apple" in result.stdout and svg.read_text().startswith("<svg")


@pytest.mark.parametrize(
    "variable", ["ATTN_MAX_ELEMENTS", "ATTN_MAX_YAML_NODES", "ATTN_MAX_LINE", "ATTN_MAX_STREAM_BYTES"]
)
@pytest.mark.parametrize("value", ["1" + "0" * 20, "9" * 5000])
def test_a_huge_limit_is_no_limit(attn, tmp_path, variable, value):
    labelled = tmp_path / "q.csv"
    labelled.write_text('name,x,y,z\n"fruit",1,2,3\n')  # read cell by cell: the csv module takes the line limit
    result = attn("run", labelled, *QKV[1:], env={variable: value})
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["queries"] == ["fruit"]


@pytest.mark.parametrize(
    "args, code",
    [
        (["explain", *QKV, "--query", "٣"], 2),
        (["explain", *QKV, "--query", "9" * 5000], 2),
        (["self", QKV[0], "--d-out", "9" * 30], 2),
        (["self", QKV[0], "--heads", "9" * 5000], 2),
        (["run", *QKV, "--scale", "9" * 5000], 2),
        (["softmax", "9" * 5000], 2),
        (["softmax", "1", "-t", "1e-400"], 2),
        (["lookup", "fruit", "--keys", "apple", "--values", "9" * 5000], 2),
    ],
)
def test_absurd_numbers_in_options_are_usage_errors(attn, args, code):
    line = attn.fails(*args, code=code)
    assert "internal error" not in line and len(line) < 400


def test_environment_errors_are_not_bugs():
    from attncli.cli.app import environment_error

    assert str(environment_error(OSError(5, "Input/output error", "q.csv"))) == "q.csv: Input/output error"
    too_long = None
    try:
        int("1" * 5000)
    except ValueError as e:
        too_long = e
    assert (
        str(environment_error(too_long)) == "a number has more than 4,300 digits (write it with an exponent, as 1e5000)"
    )
    assert environment_error(KeyError("x")) is None  # a bug stays a bug (exit 70)


# ---------------------------------------------------------------- stderr holds only attn's lines


@pytest.mark.parametrize(
    "mask", ["1e308,-1e308,0", "-1e308,-1e308,-1e308", "1e308,1e308,0", "-inf,-inf,-inf", "1.7e308,0,-1.7e308"]
)
@pytest.mark.parametrize("fmt", ["json", "npy"])
def test_extreme_masks_print_nothing_on_stderr(attn, tmp_path, mask, fmt):
    """Extreme additive masks (given as --bias, as PyTorch's float masks are
    added): no numpy warning, only attn's own notes (a query that may attend
    to nothing is one)."""
    m = tmp_path / "m.csv"
    m.write_text(mask + "\n")

    def only_notes(stderr):
        return all(line.startswith("attn: note: ") for line in stderr.splitlines())

    result = attn("run", *QKV, "--bias", m, "-f", fmt)
    assert result.exit_code == 0 and only_notes(result.stderr), result.stderr
    explained = attn("explain", *QKV, "--bias", m, "-f", "json")
    assert explained.exit_code == 0 and only_notes(explained.stderr), explained.stderr
    weights = np.array(json.loads(explained.stdout)["weights"])
    assert np.isfinite(weights).all() and (weights.sum(axis=1) <= 1 + 1e-12).all()


@pytest.mark.parametrize(
    "numbers, temperature, weights",
    [
        (["1e308", "-1e308"], "1", [1.0, 0.0]),
        (["1", "2"], "1e-320", [0.0, 1.0]),  # x/T overflows; the limit of softmax as T -> 0 is the argmax
        (["1", "2"], "1e-300", [0.0, 1.0]),
        (["-inf", "-inf"], "1", [0.0, 0.0]),
    ],
)
def test_softmax_at_the_edges_of_float64(attn, numbers, temperature, weights):
    assert attn.json("softmax", *numbers, "-t", temperature)["weights"] == weights


def test_the_console_script_silences_warnings():
    """main() installs the filter once; a library warning never reaches the terminal."""
    code = (
        "import sys, warnings; import attncli.cli.app; cli = sys.modules['attncli.cli.app']; "
        "cli.app = lambda: warnings.warn('x', RuntimeWarning); cli.main()"
    )
    result = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == ""


# ---------------------------------------------------------------- the terminal


HOSTILE_LABELS = [
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "a\nb",
    "tab\there",
    "\u202eevil",
    "[/bold]",
    "[red]x[/red]",
    "bell\x07",
    "\x9b31m",
]


@pytest.mark.parametrize("label", HOSTILE_LABELS)
@pytest.mark.parametrize("command", ["run", "explain"])
def test_labels_reach_the_terminal_escaped_and_never_as_markup(attn, tmp_path, label, command):
    q = tmp_path / "q.yaml"
    q.write_text(json.dumps({"q": {label: [1, 2, 3]}, "k": {label: [1, 0, 0], "b": [0, 1, 0]}, "v": [[1], [2]]}))
    result = attn(command, q, "-f", "table")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert not any(c in out for c in "\x1b\x07\x9b\u202e\t"), repr(out[:300])
    assert printable(label) in out  # escaped as Python writes it (\x1b, \n), and markup shown as it is


def test_a_word_with_controls_is_escaped_in_lookup_and_errors(attn, tmp_path):
    vectors = tmp_path / "g.txt"
    vectors.write_text("fruit 1 0\nx[/]y 0 1\n")
    result = attn("lookup", "fruit", "--keys", "x[/]y", "--vectors", vectors, "-f", "table")
    assert result.exit_code == 0, result.output
    assert "key " in result.stdout and "x[/]y " in result.stdout
    assert attn.fails("lookup", "fruit", "--keys", "pear\x1b[2J", "--vectors", vectors).startswith(
        "unknown word 'pear\\x1b[2J'"
    )


def test_a_long_label_is_cut_in_tables_only(attn, tmp_path):
    long = "word " * 100
    q = tmp_path / "q.yaml"
    q.write_text(json.dumps({"q": {long.strip(): [1, 2, 3]}, "k": [[1, 0, 0]], "v": [[1]]}))
    table = attn("run", q, "-f", "table").stdout
    assert ("word " * 15).strip()[:60] in table and long.strip() not in table and "…" in table
    assert attn.json("run", q)["queries"] == [long.strip()]


def test_csv_to_a_terminal_is_escaped(attn, tmp_path, monkeypatch):
    import attncli.cli.emit as emit

    monkeypatch.setattr(emit, "is_terminal", lambda: True)
    q = tmp_path / "q.csv"
    q.write_text('name,x,y,z\n"\x1b[2Jq",1,2,3\n')
    result = attn("run", q, *QKV[1:], "-f", "csv", "--emit", "weights")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\\x1b[2Jq," in result.stdout


@given(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(
        lambda s: s.strip() and "," not in s and '"' not in s
    )
)
def test_any_label_is_shown_safely(label):
    from typer.testing import CliRunner

    from attncli.cli import app

    data = json.dumps({"q": {label: [1, 2]}, "k": [[1, 0], [0, 1]], "v": [[1], [2]]})
    result = CliRunner().invoke(app, ["run", "-", "-f", "table"], input=data)
    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 0:
        assert not any(ord(c) < 32 and c != "\n" or 0x7F <= ord(c) < 0xA0 for c in result.stdout), repr(label)
    else:
        closed_in_stderr(result.stderr)


# ---------------------------------------------------------------- big tables


def test_a_big_table_is_summarised_and_says_how_to_get_everything(attn, tmp_path):
    rng = np.random.default_rng(0)
    for name, shape in (("q", (3000, 4)), ("k", (3000, 4)), ("v", (3000, 2))):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal(shape))
    start = time.monotonic()
    result = attn("run", tmp_path / "q.npy", tmp_path / "k.npy", tmp_path / "v.npy", "-f", "table")
    assert result.exit_code == 0, result.output
    assert time.monotonic() - start < 30
    out = result.stdout
    # The weights: the compact heatmap, keys and queries pooled; the output: its first rows.
    assert "3000 keys across, " in out and "3000 queries down, " in out
    assert "… the first 50 of 3,000 rows are shown (all of it: --format json, or csv/tsv/npy with --emit)" in out
    assert "q49 " in out and "q50 " not in out


def test_many_keys_show_the_first_ones(attn, tmp_path):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "k.npy", rng.standard_normal((100_000, 3)))
    np.save(tmp_path / "v.npy", rng.standard_normal((100_000, 1)))
    result = attn("run", QKV[0], tmp_path / "k.npy", tmp_path / "v.npy", "-f", "table")
    assert result.exit_code == 0, result.output
    assert "100000 keys across, " in result.stdout  # the compact heatmap pools them


def test_many_heads_show_the_first_twelve(attn):
    result = attn(
        "self", "the pink elephant tried to get into the car", "--heads", "25", "--d-attn", "50", "-f", "table"
    )
    assert result.exit_code == 0, result.output
    assert "head 11 of 25" in result.stdout and "head 12 of 25" not in result.stdout
    assert "… and 13 more heads (--head N shows one)" in result.stdout


def test_many_numbers_to_softmax_show_the_first(attn):
    numbers = " ".join(str(i % 7) for i in range(5000))
    result = attn("softmax", "-", "-f", "table", input=numbers)
    assert result.exit_code == 0, result.output
    assert "… and 4,950 more (all of it: --format json, or csv/tsv/npy with --emit)" in result.stdout
    assert len(attn.json("softmax", "-", input=numbers)["weights"]) == 5000


def test_small_tables_are_whole(attn):
    result = attn("run", *QKV, "-f", "table")
    assert "shown" not in result.stdout


# ---------------------------------------------------------------- parsing in chunks, Ctrl-C


def test_csv_parsed_in_chunks_reads_the_same(monkeypatch):
    import attncli.readers.text as text

    rng = np.random.default_rng(2)
    values = rng.standard_normal((200, 7))
    data = "\n".join(",".join(map(repr, row)) for row in values.tolist()).encode() + b"\n"
    monkeypatch.setattr(text, "PARSE_CHUNK", 64)
    np.testing.assert_array_equal(read_matrix(data, "a.csv").values, values)
    ragged = data + b"1,2\n"
    with pytest.raises(AttnError, match="a.csv:201: row has 2 values, expected 7 like the first row"):
        read_matrix(ragged, "a.csv")
    monkeypatch.setattr(text, "CELLS_PER_BLOCK", 10)
    labelled = b"".join(
        f"r{i},".encode() + ",".join(map(repr, row)).encode() + b"\n" for i, row in enumerate(values.tolist())
    )
    m = read_matrix(labelled, "a.csv")
    np.testing.assert_array_equal(m.values, values)
    assert m.row_labels == [f"r{i}" for i in range(200)]


def test_json_parsed_through_python_hooks_reads_the_same(monkeypatch):
    import attncli.readers.trees as trees

    values = np.random.default_rng(3).standard_normal((20, 5))
    text = json.dumps(values.tolist()).encode()
    monkeypatch.setattr(trees, "PYTHON_FLOATS_PAST", 0)
    np.testing.assert_array_equal(read_matrix(text, "a.json").values, values)


def test_ctrl_c_stops_long_work_in_c_at_once(tmp_path):
    """Ctrl-C while the parser is busy in C code that holds the interpreter (as numpy's does for
    ~0.2 s per chunk): the command stops within about a chunk, quietly, with 130."""
    code = (
        "import attncli.readers.text as t\n"
        "def busy(*args):\n"
        "    while True:\n"
        "        sum(range(3_000_000))  # C code that never lets go of the interpreter, ~0.1 s\n"
        "t.read_delimited_fast = busy\n"
        "from attncli.cli import main\n"
        "main()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "run", *QKV], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        time.sleep(2.0)  # started, and busy
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()  # never leave a busy loop behind, whatever happened
    assert proc.returncode == 130 and stderr == ""
    assert time.monotonic() - sent < 3
