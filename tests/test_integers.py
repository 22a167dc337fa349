"""Every integer option of every command, every whole-number setting of a
bundle and of the Python API, fed any integer: negative, 0, small, n_k − 1,
n_k, past what a C long holds, up to 10^30.

The only outcomes accepted: exit 0 with the right answer, or a usage error
(exit 2, exactly one ``attn: error:`` line, nothing on stdout). The right
answer is tests/reference.py's where numbers come out (its window arithmetic
makes a side at or past the keys unbounded by itself, FlashAttention's
meaning); the same data as without the option where the option only chooses
what a view shows (--precision, --top, --batch, --head); the trace's own
weights where --layer, --head or --query pick some of them. Exit 1 only where
the existing message says an option does not fit the data's shape (a rope
dim past d_k, heads that do not divide d_attn), and for a bundle, whose
settings are bad data like the rest of the file (exit 1 or 2, one line).

The options are found from the commands themselves: every Click parameter of
an integer type, and the text options in WHOLE_NUMBER_TEXT. An option found
with no recipe here fails ``test_every_integer_option_has_a_recipe``, so a new
integer option is tested from the day it exists.

Tolerances: float64 against the float64 reference, 1e-9 (the same sums in
another order); with RoPE, plus 2^-46 · |position|: attn's angle p · θ^(−2i/d)
and the reference's p / θ^(2i/d) are each within about |p| · 2^-53 radians of
the exact one, and a score moves by at most |q| |k| times that. Gradients
against central differences of the reference (step 1e-6): 1e-6.

Runs are in-process through the command Click builds once (``run``): the same
``main`` a shell reaches, about 4× faster than CliRunner, which builds it anew
for every run.
"""

import contextlib
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.main import get_command

from attncli import AttentionOptions, attention, attention_blocked, attention_grad
from attncli.cli import app
from attncli.core.options import Rope
from attncli.errors import ShapeError, UsageError

from reference import attention as reference

