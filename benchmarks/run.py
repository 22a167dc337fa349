"""attn's performance, side by side, in one run: ``python benchmarks/run.py``.

1. The kernel, output only, float32, d = 64, n_q = n_k = n: attn's blocked
   kernel (``attention_blocked``) against the seeds' numpy code
   (``softmax(Q @ K.T / np.sqrt(d_k)) @ V`` with seed 000's softmax, no max
   subtracted) and, when torch is installed (``pip install -e '.[bench]'``),
   torch's ``scaled_dot_product_attention`` on the CPU. Best of a few rounds
   (each runs every contender once, in turn, after a pause: ``SETTLE``), and
   the largest difference from attn's output.
   The same on the shapes models run ([B, H, N, D], causal, GQA, a window of
   256), beside torch SDPA, with the fraction of the machine's sgemm rate;
   then what causal and a window spare: attn masked against attn full.
   The backward pass: ``attention_grad`` (forward and backward fused by
   blocks of queries, float64) beside torch autograd of SDPA (forward + backward,
   float64); what causal spares of it; the peak RSS of a process running it
   at two sizes; and ``attention_blocked(workers=1)`` with BLAS held to one
   thread against BLAS left at its own threads.
2. Peak memory (max RSS) of ``attn run q.npy k.npy v.npy -f npy`` at n = 16,384;
   ``attn check`` (every row, and ``--rows 1024``) beside ``attn run`` on the
   same float16 inputs, whole processes, time and peak RSS as ratios
   (``check_rows.py``; ``--check`` runs that table alone).
3. Reading a 100,000 × 64 CSV: attn's reader against ``np.loadtxt``.
4. Start-up, whole processes, median of many interleaved runs: ``attn --help``
   against a bare Typer app; ``attn run``, ``attn softmax`` against a Typer
   app that imports numpy and prints a Rich table (``--startup`` alone).

Not part of the test suite; it takes a minute or two. ``--quick`` stops at
n = 4096 and runs fewer start-ups; ``--shapes`` runs the shapes table alone,
``--backward`` the backward pass's tables alone.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attncli.core.api import attention_blocked  # noqa: E402  (after the path is set)

BARE_APP = """\
import typer

app = typer.Typer()


@app.command()
def main(name: str = "world"):
    print(name)


app()
"""

# issue 24's second yardstick: what any Typer tool that computes with numpy and prints a table pays.
TABLE_APP = """\
import numpy
import typer

app = typer.Typer()


@app.command()
def main(name: str = "world"):
    from rich.console import Console
    from rich.table import Table

    table = Table()
    table.add_column(name)
    table.add_row(str(numpy.ones(3)))
    Console().print(table)


