"""No command can write over, append to or replace one of its inputs.

The output guard is structural: every parameter that names files is marked
READS or WRITES where it is declared (``cli/paths.py``), and the command
class runs the guard before any command (``cli/command.py``). These tests
enumerate every registered command × every output it can write (each
picture option, and stdout appended onto a file) × every kind of input it
takes (each file option and argument, a bundle, stdin) × every way of naming
that input (its path, a symlink, a hard link, /dev/fd/N, /dev/stdin), and
check exit 2, one line on stderr, nothing on stdout and the input's bytes
unchanged. A second test fails when a command, or a file parameter of one,
exists that the first does not cover.

The commands run in this process with real files as stdin and stdout, so
that the guard sees the file descriptors a shell would give it.
"""

from __future__ import annotations

import io
import os
import sys
import typing
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import typer.main

from attncli.cli.app import app
from attncli.cli.command import OnceCommand
from attncli.cli.paths import Reads, Writes, path_roles

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array))
    return buffer.getvalue()


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


_rng = np.random.default_rng(0)
Q, K, V = _rng.normal(size=(1, 2, 3, 4)), _rng.normal(size=(1, 2, 5, 4)), _rng.normal(size=(1, 2, 5, 4))

# Every input file a recipe may name, by name: what it holds.
FILES: dict[str, bytes] = {
    "q.npy": _npy(Q),
    "k.npy": _npy(K),
    "v.npy": _npy(V),
    "out.npy": _npy(np.zeros((1, 2, 3, 4))),
    "mask.npy": _npy(np.ones((3, 5), bool)),
    "bias.npy": _npy(np.zeros((3, 5))),
    "sinks.npy": _npy(np.zeros(2)),
    "slopes.npy": _npy(np.array([0.5, 0.25])),
    "dout.npy": _npy(np.ones((1, 2, 3, 4))),
    "bundle.npz": _npz(q=Q, k=K, v=V, dout=np.ones((1, 2, 3, 4))),
    "grads.npz": _npz(dq=np.zeros_like(Q), dk=np.zeros_like(K), dv=np.zeros_like(V)),
    "dq.npy": _npy(np.zeros_like(Q)),
    "dk.npy": _npy(np.zeros_like(K)),
    "dv.npy": _npy(np.zeros_like(V)),
    "x.csv": b"1,0,0,1\n0,1,0,1\n0,0,1,1\n",
    "z.csv": b"1,1,0,0\n0,1,1,0\n",
    **{f"{w}.csv": b"1,0,0,0\n0,1,0,0\n0,0,1,0\n0,0,0,1\n" for w in ("wq", "wk", "wv", "wo")},
    **{f"{b}.csv": b"0,0,0,0\n" for b in ("bq", "bk", "bv", "bo")},
    "self.yaml": b"x: [[1, 0], [0, 1], [1, 1]]\n",
    "self-mask.npy": _npy(np.ones((3, 2), bool)),
    "self-bias.npy": _npy(np.zeros((3, 2))),
    "self-sinks.npy": _npy(np.zeros(1)),
    "self-slopes.npy": _npy(np.array([0.5])),
    "numbers.txt": b"4.0 -1.0 2.1\n",
    "sentence.txt": b"the pink elephant\n",
    "fruit.yaml": (SAMPLES / "fruit.yaml").read_bytes(),
    "vectors.txt": b"fruit 1 0 0\napple 0.9 0.1 0\nbanana 0.8 0 0.2\nchair 0 0 1\nthe 1 1 0\npink 0 1 1\n"
    b"elephant 1 0 1\n",
    "vectors.npy": _npy(np.eye(4)),
    "words.txt": b"fruit\napple\nbanana\nchair\n",
    "model/config.json": b'{"model_type": "bert"}\n',
    # --model on the attention commands: Llama's settings for Q [1, 2, 3, 4] (and X's one head of 4)
    "llama.json": b'{"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, '
    b'"max_position_embeddings": 64}\n',
    "llm/config.json": b'{"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, '
    b'"max_position_embeddings": 64}\n',
    "self-llama.json": b'{"model_type": "llama", "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 1, '
    b'"max_position_embeddings": 64}\n',
    "model.gguf": b"GGUF\x03\x00\x00\x00" + bytes(16),  # a GGUF's header over nothing: the guard runs before it is read
}

