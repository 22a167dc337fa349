"""attn run at scale: --emit output through the blocked kernel, memory-mapped
NPY inputs, streamed writers and the progress bar's terminal check."""

import io
import json

import numpy as np
import pytest

from attncli.cli.io import progress_bar
from attncli.cli.reading import read_matrix_named
from attncli.output.writers import to_json, write_delimited, write_json
from attncli.readers import TextSettings


@pytest.fixture
def npy_problem(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {"q": rng.standard_normal((37, 5)), "k": rng.standard_normal((23, 5)), "v": rng.standard_normal((23, 4))}
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))
    return [tmp_path / f"{n}.npy" for n in "qkv"]


@pytest.mark.parametrize(
    "options",
    [[], ["--causal-align", "bottom-right", "--temperature", "2"], ["--similarity", "cosine", "--scale", "3"]],
)
def test_emit_output_matches_the_json_output(attn, npy_problem, tmp_path, options):
    full, notes = attn.json_and_notes("run", *npy_problem, "-f", "json", *options)
    result = attn("run", *npy_problem, "-f", "npy", *options)
    assert result.exit_code == 0, result.output
    # bottom-right with 37 queries over 23 keys: the first 14 see nothing, said the same by either path
    assert result.stderr == "".join(f"attn: note: {n}\n" for n in notes)
    assert ("bottom-right" in options) == (
        notes
        == [
            "queries q0, q1, q2, q3, q4, … (14 in all) may attend to no "
            "key (causal bottom-right forbids every key): their weights "
            "and outputs are 0"
        ]
    )
    out = np.load(io.BytesIO(result.stdout_bytes))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.array(full["output"], np.float32), rtol=1e-5, atol=1e-6)
    csv = attn("run", *npy_problem, "-f", "csv", *options)
    np.testing.assert_allclose(np.loadtxt(io.StringIO(csv.stdout), delimiter=",", ndmin=2), out, rtol=1e-6)


def test_emit_output_with_a_mask_file(attn, npy_problem, tmp_path):
    mask = np.random.default_rng(1).random((37, 23)) < 0.5
    mask[3] = False  # a query that sees nothing gets zeros
    np.save(tmp_path / "mask.npy", mask)
    full, notes = attn.json_and_notes("run", *npy_problem, "--mask", tmp_path / "mask.npy", "-f", "json")
    assert notes == ["query q3 may attend to no key (the mask forbids every key): its weights and output are 0"]
    result = attn("run", *npy_problem, "--mask", tmp_path / "mask.npy", "-f", "npy")
    assert result.stderr == f"attn: note: {notes[0]}\n"
    out = np.load(io.BytesIO(result.stdout_bytes))
    assert out[3].tolist() == [0, 0, 0, 0]
    np.testing.assert_allclose(out, np.array(full["output"], np.float32), rtol=1e-5, atol=1e-6)


def test_npy_files_are_memory_mapped(npy_problem):
    m = read_matrix_named(str(npy_problem[0]), TextSettings())  # as every command reads a named input
    assert isinstance(m.values, np.memmap) and m.values.dtype == np.float32 and m.shape == (37, 5)


def test_unmappable_npy_reports_as_before(attn, tmp_path):
    np.save(tmp_path / "x.npy", np.array([[1, 2]], dtype=object), allow_pickle=True)
    np.save(tmp_path / "n.npy", np.array([[1.0, np.nan]]))
    good = tmp_path / "g.npy"
    np.save(good, np.ones((1, 2)))
    assert attn.fails("run", tmp_path / "x.npy", good, good).endswith(
        "x.npy: holds Python objects (pickled data), which attn never loads "
        "(save a float array: np.save(f, a.astype(float)))"
    )
    message = attn.fails("run", tmp_path / "n.npy", good, good)
    assert message.endswith("n.npy: row 1, column 2: nan is not a finite number")
    (tmp_path / "t.npy").write_bytes(good.read_bytes()[:-5])
    assert attn.fails("run", tmp_path / "t.npy", good, good).endswith(
        "t.npy: its NPY header declares 1×2 float64 values (16 bytes), but 11 bytes of data follow it "
        "(the file is truncated or damaged)"
    )


def test_writers_stream_in_blocks(monkeypatch):
    from attncli.output import writers

    monkeypatch.setattr(writers, "ROWS_PER_WRITE", 3)
    values = np.arange(20.0).reshape(10, 2)
    expected = "[" + ",".join(f"[{a},{b}]" for a, b in values.tolist()) + "]"
    assert to_json(values) == expected
    out = io.StringIO()
    write_json(out, {"m": values, "n": [1, 2]})
    assert json.loads(out.getvalue()) == {"m": values.tolist(), "n": [1, 2]}
    out = io.StringIO()
    write_delimited(out, values, [f"r{i}" for i in range(10)], ["a", "b"])
    lines = out.getvalue().splitlines()
    assert lines[0] == ",a,b" and lines[1] == "r0,0.0,1.0" and lines[-1] == "r9,18.0,19.0" and len(lines) == 11


def test_no_progress_bar_off_a_terminal():
    with progress_bar("work") as progress:
        assert progress is None


def test_progress_bar_on_a_terminal_after_the_delay(monkeypatch):
    import sys

    from attncli.cli import io as common

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(common, "PROGRESS_AFTER", 0.0)
    with progress_bar("work") as progress:
        for done in range(1, 4):
            progress(done, 3)
    assert "work" in err.getvalue()
    monkeypatch.setattr(common, "PROGRESS_AFTER", 3600.0)
    err.seek(0), err.truncate()
    with progress_bar("quick") as progress:
        progress(1, 1)
    assert err.getvalue() == ""  # work under the delay shows nothing
