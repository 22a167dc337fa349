"""An old kernel against this one, in one process: are the outputs the same
bytes, and how do their times compare?

    git show main:attncli/core/kernel.py > /tmp/old_kernel.py
    python benchmarks/kernel_ab.py /tmp/old_kernel.py            # both parts
    python benchmarks/kernel_ab.py /tmp/old_kernel.py --same     # the outputs only (a few minutes)
    python benchmarks/kernel_ab.py /tmp/old_kernel.py --times --cpu   # times on one thread, CPU time

The old file is loaded as a module of its own beside ``attncli.core.kernel``
(it imports the rest of ``attncli.core`` from this tree, so it must still
find what it imports there). Part 1 runs both on a grid of shapes, options,
dtypes, block sizes and worker counts, and compares outputs byte for byte
(the sign of a zero and a NaN's bits included), and each row's log-sum-exp
through ``forward`` when the old kernel has it, or their errors' words.
Part 2 times both on the shapes table's rows (``run.SHAPES``), in turn in
each round (which goes first alternates), after a pause (``run.SETTLE``),
and prints the best of each and the median of the rounds' ratios, new/old;
``--cpu`` times the CPU time of one thread running the kernel alone (BLAS
held to it too), which a machine busy with other work disturbs far less.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from attncli.core import kernel as new_kernel  # noqa: E402  (after the path is set)
from attncli.core.logits import prepare  # noqa: E402
from attncli.core.options import AttentionOptions, Rope  # noqa: E402
from attncli.errors import AttnError  # noqa: E402


def load(path: str):
    spec = importlib.util.spec_from_file_location("old_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_kernel"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# (name, options for heads H_q = 4; a callable gets (rng, n_q, n_k))
OPTIONS = [
    ("plain", {}),
    ("causal", {"causal": "top-left"}),
    ("bottom-right", {"causal": "bottom-right"}),
    ("cosine, temperature", {"similarity": "cosine", "temperature": 0.5}),
    ("scale", {"scale": 0.3}),
    ("window 3,2", {"window": (3, 2)}),
    ("window 40,40", {"window": (40, 40)}),
    ("window 5,-1", {"window": (5, -1)}),
    ("window -1,4", {"window": (-1, 4)}),
    ("window 64,0", {"window": (64, 0)}),
    ("window 256,0", {"window": (256, 0)}),
    ("window past the keys", {"window": (10**20, 3)}),
    ("causal window 9,0", {"causal": "top-left", "window": (9, 0)}),
    ("bottom-right window 6,3", {"causal": "bottom-right", "window": (6, 3)}),
    ("softcap", {"softcap": 2.0}),
    ("softcap causal", {"softcap": 30.0, "causal": "top-left"}),
    ("alibi causal", {"alibi": True, "causal": "top-left"}),
    ("alibi window", {"alibi": True, "window": (20, 0)}),
    ("sinks", {"sinks": np.array([0.5, -1.0, 2.0, 0.0])}),
    ("sinks causal", {"sinks": np.array([0.5, -1.0, 2.0, 0.0]), "causal": "top-left"}),
    ("sinks window", {"sinks": np.array([3.0, -1.0, 2.0, 0.0]), "window": (16, 0)}),
    ("rope", {"rope": Rope("neox")}),
    ("rope gptj window", {"rope": Rope("gptj", dim=4), "window": (12, 2)}),
    ("mask", lambda rng, n_q, n_k: {"mask": rng.random((n_q, n_k)) < 0.6}),
    ("row mask causal", lambda rng, n_q, n_k: {"mask": rng.random((1, n_k)) < 0.6, "causal": "top-left"}),
    ("masked rows", lambda rng, n_q, n_k: {"mask": np.arange(n_q)[:, None] % 3 != 0}),
    ("bias", lambda rng, n_q, n_k: {"bias": rng.standard_normal((n_q, n_k))}),
    ("bias window", lambda rng, n_q, n_k: {"bias": rng.standard_normal((4, 1, n_k)), "window": (10, 1)}),
    (
        "everything",
        {
            "causal": "bottom-right",
            "window": (30, 0),
            "softcap": 1.5,
            "alibi": True,
            "rope": Rope("gptj", dim=4),
            "sinks": np.array([0.5, -1.0, 2.0, 0.0]),
            "temperature": 1.3,
        },
    ),
]

# (batch and heads of Q, n_q, n_k, d, K/V heads): 2-D, and [2, 4, n, d] with K/V heads 4, 2 (GQA) and 1
SHAPES = [
    ((), 1, 1, 8, None),
    ((), 7, 5, 8, None),
    ((), 150, 200, 8, None),
    ((), 300, 300, 8, None),
    ((), 1100, 1100, 8, None),
    ((), 700, 300, 8, None),
    ((), 300, 700, 8, None),
    ((2, 4), 97, 110, 16, 4),
    ((2, 4), 300, 300, 16, 2),
    ((1, 4), 600, 600, 16, 1),
    ((2, 4), 520, 400, 8, 2),
]
BLOCKS = [(None, None), (16, 32), (64, 64), (5, 7), (128, 16)]


def same_outputs(old) -> None:
    """Both kernels on the grid: the same bytes, or the same error."""
    cases = differ = 0
    for (lead, n_q, n_k, d, h_kv), (name, settings), dtype, size in itertools.product(
        SHAPES, OPTIONS, (np.float32, np.float64), (1.0, 40.0)
    ):
        rng = np.random.default_rng([len(name), n_q, n_k])
        q = (rng.standard_normal((*lead, n_q, d)) * size).astype(dtype)
        kv_shape = (*lead[:-1], h_kv, n_k, d) if lead else (n_k, d)
        k, v = (rng.standard_normal(kv_shape).astype(dtype) for _ in range(2))
        made = settings(rng, n_q, n_k) if callable(settings) else dict(settings)
        if not lead and "sinks" in made:
            made["sinks"] = made["sinks"][:1]
        if not lead and getattr(made.get("bias"), "ndim", 0) == 3:
            made["bias"] = made["bias"][0]
        options = AttentionOptions(**made)
        for (query_block, key_block), workers in itertools.product(BLOCKS, (1, 2)):
            if query_block is not None and n_q * n_k > 200_000 and query_block * key_block < 4096:
                continue  # tens of thousands of tiny blocks: slow, and the small shapes have them
            cases += 1
            results = []
            for module in (old, new_kernel):
                try:
                    out = module.blocked(
                        q, k, v, options, query_block=query_block, key_block=key_block, workers=workers
                    )
                    lse = None
                    if hasattr(old, "forward"):  # and each row's log-sum-exp, as the backward asks for it
                        p = prepare(q, k, v, options)
                        lse = np.full(p.logits_shape[:-1] + (1,), np.nan)
                        module.forward(p, query_block=query_block, key_block=key_block, workers=workers, lse=lse)
                    results.append((out.dtype, out.shape, out.tobytes(), None if lse is None else lse.tobytes()))
                except AttnError as error:
                    results.append(("error", str(error)))
            if results[0] != results[1]:
                differ += 1
                print(
                    f"DIFFER: {name}, {(*lead, n_q, d)} × {n_k} keys, {np.dtype(dtype).name}, size {size}, "
                    f"blocks {query_block},{key_block}, workers {workers}"
                )
    print(f"{cases} cases, {differ} differ")


def timed(fn, cpu: bool, settle: float) -> float:
    """Seconds of wall time, or with ``cpu`` of this thread's CPU time (what a
    busy machine disturbs least; the kernel then runs on this thread alone)."""
    time.sleep(settle)
    clock = time.thread_time if cpu else time.perf_counter
    start = clock()
    fn()
    return clock() - start


def times(old, rounds: int, cpu: bool) -> None:
    """Both kernels on the shapes table's rows, in turn, ``rounds`` rounds."""
    from contextlib import nullcontext

    from run import SETTLE
    from run import SHAPES as TABLE

    from attncli.core.parallel import one_blas_thread

    workers = 1 if cpu else None
    what = "CPU time of one thread, BLAS on one thread" if cpu else "wall time, every core"
    print(f"\n## new/old, {what}, {rounds} rounds in turn, load average {os.getloadavg()[0]:.1f} at the start\n")
    print(f"{'case':<20} {'shape':<20} {'old ms':>8} {'new ms':>8} {'best/best':>10} {'median ratio':>13}")
    rng = np.random.default_rng(0)
    for label, shape, h_kv, causal, window, extra in TABLE:
        kv_shape = shape[:-3] + (h_kv,) + shape[-2:] if len(shape) == 4 else shape
        q = rng.standard_normal(shape, dtype=np.float32)
        k, v = (rng.standard_normal(kv_shape, dtype=np.float32) for _ in range(2))
        options = AttentionOptions(causal="top-left" if causal else None, window=window, **extra)
        runs = {
            "old": lambda q=q, k=k, v=v, o=options: old.blocked(q, k, v, o, workers=workers),
            "new": lambda q=q, k=k, v=v, o=options: new_kernel.blocked(q, k, v, o, workers=workers),
        }
        best = {"old": math.inf, "new": math.inf}
        ratios = []
        with one_blas_thread() if cpu else nullcontext():
            for r in range(rounds):
                seconds = {}
                for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    seconds[name] = timed(runs[name], cpu, SETTLE)
                    best[name] = min(best[name], seconds[name])
                ratios.append(seconds["new"] / seconds["old"])
        print(
            f"{label:<20} {str(list(shape)):<20} {best['old'] * 1e3:8.1f} {best['new'] * 1e3:8.1f} "
            f"{best['new'] / best['old']:9.3f}× {statistics.median(ratios):12.3f}×"
        )
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="the old kernel.py")
    parser.add_argument("--same", action="store_true", help="compare the outputs only")
    parser.add_argument("--times", action="store_true", help="compare the times only")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--cpu", action="store_true", help="time one thread's CPU time, the kernel on one thread")
    args = parser.parse_args()
    old = load(args.old)
    if not args.times:
        same_outputs(old)
    if not args.same:
        times(old, args.rounds, args.cpu)


if __name__ == "__main__":
    main()