# command -> invocations, each an argument list in which "@name" is a file of FILES,
# "<name" says that stdin is that file and "!out" is where a command's output argument goes
# (convert's DIR). Between them they name every input each command takes.
RECIPES: dict[str, list[list[str]]] = {
    "run": [
        [
            "@q.npy",
            "@k.npy",
            "@v.npy",
            "--mask",
            "@mask.npy",
            "--bias",
            "@bias.npy",
            "--sinks",
            "@sinks.npy",
            "--alibi-slopes",
            "@slopes.npy",
        ],
        ["@bundle.npz"],
        ["-", "@k.npy", "@v.npy", "<q.npy"],
        ["@q.npy", "@k.npy", "@v.npy", "--model", "@llama.json", "--layer", "0"],
        ["@q.npy", "@k.npy", "@v.npy", "--model", "@llm"],
    ],
    "explain": [
        [
            "@q.npy",
            "@k.npy",
            "@v.npy",
            "--mask",
            "@mask.npy",
            "--bias",
            "@bias.npy",
            "--sinks",
            "@sinks.npy",
            "--alibi-slopes",
            "@slopes.npy",
            "--grad",
            "--dout",
            "@dout.npy",
        ],
        ["@bundle.npz"],
        ["@q.npy", "-", "@v.npy", "<k.npy"],
        ["@q.npy", "@k.npy", "@v.npy", "--model", "@llama.json"],
    ],
    "check": [
        [
            "@out.npy",
            "@q.npy",
            "@k.npy",
            "@v.npy",
            "--mask",
            "@mask.npy",
            "--bias",
            "@bias.npy",
            "--sinks",
            "@sinks.npy",
            "--alibi-slopes",
            "@slopes.npy",
        ],
        ["@out.npy", "@bundle.npz"],
        ["-", "@q.npy", "@k.npy", "@v.npy", "<out.npy"],
        ["--grad", "@grads.npz", "@q.npy", "@k.npy", "@v.npy", "--dout", "@dout.npy"],
        ["--grad", "@dq.npy", "@dk.npy", "@dv.npy", "@bundle.npz"],
        ["@out.npy", "@q.npy", "@k.npy", "@v.npy", "--model", "@llama.json"],
    ],
    "grad": [
        [
            "@q.npy",
            "@k.npy",
            "@v.npy",
            "--dout",
            "@dout.npy",
            "--mask",
            "@mask.npy",
            "--bias",
            "@bias.npy",
            "--sinks",
            "@sinks.npy",
            "--alibi-slopes",
            "@slopes.npy",
        ],
        ["@bundle.npz"],
        ["@q.npy", "@k.npy", "@v.npy", "--dout", "-", "<dout.npy"],
        ["@q.npy", "@k.npy", "@v.npy", "--dout", "@dout.npy", "--model", "@llama.json"],
    ],
    "softmax": [["-", "<numbers.txt"]],
    "lookup": [
        ["fruit", "--dict", "@fruit.yaml", "--vectors", "@vectors.txt"],
        ["fruit", "--keys", "apple,banana", "--vectors", "@vectors.npy", "--words", "@words.txt"],
        ["fruit", "--keys", "apple", "--model", "@model"],
    ],
    "self": [
        [
            "@x.csv",
            "--context",
            "@z.csv",
            "--wq",
            "@wq.csv",
            "--wk",
            "@wk.csv",
            "--wv",
            "@wv.csv",
            "--wo",
            "@wo.csv",
            "--bq",
            "@bq.csv",
            "--bk",
            "@bk.csv",
            "--bv",
            "@bv.csv",
            "--bo",
            "@bo.csv",
            "--mask",
            "@self-mask.npy",
            "--bias",
            "@self-bias.npy",
            "--sinks",
            "@self-sinks.npy",
            "--alibi-slopes",
            "@self-slopes.npy",
        ],
        ["@self.yaml"],
        ["-", "<x.csv"],
        ["@x.csv", "--model", "@self-llama.json"],
        ["the pink elephant", "--vectors", "@vectors.npy", "--words", "@words.txt", "--unknown", "zero"],
    ],
    "trace": [["-", "--model", "@model", "<sentence.txt"]],
    "convert": [["@model.gguf", "!out"]],
}