app()
"""

PEAK_OF_CHILD = """\
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    subprocess.run(sys.argv[2:], stdout=out, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB on Linux
"""


# A pause before each timed call in the interleaved tables. torch's OpenMP
# threads (libgomp) spin for a while after each parallel region before they
# sleep; whatever runs next shares the cores with them. Measured on
# [4, 8, 512, 64]: attn took 20–23 ms right after torch and 17–19 ms right
# after itself; with OMP_WAIT_POLICY=PASSIVE, or 10 ms or more between
# calls, the two agree (2 ms was not enough). Longer pauses let idle cores
# sleep deeper, which short calls pay for: the 2-D window (4 ms) took
# 3.80–3.90 ms after 20 ms of quiet, 4.17–4.20 ms after 50 ms.
SETTLE = 0.02


# The shapes table: a row runs at least ``rounds`` rounds, and more, up to
# MOST_ROUNDS, until its slowest contender has run ROW_SECONDS in all: a
# 15 ms row's best of 3 swung by ±10 % from run to run on a shared machine.
ROW_SECONDS = 1.0
MOST_ROUNDS = 12


def timed(fn):
    """(seconds, result) of fn() after SETTLE seconds of quiet."""
    time.sleep(SETTLE)
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def seed_attention(q, k, v):
    """The seeds' code, as a reader would copy it (seed 000's softmax)."""

    def softmax(x):
        e = np.exp(x)
        return e / e.sum(axis=-1, keepdims=True)

    d_k = k.shape[-1]
    return softmax(q @ k.T / np.sqrt(d_k)) @ v


def kernels(sizes: list[int], d: int = 64) -> None:
    """Each contender once per round, in turn, so that all meet the same
    machine state (the seed's code allocates n×n float64 arrays, and its
    time depends on whether the memory was just freed); best of the rounds."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        torch = None
    print(f"\n## Kernel: output only, float32, d = {d} (best of several interleaved runs, seconds)\n")
    print(f"{'n':>6} | {'attn':>7} | {'seed':>7} | {'torch':>7} | {'seed/attn':>9} | {'torch/attn':>10} | max |diff|")
    print("-" * 80)
    rng = np.random.default_rng(0)
    for n in sizes:
        q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
        contenders = {
            "attn": lambda q=q, k=k, v=v: attention_blocked(q, k, v),
            "seed": lambda q=q, k=k, v=v: seed_attention(q, k, v),
        }
        if torch is not None:
            tq, tk, tv = (torch.from_numpy(m)[None] for m in (q, k, v))
            contenders["torch"] = lambda tq=tq, tk=tk, tv=tv: F.scaled_dot_product_attention(tq, tk, tv)[0].numpy()
        best = {name: math.inf for name in contenders}
        outputs = {}
        for round_ in range(5 if n <= 4096 else 3):
            for name, fn in contenders.items():
                if name == "seed" and n > 8192 and round_:
                    continue  # 25 s and 8 GiB a run: once is enough
                with np.errstate(over="ignore", invalid="ignore"):
                    seconds, outputs[name] = timed(fn)
                best[name] = min(best[name], seconds)
        diff = max(float(np.abs(out - outputs["attn"]).max()) for out in outputs.values())
        ours, seed, theirs = best["attn"], best["seed"], best.get("torch", math.nan)
        print(
            f"{n:>6} | {ours:7.3f} | {seed:7.3f} | {theirs:7.3f} | {seed / ours:8.1f}× | "
            f"{theirs / ours:9.1f}× | {diff:.1e}"
        )
        del outputs


# (label, Q shape [B, H_q, N, D], H_kv, causal, window (left, right) or None, other options)
SHAPES = [
    ("multi-head causal", (1, 32, 1024, 128), 32, True, None, {}),
    ("multi-head", (4, 8, 512, 64), 8, False, None, {}),
    ("multi-head causal", (1, 16, 4096, 64), 16, True, None, {}),
    ("GQA 32/8 causal", (1, 32, 1024, 128), 8, True, None, {}),
    ("window 256", (1, 16, 4096, 64), 16, False, (256, 0), {}),
    ("ALiBi causal", (1, 16, 4096, 64), 16, True, None, {"alibi": True}),
    ("soft-cap 30 causal", (1, 16, 4096, 64), 16, True, None, {"softcap": 30.0}),
    ("2-D", (8192, 64), 1, False, None, {}),
    ("2-D causal", (8192, 64), 1, True, None, {}),
    ("2-D window 256", (4096, 64), 1, False, (256, 0), {}),
    ("2-D", (4096, 64), 1, False, None, {}),
]


def sgemm_rate(dtype: type = np.float32, threads: int | None = None) -> float:
    """This machine's matrix product rate now, FLOP/s (numpy's BLAS, 2048², best of 3),
    float32 by default; on ``threads`` BLAS threads (default: as BLAS is set)."""
    from contextlib import nullcontext

    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).standard_normal((2048, 2048)).astype(dtype)
    best = math.inf
    with nullcontext() if threads is None else threadpool_limits(threads, user_api="blas"):
        for _ in range(3):
            start = time.perf_counter()
            a @ a
            best = min(best, time.perf_counter() - start)
    return 2 * 2048**3 / best


