"""``attn run`` on tensors as frameworks save them: NPY/NPZ/safetensors of any
rank, both layouts, float16/bfloat16, bundles with sinks and settings, the
variants on the command line, and N-D outputs in every data format."""

import io
import json

import numpy as np
import pytest

from attncli import AttentionOptions, attention

from reference import heads_attention

ml_dtypes = pytest.importorskip("ml_dtypes")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

RNG = np.random.default_rng(11)
Q = RNG.standard_normal((2, 4, 3, 8)).astype(np.float32)  # [batch, heads, seq, dim]
K = RNG.standard_normal((2, 2, 5, 8)).astype(np.float32)  # two K/V heads: grouped-query
V = RNG.standard_normal((2, 2, 5, 6)).astype(np.float32)
SINKS = np.array([0.5, -1.0, 2.0, 0.0], dtype=np.float32)


def save(tmp_path, **arrays):
    paths = []
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
        paths.append(tmp_path / f"{name}.npy")
    return paths


def npy_out(attn, *args):
    result = attn("run", *args, "-f", "npy")
    assert result.exit_code == 0, result.output
    return np.load(io.BytesIO(result.stdout_bytes))


def test_4d_npy_gqa_output_keeps_rank_and_float32(attn, tmp_path):
    files = save(tmp_path, q=Q, k=K, v=V)
    out = npy_out(attn, *files)
    expected, _ = heads_attention(Q, K, V)
    assert out.shape == (2, 4, 3, 6) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1.3e-6, atol=1e-5)
    data = attn.json("run", *files)
    assert np.array(data["weights"]).shape == (2, 4, 3, 5) and np.array(data["output"]).shape == (2, 4, 3, 6)
    assert data["shapes"] == {"q": [2, 4, 3, 8], "k": [2, 2, 5, 8], "v": [2, 2, 5, 6]}
    assert data["layout"] == "bhsd" and data["dtype"] == "float32"
    np.testing.assert_allclose(data["output"], out, rtol=1e-6, atol=1e-6)  # JSON: the reference, nested lists


def test_bshd_layout_on_read_and_write(attn, tmp_path):
    files = save(tmp_path, q=Q.transpose(0, 2, 1, 3), k=K.transpose(0, 2, 1, 3), v=V.transpose(0, 2, 1, 3))
    out = npy_out(attn, *files, "--layout", "bshd", "--window", "1,0")
    expected, _ = heads_attention(Q, K, V, window=(1, 0))
    assert out.shape == (2, 3, 4, 6)  # [batch, seq, heads, dim], as read
    np.testing.assert_allclose(out.transpose(0, 2, 1, 3), expected, rtol=1.3e-6, atol=1e-5)
    data = attn.json("run", *files, "--layout", "bshd")
    assert data["layout"] == "bshd" and np.array(data["output"]).shape == (2, 3, 4, 6)
    assert data["shapes"]["q"] == [2, 3, 4, 8]
    assert np.array(data["weights"]).shape == (2, 4, 3, 5)  # weights are always [batch, heads, n_q, n_k]


def test_every_variant_on_the_command_line(attn, tmp_path):
    files = save(tmp_path, q=Q, k=K, v=V, sinks=SINKS, slopes=np.array([0.5, 0.25, 1.0, 2.0]))
    args = [
        "--rope",
        "gptj",
        "--rope-theta",
        "500",
        "--rope-dim",
        "4",
        "--rope-offset",
        "1",
        "--window",
        "2,1",
        "--softcap",
        "3",
        "--alibi-slopes",
        files[4],
        "--sinks",
        files[3],
        "--causal-align",
        "bottom-right",
        "-t",
        "1.5",
    ]
    out = npy_out(attn, *files[:3], *args)
    expected, _ = heads_attention(
        Q,
        K,
        V,
        rope=("gptj", 500.0, 4, 1),
        window=(2, 1),
        softcap=3.0,
        slopes=[0.5, 0.25, 1.0, 2.0],
        sinks=SINKS,
        causal="bottom-right",
        temperature=1.5,
    )
    np.testing.assert_allclose(out, expected, rtol=1.3e-6, atol=1e-5)
    data = attn.json("run", *files[:3], *args)
    np.testing.assert_allclose(data["output"], expected, rtol=1.3e-6, atol=1e-5)
    assert data["window"] == [2, 1] and data["softcap"] == 3.0 and data["alibi_slopes"] == [0.5, 0.25, 1.0, 2.0]
    assert data["rope"] == {"style": "gptj", "theta": 500.0, "dim": 4, "offset": 1}
    assert data["sinks"] == SINKS.tolist()