# Parameters that hold text, never a file name: the second test requires every other string
# parameter of a command to be marked READS or WRITES.
NOT_PATHS = {"window", "delimiter", "query", "queries", "keys", "values", "grad_factor", "emit"}

WAYS = ("path", "symlink", "hard link", "/dev/fd/N")


GROUP = typer.main.get_command(app)  # built once: Typer builds every command anew per call


def _commands() -> dict[str, typing.Any]:
    """Every registered command, by name (the group builds each when asked)."""
    return dict(GROUP.commands)  # type: ignore[attr-defined]


def _outputs(command: str) -> list[str]:
    """What a command writes besides stdout: its picture options (--svg, --html, --png, --pdf),
    and "!out" for an output argument (convert's DIR)."""
    cmd = _commands()[command]
    roles = path_roles(cmd.callback)
    return [
        max(p.opts, key=len) if p.param_type_name == "option" else "!out"
        for p in cmd.params
        if isinstance(roles.get(p.name), Writes)
    ]


def _inputs(recipe: list[str]) -> list[str]:
    """The files a recipe reads: its "@name" arguments and the file behind stdin."""
    names = [arg[1:] for arg in recipe if arg.startswith(("@", "<"))]
    return [f"{name}/config.json" if name in ("model", "llm") else name for name in names]


@pytest.fixture
def folder(tmp_path):
    for name, data in FILES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    return tmp_path


@contextmanager
def _stdin_from(path: Path | None):
    """sys.stdin and file descriptor 0 (what /dev/stdin names) reading ``path``."""
    if path is None:
        yield
        return
    saved_fd, saved = os.dup(0), sys.stdin
    with open(path, "rb") as file:
        os.dup2(file.fileno(), 0)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)))
        try:
            yield
        finally:
            sys.stdin = saved
            os.dup2(saved_fd, 0)
            os.close(saved_fd)


def attn(folder: Path, recipe: list[str], extra: list[str], stdout: Path) -> tuple[int, str, bytes]:
    """Run ``attn`` here with stdout appended to the file ``stdout`` (as ``>>``) and stdin
    the recipe's file: (exit code, stderr, what stdout gained)."""
    out = next((extra[i + 1] for i in range(len(extra) - 1) if extra[i] == "!out"), str(folder / "new.dir"))
    extra = [a for i, a in enumerate(extra) if a != "!out" and (i == 0 or extra[i - 1] != "!out")]
    args = [
        str(folder / a[1:]) if a.startswith("@") else out if a == "!out" else a for a in recipe if not a.startswith("<")
    ] + extra
    stdin = next((folder / a[1:] for a in recipe if a.startswith("<")), None)
    before = stdout.read_bytes() if stdout.exists() else b""
    saved = sys.stdout, sys.stderr
    err = io.StringIO()
    with _stdin_from(stdin), open(stdout, "a", encoding="utf-8") as out:
        sys.stdout, sys.stderr = out, err
        try:
            code = GROUP.main(args=args, prog_name="attn", standalone_mode=False)
        finally:
            sys.stdout, sys.stderr = saved
    return code, err.getvalue(), stdout.read_bytes()[len(before) :]


def _refused(code: int, stderr: str, printed: bytes) -> None:
    assert code == 2, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("attn: error: ") and "an input of this run" in lines[0], stderr
    assert printed == b""


def _cases():
    for command, recipes in RECIPES.items():
        for r, recipe in enumerate(recipes):
            for target in dict.fromkeys(_inputs(recipe)):
                for output in [*_outputs(command), ">>"]:
                    yield pytest.param(command, r, target, output, id=f"{command}[{r}] {output} onto {target}")


