"""``attn check --rows K``: K query rows of every (batch, head), the block
edges and band rows always among them, the rest at random with a seed that
repeats them; bugs confined to a block edge, a band row or one head are
still caught. And the progress bar's callback."""

import json

import numpy as np
import pytest

from attncli import AttentionOptions
from attncli.core.check import check
from attncli.core.kernel import blocked
from attncli.core.sample import edge_rows, sample_rows

B, H, N, D = 1, 2, 600, 16  # three blocks of 256 queries: edges 0, 255, 256, 511, 512, 599
RNG = np.random.default_rng(11)
Q, K, V = (RNG.standard_normal((B, H, N, D)).astype(np.float16) for _ in range(3))


def correct(q=Q, k=K, v=V, **options):
    """A correct float16 output: attn's float64 kernel rounded."""
    return blocked(*(m.astype(np.float64) for m in (q, k, v)), AttentionOptions(**options)).astype(np.float16)


def save(tmp_path, out, q=Q, k=K, v=V):
    for name, m in zip(("out", "q", "k", "v"), (out, q, k, v), strict=True):
        np.save(tmp_path / f"{name}.npy", m)
    return [tmp_path / f"{name}.npy" for name in ("out", "q", "k", "v")]


def planted(out, head, row, by=0.25):
    bad = out.copy()
    bad[0, head, row, 3] += np.float16(by)
    return bad


def test_the_edge_rows():
    assert edge_rows(600, 600, None, None, 256, 1024).tolist() == [0, 255, 256, 511, 512, 599]
    # causal bottom-right, 300 queries over 2100 keys: row i sees keys up to i + 1800, which
    # meets the key block edge 2048 at rows 247 and 248 and leaves the keys at 299
    rows = edge_rows(300, 2100, "bottom-right", None, 256, 1024).tolist()
    assert rows == [0, 247, 248, 255, 256, 299]
    # a window of 100 keys to the left: its left edge, i − 100, meets key 1024 at rows 1123 and 1124
    assert {1123, 1124} <= set(edge_rows(2000, 2000, "top-left", (100, 0), 256, 1024).tolist())


def test_a_sample_holds_the_edges_and_is_repeated_by_its_seed():
    one = sample_rows(N, N, 40, None, None, seed=3)
    assert len(one.rows) == 40 and one.edges == 6 and one.seed == 3
    assert set(edge_rows(N, N, None, None, 256, 1024).tolist()) <= set(one.rows.tolist())
    assert np.array_equal(one.rows, sample_rows(N, N, 40, None, None, seed=3).rows)
    assert not np.array_equal(one.rows, sample_rows(N, N, 40, None, None, seed=4).rows)
    assert np.array_equal(sample_rows(N, N, N + 5, None, None).rows, np.arange(N))


@pytest.mark.parametrize("head, row", [(1, 256), (0, 511), (1, 599)])
def test_a_bug_at_a_block_edge_of_one_head_is_caught(attn, tmp_path, head, row):
    files = save(tmp_path, planted(correct(), head, row))
    result = attn("check", *files, "--rows", "6", "-f", "json")  # the edges and nothing else
    assert result.exit_code == 3, result.output
    data = json.loads(result.stdout)
    assert data["worst"]["index"] == [0, head, row, 3]
    assert data["rows"] == {"checked": 6, "of": N, "index": [0, 255, 256, 511, 512, 599], "edges": 6, "seed": 0} | {
        "seed": data["rows"]["seed"]
    }
    assert np.array(data["error_by_query"]).shape == (1, H, 6)
    assert result.stderr.startswith(f"attn: error: {files[0]}: disagrees with the reference: max |OUT - ref| = 0.25")
    assert result.stderr.rstrip().endswith(f"(checked 6 of 600 rows per head, seed {data['rows']['seed']})")