def shapes(rounds: int, flex: bool) -> None:
    """attn's kernel on the shapes models run, beside torch SDPA (an explicit
    boolean mask for a window, which SDPA lacks; no SDPA for ALiBi and the
    soft-cap) and, for those variants, FlexAttention compiled for the CPU.
    The fraction of the sgemm rate counts the products' useful work:
    4 · n_q · n_k · d per head, times the share of the matrix the mask allows."""
    from attncli.core.kernel import blocked
    from attncli.core.options import AttentionOptions
    from attncli.core.positions import band_allowed

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        torch = None
    rate = sgemm_rate()
    flex_note = "no torch" if torch is None else _flex_unavailable() if flex else "not run"
    print(
        f"\n## Shapes models run: output only, float32, best of {rounds} to {MOST_ROUNDS} interleaved runs (sgemm "
        f"{rate / 1e9:.0f} GFLOP/s; FlexAttention: {flex_note or 'torch.compile on the CPU, compile not timed'})\n"
    )
    print(
        f"{'case':<20} {'shape':<20} {'attn ms':>8} {'torch ms':>9} {'torch/attn':>10} {'flex ms':>8} "
        f"{'flex/attn':>9} {'sgemm':>6}  max |diff|"
    )
    print("-" * 112)
    rng = np.random.default_rng(0)
    for label, shape, h_kv, causal, window, extra in SHAPES:
        kv_shape = shape[:-3] + (h_kv,) + shape[-2:] if len(shape) == 4 else shape
        q = rng.standard_normal(shape, dtype=np.float32)
        k, v = (rng.standard_normal(kv_shape, dtype=np.float32) for _ in range(2))
        n, d = shape[-2], shape[-1]
        options = AttentionOptions(causal="top-left" if causal else None, window=window, **extra)
        allowed = band_allowed(range(n), range(n), n, n, "top-left" if causal else None, window)
        contenders = {"attn": lambda q=q, k=k, v=v, o=options: blocked(q, k, v, o)}
        if torch is not None and not extra:
            tq, tk, tv = (torch.from_numpy(m) for m in (q, k, v))
            mask = None if window is None else torch.from_numpy(allowed)
            contenders["torch"] = lambda tq=tq, tk=tk, tv=tv, mask=mask, c=causal and window is None: (
                F.scaled_dot_product_attention(
                    tq,
                    tk,
                    tv,
                    attn_mask=mask,
                    is_causal=c,
                    enable_gqa=tq.shape[-3] != tk.shape[-3] if tq.ndim == 4 else False,
                ).numpy()
            )
        if torch is not None and not flex_note and (window is not None or extra):
            contenders["flex"] = _flex(q, k, v, causal, window, extra)
            contenders["flex"]()  # compiles for this mask and score: not timed
        best = {name: math.inf for name in contenders}
        outputs = {}
        done = 0
        while done < rounds or (done < MOST_ROUNDS and done * max(best.values()) < ROW_SECONDS):
            for name, fn in contenders.items():
                seconds, outputs[name] = timed(fn)
                best[name] = min(best[name], seconds)
            done += 1
        others = [float(np.abs(out - outputs["attn"]).max()) for name, out in outputs.items() if name != "attn"]
        diff = f"{max(others):.1e}" if others else "–"  # nothing to compare with: no torch, or no flex
        heads = math.prod(shape[:-2])
        useful = 4 * heads * int(allowed.sum()) * d
        ours, theirs, flexes = best["attn"], best.get("torch", math.nan), best.get("flex", math.nan)
        print(
            f"{label:<20} {str(list(shape)):<20} {_ms(ours):>8} {_ms(theirs):>9} {_ratio(theirs / ours):>10} "
            f"{_ms(flexes):>8} {_ratio(flexes / ours):>9} {useful / ours / rate:5.0%}  {diff}"
        )
        del outputs


# What causal and a window spare: attn's masked kernel against the full one
# on the same Q, K, V. (label, [n, d], causal, window or None)
MASKED = [
    ("causal", (8192, 64), True, None),
    ("window 256", (4096, 64), False, (256, 0)),
]