@pytest.mark.parametrize(("command", "r", "target", "output"), list(_cases()))
def test_no_output_names_an_input(folder, command, r, target, output):
    recipe = RECIPES[command][r]
    original = FILES[target]
    path = folder / target
    if output == ">>":  # stdout appended onto the input
        code, stderr, printed = attn(folder, [command, *recipe], [], path)
        _refused(code, stderr, printed)
        assert path.read_bytes() == original
        return
    for way in (*WAYS, *(["/dev/stdin"] if f"<{target}" in recipe else [])):
        named = {"path": path, "symlink": folder / "link.out", "hard link": folder / "hard.out"}.get(way)
        fd = None
        if way == "symlink":
            os.symlink(path, named)
        elif way == "hard link":
            os.link(path, named)
        elif way == "/dev/fd/N":
            fd = os.open(path, os.O_RDONLY)
            named = Path(f"/dev/fd/{fd}")
        elif way == "/dev/stdin":
            named = Path("/dev/stdin")
        try:
            code, stderr, printed = attn(folder, [command, *recipe], [output, str(named)], folder / "stdout.txt")
        finally:
            if fd is not None:
                os.close(fd)
            if way in ("symlink", "hard link"):
                os.unlink(named)
        _refused(code, stderr, printed)
        assert path.read_bytes() == original, way


@pytest.mark.parametrize(("command", "r"), [(c, r) for c, recipes in RECIPES.items() for r in range(len(recipes))])
def test_the_recipes_run(folder, command, r):
    """Each recipe runs as written (with its pictures elsewhere), so the refusals above
    are the guard's and not some other mistake's. A model recipe has no model to run."""
    recipe = RECIPES[command][r]
    pictures = [
        arg
        for option in _outputs(command)
        if option in ("--svg", "--html")
        for arg in (option, str(folder / f"fine{option[2:]}.out"))
    ]
    code, stderr, _ = attn(folder, [command, *recipe], ["-f", "json", *pictures], folder / "stdout.txt")
    if "@model" in recipe:  # lookup's and trace's --model: a whole model, which this folder is not
        assert code == 1 and "model" in stderr or "no tensor" in stderr, stderr
        return
    if "@model.gguf" in recipe:  # convert's: a GGUF's header over nothing, refused once read
        assert code == 1 and "model.gguf" in stderr, stderr
        return
    assert code in (0, 3), stderr  # 3: attn check found the made-up OUT wrong, after the guard let it run


def test_every_command_and_every_file_parameter_is_covered():
    """A command registered without recipes, a file parameter no recipe names, or a
    string parameter that is neither marked nor known to be text fails here."""
    commands = _commands()
    assert set(commands) == set(RECIPES), "every command needs recipes above"
    for name, cmd in commands.items():
        assert isinstance(cmd, OnceCommand), f"{name} does not use the guarded command class"
        roles = path_roles(cmd.callback)
        hints = typing.get_type_hints(cmd.callback, include_extras=True)
        named = {arg for recipe in RECIPES[name] for arg in recipe}
        for param in cmd.params:
            role = roles.get(param.name)
            if isinstance(role, Reads):
                flag = max(param.opts, key=len)
                used = flag in named or (
                    not flag.startswith("-")
                    and any(a.startswith(("@", "-", "<")) for recipe in RECIPES[name] for a in recipe[:1])
                )
                assert used, f"attn {name}: no recipe reads {flag}"
                continue
            if isinstance(role, Writes):
                continue
            base = typing.get_args(hints[param.name])[0] if hasattr(hints[param.name], "__metadata__") else None
            kinds = {a for a in typing.get_args(base) or (base,)} | {
                x for a in typing.get_args(base) for x in typing.get_args(a)
            }
            if str in kinds:
                assert param.name in NOT_PATHS, (
                    f"attn {name}: {param.name} is a string, but marked neither "
                    "READS nor WRITES (cli/paths.py) nor known to be text"
                )