COMMAND = get_command(app)
HUGE = 10**30
N_Q, N_K, D_K, D_V = 3, 5, 4, 3
POSITIONS = 2**32  # RoPE positions attn takes, either sign: float64 angles within 1e-6 radians
SPECIAL = (-HUGE, -(2**63), -1, 0, 1, N_K - 1, N_K, 2**63, HUGE)  # every one is run, for every option
INTEGERS = st.one_of(st.sampled_from(SPECIAL), st.integers(-8, 8), st.integers(-HUGE, HUGE))
PAIRS = st.tuples(INTEGERS, INTEGERS)
PAIR_EXAMPLES = (*((s, 0) for s in SPECIAL), *((0, s) for s in SPECIAL), (HUGE, HUGE), (-1, HUGE))
EXAMPLES = max(5, settings.default.max_examples // 20)  # drawn beyond the special ones (ATTN_FUZZ_EXAMPLES: more)
WHOLE_NUMBER_TEXT = {"window", "query"}  # text options that hold whole numbers: LEFT,RIGHT; a row or token


# --- running attn --------------------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    def refused(self, *codes: int) -> str:
        """The one error line of a run that failed with one of ``codes``."""
        assert self.code in codes, (self.code, self.stderr, self.stdout[:200])
        assert self.stdout == ""
        lines = self.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("attn: error: "), self.stderr
        return lines[0][len("attn: error: ") :]

    def json(self) -> dict:
        """The JSON of a successful run (notes allowed on stderr, nothing else)."""
        assert self.code == 0, self.stderr
        assert all(line.startswith("attn: note: ") for line in self.stderr.splitlines()), self.stderr
        return json.loads(self.stdout)

    def shown(self) -> None:
        """A successful run that printed a view."""
        assert self.code == 0, self.stderr
        assert self.stdout.strip()
        assert all(line.startswith("attn: note: ") for line in self.stderr.splitlines()), self.stderr


def run(*args: Any, env: dict[str, str] | None = None) -> Outcome:
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8") for _ in range(2))
    with mock.patch.dict(os.environ, env or {}), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = COMMAND.main(args=[str(a) for a in args], prog_name="attn", standalone_mode=False)
    out.flush()
    err.flush()
    return Outcome(code, out.buffer.getvalue().decode(), err.buffer.getvalue().decode())


def close(got: Any, want: Any, atol: float) -> None:
    np.testing.assert_allclose(np.array(got, dtype=np.float64), want, rtol=0, atol=atol)


# --- the data ------------------------------------------------------------------------------------


class Data:
    """Q [3, 4], K [5, 4], V [5, 3] and dO [3, 3]; the same as tensors [2, 2, n, d]; X [3, 4] for
    attn self with identity projections (Q = K = V = X); the tiny BERT for attn trace."""

    def __init__(self, folder: Path) -> None:
        rng = np.random.default_rng(23)
        self.folder = folder
        self.arrays = {
            "q": rng.normal(size=(N_Q, D_K)),
            "k": rng.normal(size=(N_K, D_K)),
            "v": rng.normal(size=(N_K, D_V)),
            "dout": rng.normal(size=(N_Q, D_V)),
            "qt": rng.normal(size=(2, 2, N_Q, D_K)),
            "kt": rng.normal(size=(2, 2, N_K, D_K)),
            "vt": rng.normal(size=(2, 2, N_K, D_V)),
            "doutt": rng.normal(size=(2, 2, N_Q, D_V)),
            "x": rng.normal(size=(N_Q, D_K)),
            "eye": np.eye(D_K),
        }
        self.arrays["out"] = reference(self.arrays["q"], self.arrays["k"], self.arrays["v"])[0]
        for name, values in self.arrays.items():
            np.save(self.path(name), values)
        self._model: Path | None = None
        self._decoder: Path | None = None
        self._plain: dict[tuple[str, bool], dict] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.npy"

    def files(self, *names: str) -> list[Path]:
        return [self.path(name) for name in names]

    @property
    def model(self) -> Path:
        if self._model is None:
            pytest.importorskip("safetensors")
            pytest.importorskip("tokenizers")
            from test_trace import write_model

            self._model = write_model(self.folder / "tiny-bert")
        return self._model

    @property
    def decoder(self) -> Path:
        """A tiny GPT-2 (32 positions) for the decoders' options of attn trace."""
        if self._decoder is None:
            import decoder_models as dm

            self._decoder = dm.refs.write_folder(self.folder / "gpt2", "gpt2", tokenizer=dm.refs.train_tokenizer())
        return self._decoder

    def plain(self, command: str, tensors: bool = False) -> list[Any]:
        """The arguments of a run of ``command`` with no integer option given."""
        qkv = self.files("qt", "kt", "vt") if tensors else self.files("q", "k", "v")
        return {
            "run": qkv,
            "explain": qkv,
            "grad": [*qkv, "--dout", self.path("doutt" if tensors else "dout")],
            "check": [self.path("out"), *qkv],
            "self": [self.path("x")],
            "softmax": ["4", "-1", "2.1"],
            "lookup": ["fruit", "--keys", "apple", "--keys", "pear"],
            "trace": ["the pink elephant", "--model", self.model] if command == "trace" else [],
        }[command]

    def plain_json(self, command: str, tensors: bool = False) -> dict:
        """The JSON of the plain run of ``command`` (made once)."""
        if (command, tensors) not in self._plain:
            self._plain[command, tensors] = run(command, *self.plain(command, tensors), "-f", "json").json()
        return self._plain[command, tensors]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Data:
    return Data(tmp_path_factory.mktemp("integers"))


# --- the answers ---------------------------------------------------------------------------------

STEP = 1e-6


def numeric_grads(q, k, v, dout, **options) -> dict[str, np.ndarray]:
    """dQ, dK, dV of Σ O ∘ dO by central differences of the reference."""
    inputs = {"dq": q.copy(), "dk": k.copy(), "dv": v.copy()}

    def loss() -> float:
        return float(np.sum(reference(inputs["dq"], inputs["dk"], inputs["dv"], **options)[0] * dout))

    grads = {}
    for name, x in inputs.items():
        grads[name] = np.zeros_like(x)
        for cell in np.ndindex(x.shape):
            old = x[cell]
            x[cell] = old + STEP
            up = loss()
            x[cell] = old - STEP
            down = loss()
            x[cell] = old
            grads[name][cell] = (up - down) / (2 * STEP)
    return grads


def attends(
    command: str, data: Data, args: list[Any], options: dict | None, refused: int = 2, atol: float = 1e-9
) -> str | None:
    """``command`` on Q, K, V (attn self: on X with identity projections) with ``args``: the
    reference's answer under ``options``, or (options None) refused with exit ``refused``, its line."""
    q, k, v = (data["x"],) * 3 if command == "self" else (data["q"], data["k"], data["v"])
    if command == "self":
        eye = data.path("eye")
        base = [data.path("x"), "--wq", eye, "--wk", eye, "--wv", eye]
    elif command == "check":
        out = data.folder / "check-out.npy"
        np.save(out, reference(q, k, v, **options)[0] if options is not None else data["out"])
        base = [out, *data.files("q", "k", "v"), "--atol", atol]
    else:
        base = data.plain(command)
    outcome = run(command, *base, *args, "-f", "json")
    if options is None:
        return outcome.refused(refused)
    got = outcome.json()
    want_out, want_weights = reference(q, k, v, **options)
    if command == "check":
        assert got["passed"] is True
    elif command == "grad":
        for name, want in numeric_grads(q, k, v, data["dout"], **options).items():
            close(got[name], want, atol + 1e-6)
    else:
        close(got["weights"][0] if command == "self" else got["weights"], want_weights, atol)
        close(got["output"], want_out, atol)
    return None


# --- the recipes: for each option, its runs and what is right ------------------------------------


def window(command: str, value: tuple[int, int], data: Data) -> None:
    left, right = value
    valid = left >= -1 and right >= -1
    line = attends(command, data, ["--window", f"{left},{right}"], {"window": (left, right)} if valid else None)
    if not valid:
        side, n = ("left", left) if left < -1 else ("right", right)
        assert line == (
            f"the window's {side} side must be a whole number ≥ -1, got {n} (-1 means unbounded on that side)"
        )


def rope_offset(command: str, value: int, data: Data) -> None:
    last = value + N_Q - 1  # attn self: 3 rows of X, as Q has
    valid = -POSITIONS <= value and last <= POSITIONS
    options = {"rope": ("neox", 10000.0, None, value)} if valid else None
    line = attends(
        command,
        data,
        ["--rope", "neox", "--rope-offset", value],
        options,
        atol=1e-9 + 2**-46 * max(abs(value), abs(last)),
    )
    if line is not None and abs(value) > POSITIONS:
        assert line.startswith(f"rope offset {value} is outside ±2^32 (±4,294,967,296) (")
    elif line is not None:
        assert line.startswith(f"the last query's RoPE position, {value:,} + 2, is past 2^32 (4,294,967,296) (")


def rope_dim(command: str, value: int, data: Data) -> None:
    args = ["--rope", "neox", "--rope-dim", value]
    if value < 2 or value % 2:
        line = attends(command, data, args, None)
        assert line == f"rope dim must be a positive even number, got {value} (features are rotated in pairs)"
    elif value > D_K:  # Q and K's shape: bad data for this option, as the catalogue has it
        line = attends(command, data, args, None, refused=1)
        assert line == f"rope dim is {value} but Q and K have d_k = {D_K} (rotate at most every feature of a head)"
    else:
        attends(command, data, args, {"rope": ("neox", 10000.0, value, None)})


def view_option(flag: str, low: int, high: float, view: list[str] = ()) -> Callable[[str, int, Data], None]:
    """An option that only changes what a view shows, valid from ``low`` to ``high``: its JSON is
    the plain run's, and the view is drawn; else refused."""

    def check(command: str, value: int, data: Data) -> None:
        args = [*data.plain(command), flag, value]
        if not low <= value <= high:
            run(command, *args, "-f", "json").refused(2)
            return
        assert run(command, *args, "-f", "json").json() == data.plain_json(command)
        run(command, *args, *view, "-f", "table").shown()

    return check


def tensor_view(flag: str) -> Callable[[str, int, Data], None]:
    """--batch/--head over tensors [2, 2, n, d]: run and grad keep every batch and head in their
    data (the JSON is the plain run's) and show the one chosen; explain explains that one."""

    def check(command: str, value: int, data: Data) -> None:
        args = [*data.plain(command, tensors=True), flag, value]
        if not 0 <= value < 2:
            run(command, *args, "-f", "json").refused(2)
            return
        got = run(command, *args, "-f", "json").json()
        if command == "explain":
            b, h = (value, 0) if flag == "--batch" else (0, value)
            want_out, want_weights = reference(data["qt"][b, h], data["kt"][b, h], data["vt"][b, h])
            close(got["weights"], want_weights, 1e-9)
            close(got["output"], want_out, 1e-9)
        else:
            assert got == data.plain_json(command, tensors=True)
        run(command, *args, "-f", "table").shown()

    return check


def explain_query(command: str, value: int, data: Data) -> None:
    outcome = run("explain", *data.plain("explain"), "--query", value, "-f", "json")
    if not 0 <= value < N_Q:
        assert outcome.refused(2) == f"--query {value}: no such query (Q has rows 0 to 2; give a number or a label)"
        return
    got = outcome.json()
    assert got["query_index"] == value
    want_out, want_weights = reference(data["q"], data["k"], data["v"])
    close(got["weights"], want_weights, 1e-9)
    close(got["output"], want_out, 1e-9)


def self_query(command: str, value: int, data: Data) -> None:
    """attn self --explain --query N: the token at row N of X, else refused."""
    eye = data.path("eye")
    outcome = run(
        "self", data.path("x"), "--wq", eye, "--wk", eye, "--wv", eye, "--explain", "--query", value, "-f", "json"
    )
    if not 0 <= value < N_Q:
        assert outcome.refused(2) == f"--query {value}: no such query (X has rows 0 to 2; give a number or a label)"
        return
    got = outcome.json()["explain"]
    assert got["query_index"] == value
    want_out, want_weights = reference(data["x"], data["x"], data["x"])
    close(got["weights"], want_weights[value], 1e-9)
    close(got["output"], want_out[value], 1e-9)


def self_heads(command: str, value: int, data: Data) -> None:
    eye = data.path("eye")
    outcome = run("self", data.path("x"), "--wq", eye, "--wk", eye, "--wv", eye, "--heads", value, "-f", "json")
    if value < 1:
        outcome.refused(2)
    elif D_K % value:  # W_Q's shape: the catalogue's exit 1
        assert outcome.refused(1) == (
            f"W_Q is 4×4: d_attn = 4 does not split into {value} heads (the number of heads must divide d_attn)"
        )
    else:
        got, x, d = outcome.json(), data["x"], D_K // value
        outputs = []
        for h in range(value):
            part = x[:, h * d : (h + 1) * d]
            out, weights = reference(part, part, part)
            close(got["weights"][h], weights, 1e-9)
            outputs.append(out)
        close(got["output"], np.hstack(outputs), 1e-9)


def self_head(command: str, value: int, data: Data) -> None:
    eye = data.path("eye")
    args = [data.path("x"), "--wq", eye, "--wk", eye, "--wv", eye, "--heads", "2"]
    if not 0 <= value < 2:
        run("self", *args, "--head", value, "-f", "json").refused(2)
        return
    assert run("self", *args, "--head", value, "-f", "json").json() == run("self", *args, "-f", "json").json()
    run("self", *args, "--head", value, "-f", "table").shown()


def projected(got: dict) -> None:
    """attn self's weights and output are the reference's on the projections it reports (one head)."""
    out, weights = reference(np.array(got["q"]), np.array(got["k"]), np.array(got["v"]))
    close(got["weights"][0], weights, 1e-9)
    close(got["output"], out, 1e-9)


def self_seed(command: str, value: int, data: Data) -> None:
    outcome = run("self", data.path("x"), "--seed", value, "-f", "json")
    if value < 0:
        outcome.refused(2)
        return
    got = outcome.json()
    assert got["seed"] == value and got["random"] == ["W_Q", "W_K", "W_V"]
    projected(got)


LIMIT = 4096  # ATTN_MAX_ELEMENTS for --d-attn and --d-out: past D_K × 1024 a random W is refused


def self_width(flag: str, key: str) -> Callable[[str, int, Data], None]:
    """--d-attn and --d-out: a random W_Q, W_K (W_V) that wide, within ATTN_MAX_ELEMENTS."""

    def check(command: str, value: int, data: Data) -> None:
        outcome = run("self", data.path("x"), flag, value, "-f", "json", env={"ATTN_MAX_ELEMENTS": str(LIMIT)})
        if value < 1:
            outcome.refused(2)
        elif D_K * value > LIMIT:
            assert f"more than the limit of {LIMIT:,}" in outcome.refused(2)
        else:
            got = outcome.json()
            assert got[key] == value
            projected(got)

    return check


def trace_pick(axis: int, flag: str, n: int) -> Callable[[str, int, Data], None]:
    """--layer, --head (from 0; negative counts from the end) and --query (a position): the
    trace's weights [layer, head, query, key] at that index, else refused."""

    def check(command: str, value: int, data: Data) -> None:
        outcome = run("trace", *data.plain("trace"), flag, value, "-f", "json")
        if not -n <= value < n:
            outcome.refused(2)
            return
        got, whole = outcome.json(), data.plain_json("trace")
        assert got[{0: "layers", 1: "heads", 2: "queries"}[axis]] == [value % n]
        np.testing.assert_array_equal(
            np.array(got["weights"]), np.take(np.array(whole["weights"]), [value % n], axis=axis)
        )

    return check


def check_rows(command: str, value: int, data: Data) -> None:
    """--rows K: at least the 2 edge rows of 3 (the first and the last), all 3 from 3 on."""
    outcome = run("check", *data.plain("check"), "--rows", value, "-f", "json")
    if value < 2:
        outcome.refused(2)
        return
    got = outcome.json()
    assert got["passed"] and got["rows"]["checked"] == min(value, N_Q) and got["rows"]["of"] == N_Q
    close(got["max_abs_error"], data.plain_json("check")["max_abs_error"], 1e-12)


def check_seed(command: str, value: int, data: Data) -> None:
    """--seed S with --rows: any seed below 2^32, said back."""
    outcome = run("check", *data.plain("check"), "--rows", 2, "--seed", value, "-f", "json")
    if not 0 <= value < 2**32:
        outcome.refused(2)
        return
    got = outcome.json()
    assert got["rows"]["seed"] == value and got["rows"]["index"] == [0, N_Q - 1]


def trace_top_next(command: str, value: int, data: Data) -> None:
    """--top-next K: a decoder's K likeliest next tokens (at most its vocabulary), largest first;
    0 for none; an encoder predicts nothing."""
    outcome = run("trace", "the pink elephant", "-m", data.decoder, "--layer", "0", "--top-next", value, "-f", "json")
    encoder = run("trace", *data.plain("trace"), "--top-next", value, "-f", "json")
    if value < 0:
        outcome.refused(2)
        encoder.refused(2)
        return
    got = outcome.json()
    if value == 0:
        assert "next" not in got
        assert encoder.json() == data.plain_json("trace")
        return
    p = got["next"]["probabilities"]
    assert len(p) == min(value, 320) and p == sorted(p, reverse=True) and sum(p) <= 1 + 1e-9
    assert encoder.refused(2).startswith("--top-next: BERT is an encoder")


def trace_generate(command: str, value: int, data: Data) -> None:
    """--generate N: N more tokens, greedy (fewer after an end-of-text token), within the
    decoder's 32 positions; refused past them and on an encoder."""
    outcome = run("trace", "the pink elephant", "-m", data.decoder, "--layer", "0", "--generate", value, "-f", "json")
    prompt = 7  # "the pink elephant" in the tiny tokenizer's tokens
    if value < 0:
        outcome.refused(2)
    elif prompt + value > 32:
        assert outcome.refused(1) == (
            f"the text is {prompt} tokens and {value} more to generate but the model takes at most 32 "
            "(shorten it or generate fewer)"
        )
    else:
        got = outcome.json()
        generated = got.get("generated", [])
        assert len(got["tokens"]) == prompt + len(generated) and len(generated) <= value
        assert (len(generated) == value) or generated[-1] == "<|endoftext|>"
    if value > 0:
        assert run("trace", *data.plain("trace"), "--generate", value).refused(2).startswith("--generate: BERT")


def model_layer(command: str, value: int, data: Data) -> None:
    """--layer with --model: a Llama config.json of 2 layers, one head of D_K features (each
    layer derives scale 1/√4, causal bottom-right and RoPE neox θ 10000); else refused."""
    config = data.folder / "llama-config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": D_K,
                "num_hidden_layers": 2,
                "num_attention_heads": 1,
                "max_position_embeddings": 64,
            }
        )
    )
    valid = 0 <= value < 2
    options = {"scale": 0.5, "causal": "bottom-right", "rope": ("neox", 10000.0, None, None)} if valid else None
    line = attends(command, data, ["--model", config, "--layer", value], options, atol=1e-9 + 2**-46 * N_K)
    if line is not None and value >= 2:
        assert line == f"--layer {value} is out of range: {config} has 2 layers (give a layer from 0 to 1)"