def spared(rounds: int) -> None:
    """The masked kernel against the full one, the two in turn in each round:
    the best of each, and the median of the rounds' own ratios. The shapes
    table times the two as rows seconds apart, and its ratio of the two rows
    swung by ±10 % with the machine between them."""
    from attncli.core.kernel import blocked
    from attncli.core.options import AttentionOptions

    print(f"\n## What the mask spares: attn masked against attn full, float32, {rounds} rounds, each in turn\n")
    print(f"{'case':<12} {'shape':<12} {'masked ms':>10} {'full ms':>8} {'best/best':>10} {'median of ratios':>17}")
    print("-" * 74)
    rng = np.random.default_rng(0)
    for label, shape, causal, window in MASKED:
        q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
        masked = AttentionOptions(causal="top-left" if causal else None, window=window)
        run_masked = lambda q=q, k=k, v=v, o=masked: blocked(q, k, v, o)  # noqa: E731
        run_full = lambda q=q, k=k, v=v: blocked(q, k, v)  # noqa: E731
        ratios, best_masked, best_full = [], math.inf, math.inf
        for _ in range(rounds):
            seconds_masked, _ = timed(run_masked)
            seconds_full, _ = timed(run_full)
            best_masked, best_full = min(best_masked, seconds_masked), min(best_full, seconds_full)
            ratios.append(seconds_masked / seconds_full)
        print(
            f"{label:<12} {str(list(shape)):<12} {_ms(best_masked):>10} {_ms(best_full):>8} "
            f"{best_masked / best_full:9.3f}× {statistics.median(ratios):16.3f}×"
        )


# The backward pass: attention_grad (forward + backward, float64) against
# torch autograd of SDPA (forward + backward, float64), on the same inputs.
# (label, Q shape [B, H_q, N, D], H_kv, causal)
BACKWARD = [
    ("multi-head causal", (1, 8, 1024, 64), 8, True),
    ("multi-head", (4, 8, 512, 64), 8, False),
    ("GQA 16/4 causal", (1, 16, 1024, 64), 4, True),
    ("multi-head causal", (1, 8, 4096, 64), 8, True),
]


def gemm_rates() -> None:
    """numpy's BLAS on this machine now: sgemm and dgemm (2048², best of 3) on
    1 and 2 threads; and the float64 products of the backward's 256 × 256
    blocks on one thread, numpy's BLAS beside torch's (best of 7 × 50)."""
    print(f"\n## Matrix products (load average {os.getloadavg()[0]:.1f})\n")
    for dtype, name in ((np.float32, "sgemm"), (np.float64, "dgemm")):
        one, two = sgemm_rate(dtype, 1), sgemm_rate(dtype, 2)
        print(f"{name} 2048²: {one / 1e9:.0f} GFLOP/s on 1 thread, {two / 1e9:.0f} on 2")
    try:
        import torch
    except ImportError:
        return
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1, user_api="blas"):
            for m, k, n in ((256, 64, 256), (256, 256, 64)):
                a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                best = {"numpy": math.inf, "torch": math.inf}
                for _ in range(7):
                    for who, fn in (("numpy", lambda a=a, b=b: a @ b), ("torch", lambda ta=ta, tb=tb: ta @ tb)):
                        start = time.perf_counter()
                        for _ in range(50):
                            fn()
                        best[who] = min(best[who], (time.perf_counter() - start) / 50)
                rates = {who: 2 * m * k * n / seconds / 1e9 for who, seconds in best.items()}
                print(
                    f"float64 [{m}, {k}] @ [{k}, {n}], 1 thread: numpy {rates['numpy']:.0f} GFLOP/s, "
                    f"torch {rates['torch']:.0f}"
                )
    finally:
        torch.set_num_threads(threads)