def test_alibi_default_slopes_follow_the_query_heads(attn, tmp_path):
    data = attn.json("run", *save(tmp_path, q=Q, k=K, v=V), "--alibi")
    assert data["alibi_slopes"] == [2**-2, 2**-4, 2**-6, 2**-8]  # 2^(−8(h+1)/4)


def test_float16_and_bfloat16_safetensors_bundle_with_settings(attn, tmp_path):
    for dtype in (np.float16, ml_dtypes.bfloat16):
        low = {name: m.astype(dtype) for name, m in (("q", Q), ("k", K), ("v", V))}
        path = tmp_path / "case.safetensors"
        safetensors_numpy.save_file(
            {**low, "sinks": SINKS}, path, metadata={"window": "3,0", "rope": "neox", "softcap": "20"}
        )
        data = attn.json("run", path)
        expected, _ = heads_attention(
            *(low[n].astype(np.float64) for n in "qkv"),
            window=(3, 0),
            rope=("neox", 10000.0, None, None),
            softcap=20.0,
            sinks=SINKS,
        )
        np.testing.assert_allclose(data["output"], expected, rtol=1.3e-6, atol=1e-5)
        assert data["dtype"] == "float32" and data["window"] == [3, 0] and data["rope"]["style"] == "neox"
        # the command line wins over the bundle's settings
        assert attn.json("run", path, "--window", "0,0")["window"] == [0, 0]


def test_bfloat16_sinks_slopes_and_bias_as_a_models_files_hold_them(attn, tmp_path):
    """A model's sinks, ALiBi slopes and position bias saved in bfloat16: read as numbers
    (each exactly), in every command and format (they once stopped JSON and explain with
    exit 70, and a bias was refused as not numbers)."""
    low = {name: m.astype(ml_dtypes.bfloat16) for name, m in (("q", Q), ("k", K), ("v", V))}
    bias = RNG.standard_normal((2, 4, 3, 5)).astype(ml_dtypes.bfloat16)
    dout = RNG.standard_normal((2, 4, 3, 6)).astype(ml_dtypes.bfloat16)
    arrays = {**low, "sinks": SINKS.astype(ml_dtypes.bfloat16), "bias": bias, "dout": dout}
    for name, values in arrays.items():
        safetensors_numpy.save_file({name: values}, tmp_path / f"{name}.safetensors")
    files = [str(tmp_path / f"{name}.safetensors") for name in "qkv"]
    extras = {
        "sinks": ["--sinks", str(tmp_path / "sinks.safetensors")],
        "bias": ["--bias", str(tmp_path / "bias.safetensors")],
        "slopes": ["--alibi-slopes", str(tmp_path / "sinks.safetensors")],
    }
    wide = {name: m.astype(np.float64) for name, m in arrays.items()}
    for what, extra in extras.items():
        data = attn.json("run", *files, *extra)
        expected, _ = heads_attention(
            *(wide[n] for n in "qkv"),
            sinks=wide["sinks"] if what == "sinks" else None,
            bias=wide["bias"] if what == "bias" else None,
            slopes=wide["sinks"] if what == "slopes" else None,
        )
        np.testing.assert_allclose(data["output"], expected, rtol=1.3e-6, atol=1e-5)
        if what != "bias":
            assert data["sinks" if what == "sinks" else "alibi_slopes"] == wide["sinks"].tolist()
        for command in (("explain", *files), ("grad", *files, "--dout", str(tmp_path / "dout.safetensors"))):
            for fmt in ("json", "table"):
                result = attn(*command, *extra, "-f", fmt)
                assert result.exit_code == 0, (command[0], what, fmt, result.output)