@dataclass(frozen=True)
class Recipe:
    check: Callable[[str, Any, Data], None]
    values: st.SearchStrategy = INTEGERS
    examples: tuple = SPECIAL


# By parameter name, or (command, name) where a name means another thing in that command.
RECIPES: dict[Any, Recipe] = {
    "window": Recipe(window, PAIRS, PAIR_EXAMPLES),
    "rope_offset": Recipe(rope_offset, examples=(*SPECIAL, POSITIONS - 2, POSITIONS - 1, -POSITIONS, -POSITIONS - 1)),
    "rope_dim": Recipe(rope_dim, examples=(*SPECIAL, 2, 3, 6)),
    "precision": Recipe(view_option("--precision", 0, 17), examples=(*SPECIAL, 17, 18)),
    "top": Recipe(view_option("--top", 1, float("inf"), ["--view", "top"])),
    "batch": Recipe(tensor_view("--batch")),
    "head": Recipe(tensor_view("--head")),
    "layer": Recipe(model_layer, examples=(*SPECIAL, 2)),
    ("explain", "query"): Recipe(explain_query, examples=(*SPECIAL, 2, 3)),
    ("self", "query"): Recipe(self_query, examples=(*SPECIAL, 2, 3)),
    ("self", "heads"): Recipe(self_heads, examples=(*SPECIAL, 2, 3)),
    ("self", "head"): Recipe(self_head),
    ("self", "seed"): Recipe(self_seed, examples=(*SPECIAL, 2**32, 2**64 + 1)),
    ("self", "d_attn"): Recipe(self_width("--d-attn", "d_attn"), examples=(*SPECIAL, 1024, 1025)),
    ("self", "d_out"): Recipe(self_width("--d-out", "d_out"), examples=(*SPECIAL, 1024, 1025)),
    ("trace", "layers"): Recipe(trace_pick(0, "--layer", 2), examples=(*SPECIAL, -2, -3, 2)),
    ("trace", "heads"): Recipe(trace_pick(1, "--head", 2), examples=(*SPECIAL, -2, -3, 2)),
    ("trace", "query"): Recipe(trace_pick(2, "--query", 5), examples=(*SPECIAL, -5, -6)),
    ("check", "rows"): Recipe(check_rows, examples=(*SPECIAL, 2, 3)),
    ("check", "seed"): Recipe(check_seed, examples=(*SPECIAL, 2**32 - 1, 2**32)),
    ("trace", "top_next"): Recipe(trace_top_next, examples=(*SPECIAL, 319, 320, 321)),
    ("trace", "generate"): Recipe(trace_generate, examples=(*SPECIAL, 25, 26)),
}


