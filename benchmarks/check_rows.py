"""``attn check`` beside ``attn run`` on the same inputs, whole processes:
``python benchmarks/run.py --check`` (or this file alone).

Q, K, V are float16 NPY files (memory-mapped by attn); OUT is attn's own
blocked kernel's output rounded to float16. Each row runs ``attn run`` (the
kernel in float32, output only, ``-f npy``), ``attn check`` (every row) and
``attn check --rows 1024``, one after the other, ``rounds`` times, and
reports the best time and the peak RSS of each process, and their ratios to
``attn run``'s. The targets (issue 27): a full check within 5× the time of
``attn run`` and within the inputs and OUT as stored + 512 MiB.

``--long`` adds [1, 8, 131072, 128] with ``--rows 1024`` only (minutes; the
inputs take 1 GiB on disk in a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# A small Python process (no numpy) starts the command and reads its peak RSS:
# a forked child's max RSS would count the parent's pages before exec.
PEAK_OF_CHILD = """\
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    code = subprocess.run(sys.argv[2:], stdout=out).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)  # KiB on Linux
"""

SHAPES = [  # (shape [B, H, N, D], causal)
    ((1, 16, 4096, 64), True),
    ((1, 16, 4096, 64), False),
    ((1, 16, 8192, 64), True),
]
LONG = ((1, 8, 131072, 128), True)


def make_inputs(folder: str, shape: tuple[int, ...], causal: bool) -> list[str]:
    """q.npy, k.npy, v.npy in float16 and out.npy, attn's kernel's output rounded to float16."""
    from attncli import AttentionOptions
    from attncli.core.kernel import blocked

    rng = np.random.default_rng(0)
    files = []
    for name in "qkv":
        files.append(os.path.join(folder, f"{name}.npy"))
        m = np.lib.format.open_memmap(files[-1], mode="w+", dtype=np.float16, shape=shape)
        for h in range(shape[1]):  # a head at a time: the long shape's float64 would not fit
            m[:, h] = rng.standard_normal((shape[0], *shape[2:]), dtype=np.float32)
        m.flush()
        del m
    q, k, v = (np.load(f, mmap_mode="r") for f in files)
    out = np.lib.format.open_memmap(os.path.join(folder, "out.npy"), mode="w+", dtype=np.float16, shape=shape)
    options = AttentionOptions(causal="top-left" if causal else None)
    for h in range(shape[1]):
        out[:, h : h + 1] = blocked(q[:, h : h + 1], k[:, h : h + 1], v[:, h : h + 1], options).astype(np.float16)
    out.flush()
    return [os.path.join(folder, "out.npy"), *files]


def measure(command: list[str], folder: str) -> tuple[float, float, int]:
    """(seconds, peak RSS MiB, exit code) of one whole process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF_CHILD, os.path.join(folder, "stdout"), *command],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    peak, code = done.stdout.split()
    return seconds, int(peak) / 1024, int(code)


def check_table(rounds: int = 2, long: bool = False, only_long: bool = False) -> None:
    attn = [sys.executable, "-m", "attncli"]
    print(f"\n## attn check beside attn run, float16 inputs as NPY, whole processes, best of {rounds}\n")
    print("| shape | causal | inputs + OUT | command | time | × run | peak RSS | × run | RSS − stored |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = [] if only_long else [(shape, causal, rounds) for shape, causal in SHAPES]
    if long or only_long:
        rows.append((*LONG, 1))
    for shape, causal, times in rows:
        with tempfile.TemporaryDirectory() as folder:
            out, q, k, v = make_inputs(folder, shape, causal)
            stored = sum(os.path.getsize(f) for f in (out, q, k, v)) / 2**20
            flags = ["--causal"] if causal else []
            commands = {"attn run": [*attn, "run", q, k, v, *flags, "-f", "npy"]}
            if shape != LONG[0]:
                commands["attn check"] = [*attn, "check", out, q, k, v, *flags, "-f", "json"]
            commands["attn check --rows 1024"] = [*attn, "check", out, q, k, v, *flags, "--rows", "1024", "-f", "json"]
            best: dict[str, tuple[float, float]] = {}
            for _ in range(times):
                for name, command in commands.items():
                    seconds, peak, code = measure(command, folder)
                    assert code == 0, (name, code)
                    old = best.get(name, (float("inf"), 0.0))
                    best[name] = (min(old[0], seconds), max(old[1], peak))
            run_time, run_peak = best["attn run"]
            for name, (seconds, peak) in best.items():
                print(
                    f"| {'×'.join(map(str, shape))} | {'yes' if causal else 'no'} | {stored:.0f} MiB | {name} "
                    f"| {seconds:.2f} s | {seconds / run_time:.2f} | {peak:.0f} MiB | {peak / run_peak:.2f} "
                    f"| {peak - stored:.0f} MiB |"
                )
            sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--long", action="store_true", help="add [1, 8, 131072, 128] with --rows 1024 (minutes)")
    parser.add_argument("--only-long", action="store_true", help="[1, 8, 131072, 128] alone")
    args = parser.parse_args()
    check_table(args.rounds, args.long, args.only_long)


if __name__ == "__main__":
    main()