def test_npz_bundle_with_mask_per_head_and_yaml_settings(attn, tmp_path):
    allowed = RNG.random((2, 4, 3, 5)) < 0.7
    np.savez(tmp_path / "case.npz", q=Q, k=K, v=V, mask=allowed, sinks=SINKS)
    data = attn.json("run", tmp_path / "case.npz")
    expected, _ = heads_attention(Q, K, V, allowed=allowed, sinks=SINKS)
    np.testing.assert_allclose(data["output"], expected, rtol=1.3e-6, atol=1e-5)
    (tmp_path / "b.yaml").write_text(
        "q: [[1, 0], [0, 1]]\nk: [[1, 0], [0, 1], [1, 1]]\nv: [[1], [2], [3]]\n"
        "window: [0, 0]\nalibi: true\nsinks: [0.5]\n"
    )
    data = attn.json("run", tmp_path / "b.yaml")
    assert data["window"] == [0, 0] and data["alibi_slopes"] == [2**-8] and data["sinks"] == [0.5]
    assert np.count_nonzero(data["weights"]) == 2  # one key each: i + n_k − n_q


def test_unused_dout_gets_a_note(attn, tmp_path):
    np.savez(tmp_path / "case.npz", q=Q, k=K, v=V, dout=Q)
    result = attn("run", tmp_path / "case.npz", "-f", "json")
    assert result.exit_code == 0
    assert result.stderr == (
        f"attn: note: {tmp_path}/case.npz: dout is not used: the output's gradient, "
        "for a backward pass: attn grad computes it\n"
    )
    json.loads(result.stdout)


@pytest.mark.parametrize("fmt", ["npz", "safetensors"])
def test_npz_and_safetensors_outputs_read_back(attn, tmp_path, fmt):
    files = save(tmp_path, q=Q, k=K, v=V)
    for emit, shape in (("output", (2, 4, 3, 6)), ("weights", (2, 4, 3, 5))):
        result = attn("run", *files, "-f", fmt, "--emit", emit)
        assert result.exit_code == 0, result.output
        (tmp_path / f"out.{fmt}").write_bytes(result.stdout_bytes)
        if fmt == "npz":
            arrays = dict(np.load(tmp_path / f"out.{fmt}"))
        else:
            arrays = safetensors_numpy.load_file(tmp_path / f"out.{fmt}")
        assert list(arrays) == [emit] and arrays[emit].shape == shape and arrays[emit].dtype == np.float32


def test_2d_npz_output_keeps_labels(attn, samples, tmp_path):
    result = attn("run", samples / "colors.yaml", "-f", "npz")
    archive = np.load(io.BytesIO(result.stdout_bytes))
    assert sorted(archive.files) == ["output", "output_columns", "output_labels"]
    assert archive["output_columns"].tolist() == ["warm", "cool"]


def test_terminal_view_one_heatmap_per_batch_and_head(attn, tmp_path):
    files = save(tmp_path, q=Q, k=K, v=V, sinks=SINKS)
    out = attn("run", *files[:3], "--sinks", files[3], "--rope", "neox", "-f", "table").stdout
    assert out.splitlines()[0] == "attention Q 2×4×3×8 · K 2×2×5×8 · V 2×2×5×6 → output 2×4×3×6 (bhsd)"
    assert "RoPE neox (θ 10000) · sinks · grouped-query: 2 query heads per K/V head" in out.splitlines()[1]
    assert out.count("weights = softmax(scores), each row sums to less than 1 (the sink takes the rest)") == 8
    assert "batch 1 · head 3: output = weights · V" in out
    one = attn("run", *files[:3], "--batch", "1", "--head", "2", "-f", "table").stdout
    assert one.count("weights = softmax") == 1 and "batch 1 · head 2: weights" in one
    heads = attn("run", *files[:3], "--head", "0", "-f", "table").stdout
    assert heads.count("weights = softmax") == 2