def test_a_bug_on_a_band_row_is_caught(attn, tmp_path):
    """Causal bottom-right over more keys than queries: row 248 is where the band meets a key block."""
    q = RNG.standard_normal((1, 1, 300, D)).astype(np.float16)
    k, v = (RNG.standard_normal((1, 1, 2100, D)).astype(np.float16) for _ in range(2))
    out = planted(correct(q, k, v, causal="bottom-right"), 0, 248)
    files = save(tmp_path, out, q, k, v)
    result = attn("check", *files, "--causal-align", "bottom-right", "--rows", "8", "-f", "json")
    assert result.exit_code == 3, result.output
    assert json.loads(result.stdout)["worst"]["index"] == [0, 0, 248, 3]


def test_a_correct_output_passes_and_the_seed_repeats_the_rows(attn, tmp_path):
    files = save(tmp_path, correct())
    first = attn.json(*["check", *files, "--rows", "50"], "-f", "json")
    seed = first["rows"]["seed"]
    assert first["passed"] and first["rows"]["checked"] == 50 and len(first["rows"]["index"]) == 50
    again = attn.json("check", *files, "--rows", "50", "--seed", str(seed), "-f", "json")
    assert again["rows"] == first["rows"] and again["max_abs_error"] == first["max_abs_error"]
    whole = attn.json("check", *files, "-f", "json")
    assert whole["rows"] == {"checked": N, "of": N, "index": None, "edges": None, "seed": None}
    # a sample's worst is at most the whole's (its reference is the equation's, the whole's the blocked kernel's)
    assert first["max_abs_error"] <= whole["max_abs_error"] + 1e-12


def test_the_view_says_how_many_rows_were_checked(attn, tmp_path):
    files = save(tmp_path, correct())
    result = attn("check", *files, "--rows", "10", "--seed", "9", "-f", "table")
    assert result.exit_code == 0, result.output
    assert "checked 10 of 600 rows per head: 6 block edges and band rows, 4 at random (--seed 9 checks" in (
        " ".join(result.stdout.split())
    )


def test_rows_emit_the_checked_rows(attn, tmp_path):
    import io

    files = save(tmp_path, correct())
    result = attn("check", *files, "--rows", "7", "--seed", "1", "-f", "npy", "--emit", "reference")
    assert result.exit_code == 0, result.output
    reference = np.load(io.BytesIO(result.stdout_bytes))
    rows = sample_rows(N, N, 7, None, None, seed=1).rows
    expected = blocked(*(m.astype(np.float64) for m in (Q, K, V)))[..., rows, :]
    assert reference.shape == (B, H, 7, D)
    np.testing.assert_allclose(reference, expected, atol=1e-12)


def test_the_progress_callback_is_called_up_to_the_whole():
    calls = []
    out = correct()
    check(out, Q, K, V, AttentionOptions(), progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1]
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:], strict=False))
    calls.clear()
    check(out, Q, K, V, AttentionOptions(), rows=20, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1]


def test_no_progress_bar_in_a_pipe(attn, tmp_path, monkeypatch):
    """The check asks for a bar; stderr is not a terminal here, so there is none (and no callback)."""
    from contextlib import contextmanager

    from attncli.cli import io as cli_io

    files = save(tmp_path, correct())
    given = []
    real = cli_io.progress_bar

    @contextmanager
    def spy(label):
        with real(label) as progress:
            given.append((label, progress))
            yield progress

    monkeypatch.setattr(cli_io, "progress_bar", spy)
    monkeypatch.setattr(cli_io, "PROGRESS_AFTER", 0.0)
    result = attn("check", *files, "-f", "json")
    assert result.exit_code == 0 and result.stderr == ""
    assert given == [("check", None)]


def test_a_progress_bar_on_a_terminal(monkeypatch):
    """On a terminal the bar is drawn on stderr once the work takes longer than PROGRESS_AFTER."""
    import io
    import sys

    from attncli.cli import io as cli_io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(cli_io, "PROGRESS_AFTER", 0.0)
    with cli_io.progress_bar("check") as progress:
        assert progress is not None
        check(correct(), Q, K, V, AttentionOptions(), progress=progress)
    assert "check" in terminal.getvalue()