# --- the options, found from the commands --------------------------------------------------------


def whole_numbers(param: Any) -> bool:
    """Whether a Click parameter takes whole numbers (int, or a list of them), in either way Typer
    describes its type: a ``type_descriptor`` (0.27 and later) or Click's ``type`` (0.26)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        return descriptor.annotation in (int, list[int])
    return getattr(getattr(param, "type", None), "name", "") in ("integer", "integer range")


def integer_options() -> list[tuple[str, str]]:
    """(command, parameter name) of every option or argument that takes whole numbers."""
    return [
        (name, param.name)
        for name, command in sorted(COMMAND.commands.items())
        for param in command.params
        if whole_numbers(param) or param.name in WHOLE_NUMBER_TEXT
    ]


OPTIONS = integer_options()


def recipe_of(command: str, name: str) -> Recipe | None:
    return RECIPES.get((command, name), RECIPES.get(name))


def test_every_integer_option_has_a_recipe():
    assert {
        ("run", "window"),
        ("run", "rope_offset"),
        ("run", "top"),
        ("self", "heads"),
        ("self", "d_attn"),
        ("trace", "layers"),
        ("trace", "query"),
        ("explain", "query"),
        ("self", "query"),
        ("softmax", "precision"),
    } <= set(OPTIONS)
    missing = [f"attn {command} {name}" for command, name in OPTIONS if recipe_of(command, name) is None]
    assert not missing, f"integer options with no input recipe in tests/test_integers.py: {missing}"


@pytest.mark.parametrize(("command", "name"), OPTIONS, ids=[f"{c} {n}" for c, n in OPTIONS])
def test_every_integer_option_takes_any_integer(data, command, name):
    recipe = recipe_of(command, name)
    if recipe is None:
        pytest.fail(f"no input recipe for attn {command} {name}")
    if command == "trace":
        data.model  # noqa: B018 - skips without safetensors and tokenizers

    def attempt(value):
        recipe.check(command, value, data)

    for value in recipe.examples:
        attempt = example(value)(attempt)
    settings(max_examples=EXAMPLES)(given(recipe.values)(attempt))()


# --- the same numbers as bundle settings ---------------------------------------------------------


def bundle_settings() -> list[tuple[str, str]]:
    """(command, setting) of the integer options a bundle may set: run's (those of every
    command that reads Q, K, V) and self's."""
    from attncli.cli.attention import setting_names
    from attncli.cli.self_inputs import SELF_SETTINGS

    accepted = {"run": set(setting_names()), "self": set(setting_names()) | set(SELF_SETTINGS)}
    return [(command, name) for command, name in OPTIONS if name in accepted.get(command, ())]