def test_many_heads_are_summarised_on_a_terminal(attn, tmp_path):
    q = RNG.standard_normal((3, 4, 2, 4))
    files = save(tmp_path, q=q, k=q, v=q)
    out = attn("run", *files, "-f", "table").stdout
    assert out.count("weights = softmax") == 8
    assert (
        "… and 4 more (batch, head) pairs: choose with --batch and --head; data formats (-f json, npy) hold them all"
    ) in out


def test_float16_npy_header_says_what_it_computed_in(attn, tmp_path):
    files = save(tmp_path, q=Q.astype(np.float16), k=K.astype(np.float16), v=V.astype(np.float16))
    out = attn("run", *files, "--head", "0", "--batch", "0", "-f", "table").stdout
    assert "float16 computed in float32" in out.splitlines()[1]
    assert npy_out(attn, *files).dtype == np.float32


def test_a_3d_tensor_is_heads_without_batch(attn, tmp_path):
    files = save(tmp_path, q=Q[0], k=K[0], v=V[0])
    out = npy_out(attn, *files, "--alibi")
    expected, _ = attention(Q[0].astype(np.float64), K[0], V[0], AttentionOptions(alibi=True))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_rope_in_self_attention_heads(attn, tmp_path):
    """attn self takes the variants too: its heads are the head axis."""
    x = RNG.standard_normal((4, 8))
    np.save(tmp_path / "x.npy", x)
    data = attn.json(
        "self", tmp_path / "x.npy", "--heads", "2", "--rope", "neox", "--alibi", "--window", "1,0", random=True
    )
    assert np.array(data["weights"]).shape == (2, 4, 4)
    assert (np.count_nonzero(np.array(data["weights"]), axis=-1) == [[1, 2, 2, 2]] * 2).all()


def test_missing_extra_is_one_line_naming_it(attn, tmp_path, monkeypatch):
    path = tmp_path / "case.safetensors"
    safetensors_numpy.save_file({"q": Q, "k": K, "v": V}, path)
    bf16 = tmp_path / "bf.safetensors"
    safetensors_numpy.save_file({n: m.astype(ml_dtypes.bfloat16) for n, m in (("q", Q), ("k", K), ("v", V))}, bf16)
    monkeypatch.setitem(__import__("sys").modules, "ml_dtypes", None)  # import ml_dtypes now fails
    assert attn.fails("run", bf16) == (
        f"{bf16}: reading safetensors needs ml_dtypes, from the 'tensors' extra (pip install 'attncli[tensors]')"
    )
    attn.json("run", path)  # float32 needs no ml_dtypes
    for module in ("safetensors", "safetensors.numpy"):
        monkeypatch.setitem(__import__("sys").modules, module, None)
    assert attn.fails("run", path) == (
        f"{path}: reading safetensors needs safetensors, from the 'tensors' extra (pip install 'attncli[tensors]')"
    )
    np.save(tmp_path / "q.npy", Q)
    assert attn.fails("run", tmp_path / "q.npy", tmp_path / "q.npy", tmp_path / "q.npy", "-f", "safetensors") == (
        "writing safetensors needs safetensors, from the 'tensors' extra (pip install 'attncli[tensors]')"
    )


# ---------------------------------------------------------------- attn explain on tensors and variants


def test_explain_one_head_of_a_tensor_matches_run(attn, tmp_path):
    files = save(tmp_path, q=Q, k=K, v=V, sinks=SINKS)
    args = ["--rope", "neox", "--window", "2,0", "--sinks", files[3], "--alibi", "--softcap", "2"]
    run = attn.json("run", *files[:3], *args)
    one = attn.json("explain", *files[:3], *args, "--batch", "1", "--head", "3")
    assert (one["batch"], one["head"]) == (1, 3)
    np.testing.assert_allclose(one["weights"], np.array(run["weights"])[1, 3], atol=1e-7)
    np.testing.assert_allclose(one["output"], np.array(run["output"])[1, 3], atol=1e-7)
    np.testing.assert_allclose(one["k"], K[1, 1], atol=0)  # query head 3 reads K/V head 3 // 2 = 1
    assert one["shapes"] == {"q": [3, 8], "k": [5, 8], "v": [5, 6]}