def backward(rounds: int) -> None:
    """attn's backward pass (``attention_grad``: forward and backward fused by
    blocks of queries, ``core/grad_fused.py``) beside torch autograd of SDPA,
    forward + backward, both float64. Each round runs every contender once, in
    turn; the best of each, the median of the rounds' own ratios, and the
    fraction of the dgemm rate that the useful products reach: the fused path's
    six products (S, O, dP, dQ, dK, dV) of 2 · d per allowed logit."""
    from attncli import AttentionOptions, attention_grad

    try:
        import torch
    except ImportError:
        torch = None
    rate = max(sgemm_rate(np.float64, 2), 2 * sgemm_rate(np.float64, 1))  # the two cores' dgemm, as well as it goes now
    print(
        f"\n## Backward: forward + backward, float64, {rounds} interleaved rounds (dgemm {rate / 1e9:.0f} GFLOP/s "
        f"on the cores, load average {os.getloadavg()[0]:.1f})\n"
    )
    print(
        f"{'case':<18} {'shape':<18} {'attn ms':>8} {'torch ms':>9} {'torch/attn':>10} {'median':>7} {'dgemm':>6}  "
        f"max |diff|"
    )
    print("-" * 100)
    rng = np.random.default_rng(0)
    for label, shape, h_kv, causal in BACKWARD:
        kv_shape = shape[:-3] + (h_kv,) + shape[-2:]
        q, dout = rng.standard_normal(shape), rng.standard_normal(shape)
        k, v = rng.standard_normal(kv_shape), rng.standard_normal(kv_shape)
        options = AttentionOptions(causal="top-left" if causal else None)
        contenders = {"attn": lambda q=q, k=k, v=v, dout=dout, o=options: attention_grad(q, k, v, dout, o)}
        if torch is not None:
            contenders["torch"] = lambda q=q, k=k, v=v, dout=dout, c=causal: _torch_backward(q, k, v, dout, c)
        best = {name: math.inf for name in contenders}
        ratios, results = [], {}
        for _ in range(rounds):
            seconds = {}
            for name, fn in contenders.items():
                seconds[name], results[name] = timed(fn)
                best[name] = min(best[name], seconds[name])
            ratios.append(seconds.get("torch", math.nan) / seconds["attn"])
        diff = "–"
        if "torch" in results:
            ours = (results["attn"].dq, results["attn"].dk, results["attn"].dv)
            diff = f"{max(float(np.abs(a - b).max()) for a, b in zip(ours, results['torch'], strict=True)):.1e}"
        n, d = shape[-2], shape[-1]
        allowed = n * (n + 1) // 2 if causal else n * n
        useful = 6 * 2 * d * allowed * math.prod(shape[:-2])
        ours, theirs = best["attn"], best.get("torch", math.nan)
        print(
            f"{label:<18} {str(list(shape)):<18} {_ms(ours):>8} {_ms(theirs):>9} {_ratio(theirs / ours):>10} "
            f"{_ratio(statistics.median(ratios)):>7} {useful / ours / rate:5.0%}  {diff}"
        )


def _torch_backward(q, k, v, dout, causal: bool):
    """torch autograd of SDPA: forward, then backward -> (dQ, dK, dV) as numpy."""
    import torch
    import torch.nn.functional as F

    tq, tk, tv = (torch.from_numpy(m).requires_grad_() for m in (q, k, v))
    out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal, enable_gqa=tq.shape[-3] != tk.shape[-3])
    out.backward(torch.from_numpy(dout))
    return tuple(t.grad.numpy() for t in (tq, tk, tv))


def backward_spared(rounds: int, shape: tuple[int, ...] = (1, 8, 4096, 64)) -> None:
    """What causal spares in the backward pass: attn causal against attn full,
    each in turn in every round (and torch's, for comparison), float64."""
    from attncli import AttentionOptions, attention_grad

    try:
        import torch  # noqa: F401
    except ImportError:
        torch = None
    print(
        f"\n## What causal spares in the backward pass: causal against full, {list(shape)}, float64, "
        f"{rounds} rounds, each in turn (load average {os.getloadavg()[0]:.1f})\n"
    )
    print(f"{'':<6} {'causal ms':>10} {'full ms':>8} {'best/best':>10} {'median of ratios':>17}")
    print("-" * 56)
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal(shape) for _ in range(4))
    contenders = {"attn": (lambda c: attention_grad(q, k, v, dout, AttentionOptions(causal="top-left" if c else None)))}
    if torch is not None:
        contenders["torch"] = lambda c: _torch_backward(q, k, v, dout, c)
    for name, fn in contenders.items():
        ratios, best_causal, best_full = [], math.inf, math.inf
        for _ in range(rounds):
            seconds_causal, _ = timed(lambda fn=fn: fn(True))
            seconds_full, _ = timed(lambda fn=fn: fn(False))
            best_causal, best_full = min(best_causal, seconds_causal), min(best_full, seconds_full)
            ratios.append(seconds_causal / seconds_full)
        print(
            f"{name:<6} {_ms(best_causal):>10} {_ms(best_full):>8} {best_causal / best_full:9.3f}× "
            f"{statistics.median(ratios):16.3f}×"
        )