SETTINGS = bundle_settings()


def write_bundle(folder: Path, fmt: str, arrays: dict[str, np.ndarray], settings: dict[str, Any]) -> Path:
    """A YAML or JSON bundle of these arrays (every float written exactly) and settings."""
    path = folder / f"bundle.{fmt}"
    if fmt == "json":
        path.write_text(json.dumps({**{n: a.tolist() for n, a in arrays.items()}, **settings}))
        return path
    lines = [f"{n}: {json.dumps(a.tolist())}" for n, a in arrays.items()]
    lines += [f"{n}: {json.dumps(list(s) if isinstance(s, tuple) else s)}" for n, s in settings.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_bundle_settings_are_found():
    assert {
        ("run", "window"),
        ("run", "rope_offset"),
        ("run", "rope_dim"),
        ("self", "heads"),
        ("self", "seed"),
        ("self", "d_attn"),
        ("self", "d_out"),
    } <= set(SETTINGS)


@pytest.mark.parametrize(("command", "name"), SETTINGS, ids=[f"{c} {n}" for c, n in SETTINGS])
def test_bundle_settings_take_any_integer_as_their_options_do(data, command, name):
    """The setting with any value does what its option does with it: the same answer, or refused
    in one line (exit 1 for a bundle's bad data, or 2)."""
    recipe = recipe_of(command, name)
    assert recipe is not None
    env = {"ATTN_MAX_ELEMENTS": str(LIMIT)}

    def attempt(value):
        flag = "--" + name.replace("_", "-")
        typed = f"{value[0]},{value[1]}" if isinstance(value, tuple) else value
        extra = {"rope": "neox"} if name.startswith("rope_") else {}
        if command == "self":
            arrays, files = {"x": data["x"]}, [data.path("x")]
        else:
            arrays, files = {n: data[n] for n in "qkv"}, data.files("q", "k", "v")
        by_flag = run(command, *files, *(["--rope", "neox"] if extra else []), flag, typed, "-f", "json", env=env)
        for fmt in ("yaml", "json"):
            bundle = write_bundle(data.folder, fmt, arrays, {**extra, name: value})
            by_setting = run(command, bundle, "-f", "json", env=env)
            if by_flag.code == 0:
                got, want = by_setting.json(), by_flag.json()
                for key in ("weights", "output", "seed", "heads", "d_attn", "d_out"):
                    assert got.get(key) == want.get(key), (fmt, key)
            else:
                by_setting.refused(1, 2)

    for value in recipe.examples:
        attempt = example(value)(attempt)
    settings(max_examples=EXAMPLES)(given(recipe.values)(attempt))()


def test_a_window_in_a_self_bundle_is_a_setting(data, tmp_path):
    """window: [1, 0] in attn self's bundle is the setting, not an unexpected entry (a list is read as a matrix)."""
    bundle = write_bundle(tmp_path, "yaml", {"x": data["x"]}, {"window": (1, 0)})
    by_flag = run("self", data.path("x"), "--window", "1,0", "-f", "json").json()
    assert run("self", bundle, "-f", "json").json() == by_flag


# --- the Python API ------------------------------------------------------------------------------


@given(PAIRS)
@example((HUGE, 0))
@example((0, HUGE))
@example((2**63, 2**64))
@example((-1, HUGE))
def test_the_api_takes_any_window(data, window):
    q, k, v, dout = data["q"], data["k"], data["v"], data["dout"]
    if min(window) < -1:
        with pytest.raises(UsageError):
            AttentionOptions(window=window)
        return
    want_out, want_weights = reference(q, k, v, window=window)
    for implementation in ("reference", "blocked"):
        out, weights = attention(q, k, v, window=window, implementation=implementation)
        close(out, want_out, 1e-9)
        if weights is not None:
            close(weights, want_weights, 1e-9)
    close(attention_blocked(q, k, v, AttentionOptions(window=window), query_block=2, key_block=2), want_out, 1e-9)
    grads = attention_grad(q, k, v, dout, AttentionOptions(window=window))
    for name, want in numeric_grads(q, k, v, dout, window=window).items():
        close(getattr(grads, name), want, 1e-6)


@given(INTEGERS, INTEGERS)
@example(HUGE, 2)
@example(-HUGE, 2)
@example(POSITIONS - 2, HUGE)
@example(POSITIONS - 1, 4)
def test_the_api_takes_any_rope_offset_and_dim(data, offset, dim):
    q, k, v = data["q"], data["k"], data["v"]
    if abs(offset) > POSITIONS or dim < 2 or dim % 2:
        with pytest.raises(UsageError):
            Rope("neox", dim=dim, offset=offset)
        return
    options = AttentionOptions(rope=Rope("neox", dim=dim, offset=offset))
    if dim > D_K:
        with pytest.raises(ShapeError):
            attention(q, k, v, options)
        return
    if offset + N_Q - 1 > POSITIONS:
        with pytest.raises(UsageError):
            attention(q, k, v, options)
        return
    want_out, want_weights = reference(q, k, v, rope=("neox", 10000.0, dim, offset))
    out, weights = attention(q, k, v, options)
    atol = 1e-9 + 2**-46 * (abs(offset) + N_Q)
    close(out, want_out, atol)
    close(weights, want_weights, atol)


SCALINGS = {  # each kind of RoPE scaling with its other fields, those of the models that use it
    "dynamic": {"factor": 2.0},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    "yarn": {"factor": 4.0},
    "longrope": {"factor": 4.0, "short_factor": [1.0, 1.5], "long_factor": [2.0, 3.0]},
}


@given(st.sampled_from(sorted(SCALINGS)), INTEGERS)
@example("dynamic", HUGE)
@example("yarn", 2**63)
@example("longrope", POSITIONS)
@example("llama3", POSITIONS + 1)
@example("dynamic", 10**400)
def test_the_api_takes_any_original_context_length(data, kind, length):
    """RoPE scaling's original_max_position_embeddings (a context length): from 1 (2 for longrope's
    default attention factor) to 2^32, weights that are distributions; else UsageError. (The
    numbers themselves are checked against transformers in tests/test_rope_scaling.py.)"""
    from attncli import RopeScaling

    if not 1 <= length <= POSITIONS or (kind == "longrope" and length < 2):
        with pytest.raises(UsageError) as refused:
            RopeScaling(kind, original_max_position_embeddings=length, **SCALINGS[kind])
        if length > POSITIONS:
            assert str(refused.value) == (
                f"rope scaling's original_max_position_embeddings {length} is past 2^32 "
                "(4,294,967,296) (it is a context length; float64 keeps RoPE angles "
                "within 1e-6 radians only up to position 2^32)"
            )
        return
    rope = Rope("neox", scaling=RopeScaling(kind, original_max_position_embeddings=length, **SCALINGS[kind]))
    out, weights = attention(data["q"], data["k"], data["v"], rope=rope)
    assert np.isfinite(out).all()
    close(weights.sum(axis=-1), np.ones(N_Q), 1e-12)