def test_explain_names_each_variant_in_its_step(attn, tmp_path):
    files = save(tmp_path, q=Q, k=K, v=V, sinks=SINKS)
    out = attn(
        "explain",
        *files[:3],
        "--rope",
        "gptj",
        "--window",
        "2,0",
        "--sinks",
        files[3],
        "--alibi",
        "--softcap",
        "2",
        "--head",
        "1",
        "-f",
        "table",
    ).stdout
    lines = out.splitlines()
    assert lines[2] == (
        "logits = softcap(scale · q·k / temperature) + bias + ALiBi (q, k rotated by RoPE first); "
        "causal, window and mask set −∞; weights = e^logit / (Σ e^logit + e^sink)"
    )
    assert lines[3] == "batch 0 · head 1 of the tensors (--batch, --head choose another)"
    for heading in (
        "2. RoPE (gptj): Q and K rotated by position",
        "5. Soft-cap",
        "6. Mask and ALiBi",
        "7. Weights: softmax of each row",
    ):
        assert heading in lines
    assert "gptj pairs features 2i and 2i + 1 (interleaved). Keys sit at positions 0 to 4, queries at 2 to 4" in out
    assert "The window (2,0) lets query i see keys i to i + 2." in out
    assert "e^x / (Σ e^x + e^s), where s is the head's sink" in out
    assert "weights, each row sums to less than 1" in out


def test_explain_without_variants_is_unchanged(attn, samples):
    lines = attn("explain", samples / "colors.yaml", "-f", "table").stdout.splitlines()
    assert not any(line.startswith("logits = softcap") for line in lines)
    assert "2. Scores: QKᵀ" in lines


def test_nd_mask_of_0_1_and_bias_with_guard_notes(attn, tmp_path):
    """--mask takes an N-D 0/1 array, --bias an N-D array: the same weights as a boolean mask,
    and the fully-masked note names the query masked in every head, without crashing."""
    allowed = np.ones((2, 4, 3, 5), bool)
    allowed[:, :, 1, :] = False
    q_path, k_path, v_path, m_path, b_path = save(
        tmp_path, q=Q, k=K, v=V, m=allowed.astype(np.int64), b=np.where(allowed, 0.0, -np.inf)
    )
    expected, _ = heads_attention(Q, K, V, allowed=allowed)
    for flag, path in (("--mask", m_path), ("--bias", b_path)):
        result = attn("run", q_path, k_path, v_path, flag, path, "-f", "json")
        assert result.exit_code == 0, result.output
        np.testing.assert_allclose(json.loads(result.stdout)["output"], expected, rtol=1.3e-6, atol=1e-5)
        assert "query q1 may attend to no key" in result.stderr


def test_bundle_settings_of_the_variants_go_through_bundle_settings(attn, tmp_path):
    """window as "LEFT,RIGHT" or a list, softcap and rope from a bundle; the command line wins."""
    (tmp_path / "b.yaml").write_text(
        "q: [[1, 0], [0, 1]]\nk: [[1, 0], [0, 1], [1, 1]]\nv: [1, 2, 3]\n"
        "window: '1,0'\nsoftcap: 20\nrope: gptj\nrope_theta: 500\n"
    )
    data = attn.json("run", tmp_path / "b.yaml")
    assert data["window"] == [1, 0] and data["softcap"] == 20 and data["rope"]["theta"] == 500
    assert attn.json("run", tmp_path / "b.yaml", "--window", "-1,-1", "--rope-theta", "100")["window"] == [-1, -1]
    (tmp_path / "bad.yaml").write_text("q: [[1]]\nk: [[1]]\nv: [[1]]\nsoftcap: 0\n")
    line = attn.fails("run", tmp_path / "bad.yaml", code=1)
    assert line == f"{tmp_path}/bad.yaml:4: softcap must be a positive finite number, got 0.0"