def one_worker(rounds: int, n: int = 8192, d: int = 64) -> None:
    """attention_blocked(workers=1) with BLAS held to one thread, as attn now
    holds it on every path, against BLAS left at its own threads (as before:
    ``parallel.blas_held`` made a no-op for the run) and two workers; 2-D,
    float32, each in turn in every round."""
    from contextlib import nullcontext

    import attncli.core.parallel as parallel

    print(
        f"\n## One worker and BLAS's threads: attention_blocked, [{n}, {d}] float32, best (median) of {rounds} "
        f"rounds, seconds (load average {os.getloadavg()[0]:.1f})\n"
    )
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
    held = parallel.blas_held
    cases = {
        "workers=1, BLAS held to 1 thread": (held, 1),
        "workers=1, BLAS left at its threads": (lambda workers: nullcontext(), 1),
        "workers=2, BLAS held to 1 thread each": (held, 2),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for _ in range(rounds):
            for name, (hold, workers) in cases.items():
                parallel.blas_held = hold
                seconds, _ = timed(lambda workers=workers: attention_blocked(q, k, v, workers=workers))
                times[name].append(seconds)
    finally:
        parallel.blas_held = held
    for name, ts in times.items():
        print(f"{name:<40} {min(ts):6.3f} ({statistics.median(ts):.3f})")


GRAD_IN_A_CHILD = """\
import sys
import numpy as np
from attncli import AttentionOptions, attention_grad
n, d, heads = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
q, k, v, dout = (rng.standard_normal((1, heads, n, d)) for _ in range(4))
grads = attention_grad(q, k, v, dout, AttentionOptions(causal="top-left"))
print(grads.dq.shape[-2])
"""


def backward_memory(sizes: list[int], d: int = 64, heads: int = 4) -> None:
    """Peak RSS of a whole process that makes Q, K, V, dO ([1, heads, n, d],
    float64) and runs attention_grad causal on them, at several n: beside what
    its arrays hold (the inputs, O, dQ, dK, dV: 8 · n · d · heads numbers), and
    what one float64 n × n matrix per head would take."""
    print(
        f"\n## Peak memory of the backward pass: a process running attention_grad causal, [1, {heads}, n, {d}], "
        f"float64\n"
    )
    print(
        f"{'n':>6} {'max RSS MiB':>12} {'its arrays MiB':>15} {'the rest MiB':>13} {'seconds':>8} "
        f"{'n × n per head MiB':>19}"
    )
    print("-" * 80)
    for n in sizes:
        start = time.perf_counter()
        measured = subprocess.run(
            [
                sys.executable,
                "-c",
                PEAK_OF_CHILD,
                os.devnull,
                sys.executable,
                "-c",
                GRAD_IN_A_CHILD,
                str(n),
                str(d),
                str(heads),
            ],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        elapsed = time.perf_counter() - start
        rss = int(measured.stdout) / 1024
        arrays = 8 * n * d * heads * 8 / 2**20
        whole = heads * n * n * 8 / 2**20
        print(f"{n:>6} {rss:12.0f} {arrays:15.0f} {rss - arrays:13.0f} {elapsed:8.1f} {whole:19.0f}")


def _ms(seconds: float) -> str:
    """Milliseconds, with a decimal below 10 ms (the window rows); – when not run."""
    if math.isnan(seconds):
        return "–"
    return f"{seconds * 1000:.1f}" if seconds < 0.01 else f"{seconds * 1000:.0f}"


def _ratio(x: float) -> str:
    return "–" if math.isnan(x) else f"{x:.2f}×"


def _flex_unavailable() -> str:
    """Why FlexAttention cannot run here ('' when it can): it needs torch.compile,
    which on the CPU needs a C++ compiler."""
    try:
        import torch

        q = torch.zeros(1, 1, 128, 16)
        _compiled_flex()(q, q, q)
    except Exception as e:  # noqa: BLE001 - any failure means: no FlexAttention column
        return f"unavailable ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})"
    return ""


def _compiled_flex():
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention)


def _flex(q, k, v, causal: bool, window, extra: dict):
    """FlexAttention on [B, H, N, D] (2-D inputs as one head): a block mask for
    causal and the window, a score_mod for ALiBi (attn's slopes) and the soft-cap."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask

    from attncli.core.positions import alibi_slopes

    tq, tk, tv = (torch.from_numpy(m).reshape((1, 1) * (m.ndim == 2) + m.shape) for m in (q, k, v))
    n = tq.shape[-2]
    left = None if window is None else window[0]

    def allowed(b, h, q_idx, kv_idx):
        ok = kv_idx <= q_idx if causal or window is not None else kv_idx >= 0
        return ok if left is None else ok & (q_idx - kv_idx <= left)

    block_mask = create_block_mask(allowed, None, None, n, n, device="cpu") if causal or window else None
    score_mod = None
    if extra.get("alibi"):
        slopes = torch.from_numpy(alibi_slopes(tq.shape[-3])).float()
        score_mod = lambda score, b, h, q_idx, kv_idx: score - slopes[h] * (q_idx - kv_idx).abs()  # noqa: E731
    elif "softcap" in extra:
        cap = torch.tensor(extra["softcap"])  # a python float fails to compile here (torch 2.13: unbacked_bindings)
        score_mod = lambda score, b, h, q_idx, kv_idx: cap * torch.tanh(score / cap)  # noqa: E731
    flex = _compiled_flex()
    gqa = tq.shape[-3] != tk.shape[-3]
    return lambda: flex(tq, tk, tv, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa).reshape(q.shape).numpy()


def peak_memory(n: int, d: int = 64) -> None:
    print(f"\n## Peak memory: attn run Q K V (.npy, float32, {n}×{d}) -f npy (--emit output)\n")
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        files = []
        for name in "qkv":
            files.append(os.path.join(tmp, f"{name}.npy"))
            np.save(files[-1], rng.standard_normal((n, d), dtype=np.float32))
        out = os.path.join(tmp, "out.npy")
        start = time.perf_counter()
        # A forked child's max RSS counts the parent's pages before exec, so a
        # small Python process (no numpy) starts attn and reads its peak.
        measured = subprocess.run(
            [sys.executable, "-c", PEAK_OF_CHILD, out, sys.executable, "-m", "attncli", "run", *files, "-f", "npy"],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        elapsed = time.perf_counter() - start
        ok = np.load(out).shape == (n, d)
        print(
            f"max RSS {int(measured.stdout) / 1024:.0f} MiB in {elapsed:.2f} s "
            f"({'ok' if ok else 'FAILED'}; the full {n}×{n} float32 weights alone: {n * n * 4 / 2**30:.1f} GiB)"
        )


def csv_reading(rows: int, d: int = 64) -> None:
    """attn's CSV reader against np.loadtxt (numpy's C parser) on the same bytes."""
    import io

    from attncli.readers import read_matrix

    print(f"\n## Reading a {rows:,} × {d} CSV (float64 written with repr), best of 3, seconds\n")
    values = np.random.default_rng(0).standard_normal((rows, d))
    data = ("\n".join(",".join(row) for row in values.astype(str).tolist()) + "\n").encode()
    contenders = {
        "attn (read_matrix)": lambda: read_matrix(data, "big.csv").values,
        "np.loadtxt": lambda: np.loadtxt(io.BytesIO(data), delimiter=",", ndmin=2),
    }
    best = {name: math.inf for name in contenders}
    for _ in range(3):
        for name, fn in contenders.items():
            start = time.perf_counter()
            result = fn()
            best[name] = min(best[name], time.perf_counter() - start)
            assert np.array_equal(result, values), name
    for name, seconds in best.items():
        print(f"{name:<20} {seconds:6.2f}   {len(data) / seconds / 2**20:5.0f} MiB/s")


def startup(runs: int) -> None:
    """Whole processes, interleaved: attn --help against a bare Typer app (its --help), and attn run,
    explain and softmax against a Typer app that imports numpy and prints a Rich table."""
    print(f"\n## Start-up: median (min) of {runs} runs each, interleaved, milliseconds\n")
    # An installed package has its bytecode compiled (pip does it); the source tree gets the same here,
    # even where PYTHONDONTWRITEBYTECODE keeps Python from writing it (it still reads it).
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(ROOT / "attncli")],
        check=True,
        env={k: v for k, v in _env().items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    with tempfile.TemporaryDirectory() as tmp:
        bare, table = os.path.join(tmp, "bare.py"), os.path.join(tmp, "table.py")
        Path(bare).write_text(BARE_APP)
        Path(table).write_text(TABLE_APP)
        attn = [sys.executable, "-m", "attncli"]
        commands = {
            "bare Typer app --help": ([sys.executable, bare, "--help"], None),
            "attn --help": ([*attn, "--help"], "bare Typer app --help"),
            "Typer + numpy + Rich table app": ([sys.executable, table], None),
            "attn run samples/colors.yaml -f json": (
                [*attn, "run", "samples/colors.yaml", "-f", "json"],
                "Typer + numpy + Rich table app",
            ),
            "attn run samples/colors.yaml -f table": (
                [*attn, "run", "samples/colors.yaml", "-f", "table"],
                "Typer + numpy + Rich table app",
            ),
            "attn softmax 1 2 3 -f json": (
                [*attn, "softmax", "1", "2", "3", "-f", "json"],
                "Typer + numpy + Rich table app",
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, (command, _) in commands.items():
                start = time.perf_counter()
                subprocess.run(command, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, check=True)
                times[name].append(time.perf_counter() - start)
        for name, ts in times.items():
            median, against = statistics.median(ts), commands[name][1]
            ratio = f"   {median / statistics.median(times[against]):.2f}× {against}" if against else ""
            print(f"{name:<40} {median * 1000:6.0f} ({min(ts) * 1000:4.0f}){ratio}")


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("COLUMNS", None)
    return env


def machine() -> None:
    print("# attn benchmarks")
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else "?"
    )
    try:
        import torch

        torch_version = f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    except ImportError:
        torch_version = "torch not installed"
    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    print(
        f"\n{cpu}, {len(os.sched_getaffinity(0))} cores; Python {platform.python_version()}, "
        f"numpy {np.__version__} ({blas.get('name')} {blas.get('version')}), {torch_version}; "
        f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n up to 4096, fewer start-up runs")
    parser.add_argument(
        "--shapes", action="store_true", help="only the table of the shapes models run, and what the mask spares"
    )
    parser.add_argument("--no-flex", action="store_true", help="no FlexAttention column (it compiles for ~20 s a row)")
    parser.add_argument(
        "--backward",
        action="store_true",
        help="only the backward pass (beside torch, what causal spares, peak memory) and one worker",
    )
    parser.add_argument("--startup", action="store_true", help="only the start-up table")
    parser.add_argument("--check", action="store_true", help="only attn check beside attn run (check_rows.py)")
    args = parser.parse_args()
    machine()
    if args.startup:
        startup(5 if args.quick else 30)
        return
    if args.check:
        from check_rows import check_table

        check_table(1 if args.quick else 2)
        return
    if args.backward:
        gemm_rates()
        backward(3 if args.quick else 7)
        backward_spared(3 if args.quick else 7)
        backward_memory([2048, 8192] if args.quick else [4096, 16384])
        one_worker(3 if args.quick else 5)
        return
    shapes(2 if args.quick else 3, flex=not args.no_flex)
    spared(6 if args.quick else 12)
    if args.shapes:
        return
    gemm_rates()
    backward(3 if args.quick else 7)
    backward_spared(3 if args.quick else 7)
    backward_memory([2048, 8192] if args.quick else [4096, 16384])
    one_worker(3 if args.quick else 5)
    kernels([1024, 4096] if args.quick else [1024, 4096, 8192, 16384])
    peak_memory(4096 if args.quick else 16384)
    from check_rows import check_table

    check_table(1 if args.quick else 2)
    csv_reading(10_000 if args.quick else 100_000)
    startup(5 if args.quick else 30)


if __name__ == "__main__":
    main()
