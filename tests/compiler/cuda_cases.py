"""The CUDA target's cases, run under the CUDA simulator in a process of their own
(`test_cuda_target.py` starts it with ``NUMBA_ENABLE_CUDASIM=1``, which must be set before
``numba.cuda`` is first imported): each compiled program or gradient against the
interpreter, to 1e-12 relative. Prints one JSON line: case name -> "ok" or the failure.
"""

from __future__ import annotations

import json
import sys
import threading
import traceback
from pathlib import Path

import numpy as np

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.classical.elementwise import BINARY, PRIMITIVES, UNARY
from qdiff.classical.shape import rev_p
from qdiff.compiler import CompiledProgram, NotCompilableError
from qdiff.compiler.cuda.transfers import last_call
from qdiff.ir.errors import LoopLimitError, QdiffError
from qdiff.ir.tracer import bind
from tests.backends import RTOL, assert_agree
from tests.compiler.test_compiled_programs import EDGES, PROGRAMS, _leaves, _scalar

PRIMAL = ["elementwise at edges", "recurrence", "checkpointed loop", "while loop", "switch",
          "map over rows", "scan and reduce", "hist and scatter", "indexing", "shapes",
          "reductions", "einsums", "logsumexp", "float32", "integers", "empty arrays"]
GRADIENT = ["recurrence", "checkpointed loop", "while loop", "switch", "map over rows",
            "scan and reduce", "hist and scatter", "reductions", "einsums", "logsumexp"]
RNG = np.random.default_rng(11)


def _map_with_loop(x, a):
    # a scalar lambda with a counted loop: one thread per element
    return qdiff.map(lambda v: qdiff.fori_loop(0, 3, lambda i, c: qnp.sin(c) * a + v, v), x)


def _named_reductions(x):
    return (qdiff.reduce("add", 0.5, x), qdiff.reduce("max", -np.inf, x),
            qdiff.reduce("mul", 1.0, x[:5]), qdiff.scan("mul", 1.0, x[:6]),
            qdiff.scan("add", 0.25, x), qdiff.scan("max", -np.inf, x - x[0]))


def _hist_operators(v, k):
    index = np.array([0, 2, 0, 7, -1, 3, 3, 3])
    return (qdiff.hist(qnp.zeros(4), "mul", 1.0, index, v),
            qdiff.hist(qnp.zeros(4, dtype=np.int64), "max", 0, index, k),
            qdiff.hist(qnp.zeros(4), lambda a, b: a + b * b, 0.0, index, v),
            qdiff.hist(qnp.zeros((4, 2)), "add", qnp.zeros(2), index,
                       qnp.stack([v, v * 2.0], axis=1)))


def _scatter_rows(m):
    return qdiff.scatter(qnp.zeros((4, 3)), np.array([2, 2, 0, 5, 2]), m)


def _partial_reductions(t):
    # over a leading axis (atomics), over the middle one (one thread), products and maxima
    return (qnp.sum(t, axis=0), qnp.prod(t, axis=1), qnp.max(t, axis=0), qnp.min(t, axis=2),
            qnp.sum(qnp.exp(t), axis=(1, 2)))


def _kernel_forms(x, h, k, d):
    # every primitive the CUDA target writes its own way (compiler/cuda/elementwise.py), on
    # float64 edges, float32 and integers (NumPy's zero-divisor and sign rules included)
    forms = lambda v, w: (qnp.floor(v), qnp.ceil(v), qnp.round(v), qnp.abs(v), -v,  # noqa: E731
                          qnp.sign(v), qnp.floor_divide(v, w), qnp.remainder(v, w))
    floats = lambda v, w: (qnp.exp(v), qnp.expm1(v), qnp.log1p(v), qnp.sqrt(v),  # noqa: E731
                           qnp.power(v, w))
    return (*forms(x, x[::-1]), *floats(x, x[::-1]), *forms(h, h[::-1]), *floats(h, h[::-1]),
            *forms(k, d), k ** qnp.abs(d))


def _complex_sign(x, z, w):
    # z / |z| in a device function (complex numbers are not ordered); real outputs, so that
    # the gradient case takes the derivative in x
    s, t = qnp.sign(z), qnp.sign(w)
    return qnp.real(s) * x, qnp.imag(s), qnp.real(t), qnp.imag(t)


def _chain(x, y):
    # an elementwise kernel, a blocked scan (three kernels), another elementwise kernel
    return qnp.cumsum(qnp.sin(x) * y) * x


def _gather_between(x, y):
    # the gather is a kernel between the kernels (its constant indices go over instead of
    # its operand coming back and its result going over again)
    return qnp.cumsum((qnp.sin(x) * y)[np.array([3, 0, 1, 5, 2, 4])]) * x


def _host_solve_between(x, y):
    # a dense solve runs on the host, between the kernels
    return qnp.cumsum(qnp.linalg.solve(4.0 * np.eye(6) + 0.5, qnp.sin(x) * y)) * x


def _loop_of_kernels(x, y):
    return qdiff.fori_loop(0, 3, lambda i, c: qnp.cumsum(qnp.sin(c) * y), x)


def _checkpointed_loop_of_kernels(x, y):
    # a loop of kernels under `grad`: its carry is checkpointed at each step; it came back
    # to a host buffer and went over again at every step, forward, and the reverse loop's
    # cotangents came back at every step too
    return qnp.sum(qdiff.fori_loop(0, 4, lambda i, c: qnp.sin(c) * y + c, x))


def _rows_in_a_loop(m, w):
    # rows of an argument and of an array a kernel made, read by kernels in a host loop
    # (ADBench D-LSTM's shape): views on the device, nothing copied per step
    e = qnp.exp(m)
    return qdiff.fori_loop(0, m.shape[0], lambda i, c: c * qnp.sin(e[i]) + m[i] * w, w)


def _reductions_feed_kernels(x, y):
    # full reductions whose scalars feed scalar code (a log, a running total) that feeds
    # kernels, in a loop (ADBench D-LSTM's shape): each scalar came back at every step
    def step(i, carry):
        c, total = carry
        c = qnp.sin(c) * y - qnp.log(qnp.sum(qnp.exp(c)))
        return c, total + 0.5 * qnp.sum(c * y)
    return qdiff.fori_loop(0, 4, step, (x, 0.0))


def _objective_of_reductions(x, y):
    c, total = _reductions_feed_kernels(x, y)
    return qnp.sum(c) + total


def _hist_in_a_loop(x, k):
    # each step's hist adds into a copy of a constant: the copy was made on the host and
    # sent over at every step
    return qdiff.fori_loop(0, 3, lambda i, c: c * 0.5 + qdiff.hist(
        qnp.array([0.0, 1.0, 2.0, 3.0]), "add", 0.0, k, qnp.sin(c)), x)


def _gathers_between_kernels(m, k):
    # gathers are kernels: with indices known when the code is written (checked then), and
    # with indices computed (negative ones too; a bad one is marked for the host, one
    # download); each took its operands back to the host and sent its result over again
    rows = qnp.sin(m)[np.array([2, 0, 2])]
    picked = qnp.cos(m)[:, (k * 2) % 5 - 2]
    return rows * 2.0, picked + 1.0, qnp.exp(m)[k[0], 1] * m


def _scalar_carry_scaling_kernels(x, y):
    # a scalar carry made by a reduction and read by the next step's kernels; under `grad`
    # the loop is checkpointed and written again: a pass whose scalar operations ran on the
    # other side than the pass before shifted the generated names, and an array carry was
    # taken for a scalar (ValueError in rtc.full)
    def step(i, carry):
        c, t = carry
        return qnp.sin(c) * t + y, t * 0.5 + 0.1 * qnp.sum(c * c)
    c, t = qdiff.fori_loop(0, 4, step, (x, 1.0))
    return qnp.sum(c) * t


def _while_of_kernels(x):
    # the carry is tested on the host (a sum) and updated by kernels; a step count bounds it
    # too, so that the loop also ends where the kernels only get lowered (cuda_lowering.py)
    def cond(carry):
        c, n = carry
        return qnp.logical_and(qnp.sum(c) < 40.0, n < 4)

    def body(carry):
        c, n = carry
        return qnp.cumsum(c * 1.5) + 0.25, n + 1

    return qdiff.while_loop(cond, body, (x, 0), max_iter=20)[0]


def _map_of_rows_with_arrays(m, q):
    # each row's lambda holds vectors (a matrix-vector product, a shifted exponential): a
    # thread per row, its temporaries in local arrays (GMM's shape)
    def row(x):
        y = qnp.einsum("ij,j->i", q, x)
        e = qnp.exp(y - qnp.max(y))
        return qnp.log(qnp.sum(e)) + qnp.max(y), e * x
    return qdiff.map(row, m)


def _loop_of_branches(x, y, k):
    # each branch in turn; two read y, which the loop does not change: its upload goes
    # before the loop, never between the branches (before an `elif`: a SyntaxError)
    def step(i, c):
        return qdiff.switch((k + i) % 3, [lambda v: qnp.sin(v), lambda v: v * y,
                                          lambda v: qnp.cumsum(v + y)], c)
    return qdiff.fori_loop(0, 3, step, x)


def _long_sums(x, z):
    # few result elements, long sums: split into chunks added atomically (GMM's
    # Σ_n t̄[n,k,i] c[n,k,j]); complex sums have no atomic and keep a thread per element
    per_component = qnp.einsum("nki,nkj->kij", x, x)
    total = qnp.einsum("nki,nki->", x, x)
    return per_component, total, qnp.real(qnp.einsum("n,n->", z, z)), qnp.einsum("nki->ik", x)


def _gmm(alphas, means, icf, x):
    """ADBench's GMM objective (the one `benchmarks/classical_ad.py` times)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import classical_ad  # noqa: PLC0415

    return classical_ad.gmm(qnp, lambda lo, hi, body, init: qdiff.fori_loop(lo, hi, body, init),
                            alphas, means, icf, x)


def _reversals(t):
    # reversed axes (a scan's reverse pass) are kernels: they came back to the host, were
    # reversed there and went over again
    return bind(rev_p, qnp.sin(t), axes=(0, 2)) * 2.0 + bind(rev_p, t, axes=(1,))


def _loop_of_scans(x, y):
    # the reverse pass of each step reverses its cotangent around a scan: on the host, it
    # brought the loop's carry back at every step (9 uploads and 7 downloads per call)
    return qnp.sum(qdiff.fori_loop(0, 3, lambda i, c: qnp.cumsum(qnp.sin(c) * y), x))


def _block_loop(x, y, m):
    # nests, full reductions feeding scalar code and the next step's nests, a row of an
    # argument per step: each kernel fits one block, so the loop is one kernel (and, under
    # grad, so are the checkpointed loop and its reversal)
    def step(i, carry):
        c, total = carry
        c = qnp.tanh(c * m[i] + y) - qnp.log(qnp.sum(qnp.exp(c)))
        return c, total + qnp.sum(c * y)
    return qdiff.fori_loop(0, m.shape[0], step, (x, 0.0))


def _permuted_carries(x, y):
    # a carry taking another's value (a permutation): copied one after the other into
    # their own arrays in a one-block loop, one would take the other's new value
    def step(i, carry):
        a, b, c = carry
        return b, qnp.sin(a) * c + y, a + 1.0
    return qdiff.fori_loop(0, 4, step, (x, y, x * 2.0))


def _lstm(main, extra, state, sequence):
    """ADBench's D-LSTM loss (the one `benchmarks/classical_ad.py` times)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import classical_ad  # noqa: PLC0415

    return classical_ad.lstm(qnp, lambda lo, hi, body, init: qdiff.fori_loop(lo, hi, body, init),
                             main, extra, state, sequence)


def _lstm_args(chars: int, b: int, layers: int = 2) -> tuple:
    return (0.5 * RNG.normal(size=(2 * layers, 4 * b)), RNG.normal(size=(3, b)),
            RNG.normal(size=(2 * layers, b)), RNG.normal(size=(chars, b)))


def _transposes_and_extrema(m, t):
    moved = qnp.transpose(t, (2, 0, 1)) * 2.0
    return (moved, qnp.argmax(m, axis=1), qnp.argmin(m, axis=0), qnp.argmax(t, axis=1),
            qnp.argmin(m[0]))


EXTRA = {
    "kernel forms at edges": (_kernel_forms, (
        np.concatenate([EDGES, [-3.5, 2.5, 0.5, -0.5, 7.0, -7.0, 1e300, -1e-300]]),
        np.array([-2.5, 0.5, 3.75, -0.0, 1.0, np.inf, -1.5, 2.0], np.float32),
        np.array([7, -7, 0, 5, -9, 4, 6]), np.array([2, 3, -4, 0, 5, -3, 0]))),
    "complex sign": (_complex_sign, (
        RNG.normal(size=6), np.array([3 - 4j, 0j, -0j, np.nan + 1j, -2 + 0j, 1e-300 + 1e-300j]),
        np.array([1 + 1j, 0j, -5j, 0.5 - 2j, -1e-30 + 0j, 7 + 0j], np.complex64))),
    "map of a scalar loop": (_map_with_loop, (RNG.normal(size=7), 0.7)),
    "named reductions, several blocks": (_named_reductions, (RNG.uniform(0.5, 1.5, 300),)),
    "hist operators": (_hist_operators, (RNG.normal(size=8), np.arange(8) * 3 - 5)),
    "scatter rows, last write wins": (_scatter_rows, (RNG.normal(size=(5, 3)),)),
    "partial reductions": (_partial_reductions, (RNG.normal(size=(3, 4, 5)),)),
    "sum of 300, several blocks": (lambda x: qnp.sum(x * x) + qnp.max(x), (RNG.normal(size=300),)),
    "map of rows holding arrays": (_map_of_rows_with_arrays,
                                   (RNG.normal(size=(7, 3)), RNG.normal(size=(3, 3)))),
    "loop of branches of kernels": (_loop_of_branches,
                                    (RNG.normal(size=5), RNG.normal(size=5), 1)),
    "while loop of kernels": (_while_of_kernels, (RNG.uniform(0.1, 0.5, 6),)),
    "einsums with long sums": (_long_sums, (RNG.normal(size=(300, 2, 3)),
                                            RNG.normal(size=70) + 1j * RNG.normal(size=70))),
    "ADBench GMM, 12 points": (_gmm, (RNG.normal(size=3), RNG.normal(size=(3, 2)),
                                      0.1 * RNG.normal(size=(3, 3)), RNG.normal(size=(12, 2)))),
    "reversals": (_reversals, (RNG.normal(size=(2, 3, 4)),)),
    "scalar carry scaling kernels": (_scalar_carry_scaling_kernels,
                                     (RNG.normal(size=6), RNG.normal(size=6))),
    "gathers between kernels": (_gathers_between_kernels,
                                (RNG.normal(size=(3, 4)), np.array([1, 3, 2, 0]))),
    "one-block loop of nests and reductions": (_block_loop, (
        RNG.normal(size=5), RNG.normal(size=5), RNG.normal(size=(4, 5)))),
    "ADBench D-LSTM, 3 characters": (_lstm, _lstm_args(3, 3)),
    "loop of permuted carries": (_permuted_carries, (RNG.normal(size=5), RNG.normal(size=5))),
    "transposes, argmax and argmin": (_transposes_and_extrema, (
        np.array([[1.0, 3.0, 3.0, -1.0], [np.nan, 2.0, np.nan, 0.0], [0.0, -0.0, 5.0, 5.0]]),
        RNG.normal(size=(2, 3, 4)))),
}

# program, arguments, (uploads, downloads, bytes uploaded) in one call: arguments go to the
# device once, outputs come back once, and a value made on the device comes back only for
# the host
TRANSFERS = {
    "kernel -> kernel -> output": (_chain, (RNG.normal(size=6), RNG.normal(size=6)),
                                   (2, 1, 96)),
    "a gather between kernels": (_gather_between,
                                 (RNG.normal(size=6), RNG.normal(size=6)), (3, 1, 144)),
    "a host solve between kernels": (_host_solve_between,
                                     (RNG.normal(size=6), RNG.normal(size=6)), (3, 2, 144)),
    "a loop of kernels": (_loop_of_kernels, (RNG.normal(size=6), RNG.normal(size=6)),
                          (2, 1, 96)),
    "rows of device arrays in a loop": (_rows_in_a_loop,
                                        (RNG.normal(size=(4, 6)), RNG.normal(size=6)),
                                        (3, 1, 288)),
    # the gradient: x, y and the two cotangents over before the loops, the gradient back
    "gradient of a checkpointed loop of kernels": (
        qdiff.grad(_checkpointed_loop_of_kernels, argnums=(0, 1)),
        (RNG.normal(size=6), RNG.normal(size=6)), (4, 2, 192)),
    # reductions' scalars stay on the device, feeding one-thread kernels and the next
    # step's kernels: only the outputs come back (9 downloads before, one per reduction)
    "reductions feeding scalar code and kernels in a loop": (
        _reductions_feed_kernels, (RNG.normal(size=6), RNG.normal(size=6)), (2, 2, 96)),
    "gradient of a loop of scans, reversed on the device": (
        qdiff.grad(_loop_of_scans, argnums=(0, 1)),
        (RNG.normal(size=6), RNG.normal(size=6)), (4, 2, 192)),
    "gathers between kernels": (_gathers_between_kernels,
                                (RNG.normal(size=(3, 4)), np.array([1, 3, 2, 0])), (3, 5, 152)),
    "hist into a copy of a constant in a loop": (
        _hist_in_a_loop, (RNG.normal(size=4), np.array([2, 0, 2, 3])), (3, 1, 96)),
    "gradient of reductions feeding scalar code and kernels": (
        qdiff.grad(_objective_of_reductions, argnums=(0, 1)),
        (RNG.normal(size=6), RNG.normal(size=6)), (4, 2, 192)),
}

# of those uploads, the constants' (count, bytes): kept on the device after the first call
CONSTANT_UPLOADS = {"a gather between kernels": (1, 48), "gathers between kernels": (1, 24),
                    "hist into a copy of a constant in a loop": (1, 32)}

# what the generated code must hold (default: a kernel); scalar programs have none
KERNEL_TEXT = {
    **{name: () for name in ("recurrence", "checkpointed loop", "while loop", "switch",
                             "indexing", "integers")},
    "hist operators": ("cuda.atomic.add", "cuda.atomic.max", "def hist"),
    "scatter rows, last write wins": ("cuda.atomic.max", "def scatter"),
    "partial reductions": ("cuda.atomic.add",),
    "sum of 300, several blocks": ("rtc.launch(nest", ", 3, 128, "),
    "map of a scalar loop": ("def map",),
    "map of rows holding arrays": ("def rows", "cuda.local.array("),
    "complex sign": ("rtc.complex_sign(",),
    "named reductions, several blocks": ("def fold", "def scan", "def offsets", ", 3, 128, "),
    "einsums": ("def einsum",),
    "einsums with long sums": ("def einsum", "cuda.atomic.add("),
    "transposes, argmax and argmin": ("def transpose", "def argext"),
    "reversals": ("def rev",),
    "gathers between kernels": ("def gather",),
    "one-block loop of nests and reductions": ("def loop", "rtc.launch(loop"),
    "ADBench D-LSTM, 3 characters": ("def loop", "rtc.launch(loop"),
    "while loop of kernels": ("def loop", "while True:"),
}


def assert_agree_on_gpu(compiled, reference, where: str) -> None:
    """Each output equals the interpreter's to 1e-12 relative; float32 outputs to 4 units in
    the last place: a GPU's single-precision exp, log, ... are within 2 ulp of the exact
    result (CUDA's documented bounds), not NumPy's correctly rounded value (seen on an
    H100: exp of float32 one ulp apart)."""
    got, want = _leaves(compiled), _leaves(reference)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        single = np.asarray(b).dtype in (np.float32, np.complex64)
        assert_agree(a, b, f"{where}, output {k}",
                     rtol=4 * float(np.finfo(np.float32).eps) if single else RTOL)


def elementwise_programs(dtypes: tuple[str, ...]):
    """(label, program, operands): one program per elementwise primitive and operand dtype
    among ``dtypes`` that the primitive accepts."""
    for name in (*UNARY, *BINARY):
        for dtype in dtypes:
            operands = [np.ones(4, dtype)] * (1 if name in UNARY else 2)
            try:
                primitive = PRIMITIVES[name]
                program = qdiff.trace(lambda *xs, p=primitive: bind(p, *xs), *operands)
            except QdiffError:
                continue  # the primitive refuses this dtype
            yield f"{name} of {dtype}", program, operands


def primal(name: str) -> None:
    f, args = {**PROGRAMS, **EXTRA}[name]
    program = qdiff.trace(f, *args)
    compiled = CompiledProgram(program, backend="numba-cuda")
    for expected in KERNEL_TEXT.get(name, ("@cuda.jit",)):
        assert expected in compiled.source, f"{name}: no {expected!r} in the generated code"
    assert_agree_on_gpu(compiled(*args), program(*args), name)


def gradient(name: str) -> None:
    f, args = {**PROGRAMS, **EXTRA}[name]
    numbers = tuple(k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f")
    derivative = qdiff.grad(_scalar(f), argnums=numbers)
    compiled = qdiff.jit(derivative, backend="numba-cuda")
    assert_agree_on_gpu(compiled(*args), derivative(*args), name)


def transfers(name: str) -> None:
    f, args, (uploads, downloads, upload_bytes) = TRANSFERS[name]
    program = qdiff.trace(f, *args)
    compiled = CompiledProgram(program, backend="numba-cuda")
    assert compiled.source.count("@cuda.jit") >= 2, compiled.source
    # constants go over at the first call only (they went at every call)
    constants, constant_bytes = CONSTANT_UPLOADS.get(name, (0, 0))
    for call in range(3):  # counted per call
        assert_agree_on_gpu(compiled(*args), program(*args), name)
        counted, later = last_call(), call > 0
        assert (counted.uploads, counted.downloads) == (
            uploads - later * constants, downloads), counted
        assert counted.upload_bytes == upload_bytes - later * constant_bytes, counted


def _sums_over_points(t, w, k):
    # atomics over the outermost level into results indexed by the others (sum of floats,
    # max of integers) beside a full sum and an elementwise output, in one nest
    terms = qnp.exp(t) * w
    extremes = (qnp.max(k * 2 + 1, axis=0),) if t.shape[0] else ()  # none of no points
    return qnp.sum(terms, axis=0), *extremes, qnp.sum(t * t), terms


def _kmeans(centres, points):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import classical_ad  # noqa: PLC0415

    return classical_ad.kmeans(qnp, None, centres, points)


def chunks_of_points(_: str) -> None:
    # a nest whose atomics sum over its outermost level (k-means' Σ_n into (k, d): 100000
    # atomics per address) loops over chunks of that level in each thread, adding once per
    # chunk; a launch of 8 threads is the target here, so small sizes are cut into chunks
    from qdiff.compiler.cuda import nest  # noqa: PLC0415

    saved, nest.FILLING_THREADS = nest.FILLING_THREADS, 8
    try:
        # (points, ...): 2 chunks of 7 and 6; one chunk of 29 over 200 threads (2 blocks);
        # one point and none: no chunks
        for shape, chunked in [((13, 3, 2), True), ((29, 40, 5), True), ((1, 3, 2), False),
                               ((0, 3, 2), False)]:
            args = (RNG.normal(size=shape), RNG.normal(size=shape[1:]),
                    RNG.integers(-50, 50, size=shape))
            program = qdiff.trace(_sums_over_points, *args)
            compiled = CompiledProgram(program, backend="numba-cuda")
            assert ("min(c" in compiled.source) == chunked, compiled.source
            assert_agree_on_gpu(compiled(*args), program(*args), f"sums over points {shape}")
        for centres, points in [((3, 2), (37, 2)), ((4, 3), (1, 3))]:
            args = (RNG.normal(size=centres), RNG.normal(size=points))
            derivative = qdiff.grad(_kmeans)
            compiled = qdiff.jit(derivative, backend="numba-cuda")
            assert_agree_on_gpu(compiled(*args), derivative(*args), f"k-means {points}")
            assert ("min(c" in compiled.source) == (points[0] > 1), compiled.source
    finally:
        nest.FILLING_THREADS = saved


def _rows_per_thread(x, means, lower):
    # GMM's Σ_j L[k, i, j] (x[n, j] - μ[k, j]): the centred row, made in the nest, is kept
    # per thread in a local array before the loop over i (it was made again for each i),
    # and L is read with i last; a product by an operand the nest makes at the innermost
    # level keeps the recomputation
    centered = x[:, None, :] - means[None, :, :]
    transformed = qnp.einsum("kij,nkj->nki", lower, centered)
    inner = qnp.einsum("nki,nki->nk", qnp.sin(transformed), centered * 2.0)
    return qnp.sum(transformed ** 2, axis=2), inner


def rows_per_thread(_: str) -> None:
    # points × components not a multiple of a block; one point, one component, one
    # dimension; no points
    for n, k, d in [(13, 3, 5), (1, 1, 1), (0, 2, 3), (7, 2, 40)]:
        args = (RNG.normal(size=(n, d)), RNG.normal(size=(k, d)), RNG.normal(size=(k, d, d)))
        program = qdiff.trace(_rows_per_thread, *args)
        compiled = CompiledProgram(program, backend="numba-cuda")
        assert ("cuda.local.array(" in compiled.source) == (d > 1), compiled.source
        # L[k, i, j] is read from a copy L[k, j, i] (i varies from lane to lane), unless L is
        # as large as the nest (n <= d)
        assert ("def transpose" in compiled.source) == (1 < d < n), compiled.source
        assert_agree_on_gpu(compiled(*args), program(*args), f"rows per thread {n, k, d}")
        derivative = qdiff.grad(lambda *a: qnp.sum(_rows_per_thread(*a)[0]), argnums=(0, 1, 2))
        compiled = qdiff.jit(derivative, backend="numba-cuda")
        assert_agree_on_gpu(compiled(*args), derivative(*args), f"its gradient {n, k, d}")


def _step(i, c):
    return qnp.sin(c) * 0.5 + qnp.sum(c)


def kernels_written_once(_: str) -> None:
    # two loops with the same body wrote its kernels twice, and numba-cuda compiled each
    # (the D-LSTM gradient's 26 kernels held 20 different ones)
    def twice(x):
        return qdiff.fori_loop(0, 2, _step, qdiff.fori_loop(0, 2, _step, x) * 2.0)

    for x in (RNG.normal(size=5), RNG.normal(size=300)):
        program = qdiff.trace(twice, x)
        compiled = CompiledProgram(program, backend="numba-cuda")
        # the body's two (with the sum's final pass over 3 blocks, three), and the doubling;
        # a body of one block is one loop kernel calling the two as device functions, and
        # the two loops' kernels are written once too
        kernels = compiled.source.count("@cuda.jit")
        assert kernels == 4, compiled.source
        launches = compiled.source.count("rtc.launch(")
        assert launches == (3 if x.size <= 128 else 5), compiled.source
        assert_agree_on_gpu(compiled(x), program(x), f"two loops of the same body, {x.size}")


def buffers_kept_from_call_to_call(_: str) -> None:
    # the host function allocated every result, scratch and upload buffer on the device
    # anew at every call (1991 allocations per call of the D-LSTM gradient at the quick size)
    from qdiff.compiler.cuda import device as rtc  # noqa: PLC0415  (imports numba.cuda)

    # five rows: a program (and generated module, and pool) no other case compiles
    args = (RNG.normal(size=(5, 6)), RNG.normal(size=6))
    other = (RNG.normal(size=(5, 6)), RNG.normal(size=6))
    program = qdiff.trace(_rows_in_a_loop, *args)
    compiled = CompiledProgram(program, backend="numba-cuda")
    first = compiled(*args)
    kept, allocated = np.array(first, copy=True), last_call().allocations
    assert allocated >= 4, last_call()  # the uploads, e, the carries of the steps
    second = compiled(*other)
    assert last_call().allocations == 0, last_call()
    assert_agree_on_gpu(second, program(*other), "second call")
    assert np.array_equal(first, kept), "an output kept by the caller changed"
    # a call made while another is running (in another thread, or from inside it) takes
    # buffers of its own (the simulator runs one kernel at a time: the pool is held here)
    pool, arrays, together = rtc.BufferPool(), [], threading.Barrier(2)

    def hold() -> None:
        with pool.call():
            together.wait()
            arrays.append(rtc.empty((3,), np.float64))
            together.wait()
    threads = [threading.Thread(target=hold) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with pool.call() as outer:
        inner_array = None
        with pool.call() as inner:
            inner_array = rtc.empty((3,), np.float64)
        assert inner is not outer and inner_array is not rtc.empty((3,), np.float64)
    assert len(arrays) == 2 and arrays[0] is not arrays[1]
    assert_agree_on_gpu(compiled(*args), kept, "the first inputs again")


def views_kept_from_call_to_call(_: str) -> None:
    # a reshaped view of a device array was made anew at every call (numba-cuda makes one in
    # Python, and types it again at the launch): 49 per call of GMM's gradient at d=10
    args = EXTRA["ADBench GMM, 12 points"][1]
    program = qdiff.trace(_gmm, *args)
    compiled = CompiledProgram(program, backend="numba-cuda")
    assert "rtc.view(" in compiled.source, compiled.source
    pool = compiled._steps[0].function.__globals__["_buffers"]
    compiled(*args)
    views = dict(pool.free[0].views)
    assert views, "no view kept"
    assert_agree_on_gpu(compiled(*args), program(*args), "second call")
    again = pool.free[0].views
    assert len(again) == len(views) and all(again[k][1] is v for k, (_, v) in views.items())


def transfers_per_thread(_: str) -> None:
    # one counter for the process: a call in another thread reset the counts this thread's
    # `last_call` gave, and a copy it made while this one's call ran was counted in it
    from qdiff.compiler.cuda import transfers as counter  # noqa: PLC0415

    chain, args, counts = TRANSFERS["kernel -> kernel -> output"]
    gather, other_args, other_counts = TRANSFERS["a gather between kernels"]
    here = CompiledProgram(qdiff.trace(chain, *args), backend="numba-cuda")
    there = CompiledProgram(qdiff.trace(gather, *other_args), backend="numba-cuda")
    seen = []

    def call_there() -> None:
        there(*other_args)
        seen.append(last_call())

    here(*args)
    thread = threading.Thread(target=call_there)
    thread.start()
    thread.join()
    mine = last_call()
    assert (mine.uploads, mine.downloads, mine.upload_bytes) == counts, mine
    theirs = seen[0]
    assert (theirs.uploads, theirs.downloads, theirs.upload_bytes) == other_counts, theirs
    counter.begin_call()  # a call of this thread running while the other thread calls
    counter.current().uploaded(8)
    thread = threading.Thread(target=call_there)
    thread.start()
    thread.join()
    counter.end_call("running")
    assert (last_call().uploads, last_call().downloads) == (1, 0), last_call()


def launch_warns_once(_: str) -> None:
    # numba-cuda warns at configuring a grid under 128 blocks; configured inside the
    # launch's warnings.catch_warnings at every launch, the warning was printed at every
    # launch (the block resets the registry that shows a warning once)
    import warnings  # noqa: PLC0415

    from qdiff.compiler.cuda import device as rtc  # noqa: PLC0415  (imports numba.cuda)

    class Kernel:
        def __init__(self) -> None:
            self.configured, self.ran = 0, []

        def __getitem__(self, grid):
            self.configured += 1
            warnings.warn(UserWarning(f"Grid size {grid[0]} will likely result in GPU "
                                      "under-utilization due to low occupancy."), stacklevel=2)
            return lambda *args: self.ran.append((grid, args))

    kernel = Kernel()
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        # `rtc.configured` is what `rtc.launch` runs (the numba-cuda lowering test replaces
        # `rtc.launch`)
        for step in range(3):
            rtc.configured(kernel, 1, 32)(step)
        rtc.configured(kernel, 2, 32)(3)
    assert kernel.ran == [((1, 32), (0,)), ((1, 32), (1,)), ((1, 32), (2,)), ((2, 32), (3,))]
    assert kernel.configured == 2, kernel.configured  # once per grid, not per launch
    assert not [w for w in shown if "Grid size" in str(w.message)], [str(w.message) for w in shown]


class _LaunchCounter:
    """Counts `device.launch` calls (every kernel launch of a generated module, the fills
    of `rtc.full` and the final folds included) while it is entered."""

    def __enter__(self) -> _LaunchCounter:
        from qdiff.compiler.cuda import device as rtc  # noqa: PLC0415  (imports numba.cuda)

        self.rtc, self.launch, self.count = rtc, rtc.launch, 0

        def counted(*args):
            self.count += 1
            return self.launch(*args)
        rtc.launch = counted
        return self

    def __exit__(self, *exc) -> None:
        self.rtc.launch = self.launch


def _launches(compiled, args) -> int:
    """Launches of one call of ``compiled`` (its result checked by the caller)."""
    with _LaunchCounter() as counter:
        compiled(*args)
    return counter.count


def one_block_loops(_: str) -> None:
    # a loop whose kernels each fit one block runs as one kernel of one block, looping inside:
    # the D-LSTM's launches per call no longer grow with its characters (they were 9 per step
    # of the value and 26 per step of the gradient); its gradient's checkpointed loop and
    # reversal too
    counts = {}
    for chars in (3, 6):
        args = _lstm_args(chars, 3)
        program = qdiff.trace(_lstm, *args)
        compiled = CompiledProgram(program, backend="numba-cuda")
        assert compiled.source.count("rtc.launch(loop") == 1, compiled.source
        counts["value", chars] = _launches(compiled, args)
        assert_agree_on_gpu(compiled(*args), program(*args), f"D-LSTM, {chars} characters")
        derivative = qdiff.grad(_lstm, argnums=(0, 1))
        jitted = qdiff.jit(derivative, backend="numba-cuda")
        jitted(*args)
        assert jitted.source.count("rtc.launch(loop") == 2, jitted.source
        counts["gradient", chars] = _launches(jitted, args)
        assert_agree_on_gpu(jitted(*args), derivative(*args), f"its gradient, {chars}")
    for kind in ("value", "gradient"):
        assert counts[kind, 3] == counts[kind, 6] <= 8, counts
    # a body whose kernels take more threads than a block holds keeps its launches per step
    # (blocks of 64 threads here, against 1024 on a GPU: small sizes in the simulator);
    # elementwise kernels of several blocks that fit one run in one (the D-LSTM gradient's
    # 224-thread kernel of 2 blocks of 128)
    from qdiff.compiler.cuda import block_loops  # noqa: PLC0415

    saved, block_loops.MAX_THREADS = block_loops.MAX_THREADS, 64
    try:
        for size, fused in ((40, True), (100, False)):
            for steps in (2, 3):
                args = (RNG.normal(size=size), RNG.normal(size=size),
                        RNG.normal(size=(steps, size)))
                program = qdiff.trace(lambda x, y, m: _block_loop(x, y, m)[0] * 2.0, *args)
                compiled = CompiledProgram(program, backend="numba-cuda")
                assert ("def loop" in compiled.source) == fused, compiled.source
                counts[size, steps] = _launches(compiled, args)
                assert_agree_on_gpu(compiled(*args), program(*args), f"{steps} of {size}")
    finally:
        block_loops.MAX_THREADS = saved
    assert counts[40, 3] == counts[40, 2] and counts[100, 3] > counts[100, 2], counts
    for steps in (2, 3):  # 200 elements: 2 blocks of 128 threads, one block of 256 here
        args = (RNG.normal(size=200), RNG.normal(size=(steps, 200)))
        program = qdiff.trace(lambda x, m: qdiff.fori_loop(
            0, m.shape[0], lambda i, c: qnp.sin(c) * m[i] + c, x), *args)
        compiled = CompiledProgram(program, backend="numba-cuda")
        assert "rtc.launch(loop0, 1, 256," in compiled.source, compiled.source
        counts[200, steps] = _launches(compiled, args)
        assert_agree_on_gpu(compiled(*args), program(*args), f"{steps} of 200")
    assert counts[200, 3] == counts[200, 2], counts


def _row_at(x, k):
    # the row's start, k + i, is not known from the loop's bounds: checked in the kernel
    return qdiff.fori_loop(0, 3, lambda i, c: qnp.sin(c) * x[k + i] + c, x[0])


def block_loop_marks_bad_starts(_: str) -> None:
    x, k = RNG.normal(size=(6, 4)), 2
    program = qdiff.trace(_row_at, x, k)
    compiled = CompiledProgram(program, backend="numba-cuda")
    assert "rtc.raise_marked(" in compiled.source and "def loop" in compiled.source
    for good in (0, 3, -6):
        assert_agree_on_gpu(compiled(x, good), program(x, good), f"rows from {good}")
    for bad in (4, -7):
        messages = []
        for errors in (compiled, program):
            try:
                errors(x, bad)
            except QdiffError as error:
                messages.append(str(error))
            else:
                raise AssertionError(f"{errors} read rows from {bad} of 6")
        # the compiled code's message names no index (an error code), the interpreter's does
        assert all("out of bounds for a slice of size 1 in an axis of size 6" in m
                   for m in messages), messages


def _hybrid(x):
    q = qm.qubits(1)
    qm.ry(qnp.sum(qnp.sin(x)), q[0])
    return qm.expval("Z", q)


def quantum_program_refused(_: str) -> None:
    x = np.array([0.1, 0.4])
    try:
        qdiff.jit(_hybrid, backend="numba-cuda")(x)
    except NotCompilableError as error:
        # quantum programs compile with the simulator's CPU kernels, for backend='numba'
        assert "backend='numba' only" in str(error), str(error)
    else:
        raise AssertionError("a quantum program compiled for the CUDA target")
    try:
        qdiff.jit(qdiff.grad(_hybrid), backend="numba-cuda")(x)
    except NotCompilableError as error:
        assert "backend='numba' only" in str(error), str(error)
    else:
        raise AssertionError("a quantum gradient compiled for the CUDA target")
    value = qdiff.jit(_hybrid, backend="numba-cuda", fallback="interpret")(x)
    assert abs(float(value) - np.cos(np.sum(np.sin(x)))) < 1e-12


def gather_out_of_bounds(_: str) -> None:
    # a gather kernel marks an index out of bounds for the host, which raises the
    # interpreter's error after the launch
    def f(x, k):
        return qnp.sin(x)[k * 2] * 2.0

    x, k = RNG.normal(size=5), np.array([1, 3])
    f_program = qdiff.trace(f, x, k)
    compiled = CompiledProgram(f_program, backend="numba-cuda")
    assert "def gather" in compiled.source
    assert_agree_on_gpu(compiled(x, np.array([2, -2])), f_program(x, np.array([2, -2])), "gather")
    for errors in (compiled, f_program):
        try:
            errors(x, k)
        except QdiffError as error:
            assert "out of bounds for axis 0 with size 5" in str(error), error
        else:
            raise AssertionError(f"{errors} gathered index 6 of 5")


def loop_limit_in_a_block_loop(_: str) -> None:
    # a while loop of kernels run as one kernel: its step limit is marked for the host
    def endless(x):
        return qdiff.while_loop(lambda c: qnp.sum(c * c) > -1.0, lambda c: qnp.sin(c) + 0.5, x,
                                max_iter=7)

    x = RNG.normal(size=5)
    f = CompiledProgram(qdiff.trace(endless, x), backend="numba-cuda")
    assert "def loop" in f.source and "rtc.raise_marked(" in f.source, f.source
    try:
        f(x)
    except LoopLimitError as error:
        assert "max_iter=7" in str(error)
    else:
        raise AssertionError("the while loop ran past max_iter")


def loop_limit(_: str) -> None:
    f = qdiff.jit(lambda x: qdiff.while_loop(lambda v: v > 0.0, lambda v: v + 1.0, x,
                                              max_iter=50), backend="numba-cuda")
    try:
        f(1.0)
    except LoopLimitError as error:
        assert "max_iter=50" in str(error)
    else:
        raise AssertionError("the while loop ran past max_iter")


def cases() -> dict:
    table = {f"primal: {n}": (primal, n) for n in [*PRIMAL, *EXTRA]}
    table.update({f"gradient: {n}": (gradient, n) for n in [*GRADIENT, *EXTRA]})
    table.update({f"transfers: {n}": (transfers, n) for n in TRANSFERS})
    table["buffers: kept from call to call"] = (buffers_kept_from_call_to_call, "")
    table["transfers: counted per thread"] = (transfers_per_thread, "")
    table["buffers: views kept from call to call"] = (views_kept_from_call_to_call, "")
    table["kernels the same but for names written once"] = (kernels_written_once, "")
    table["rows of contraction operands per thread"] = (rows_per_thread, "")
    table["atomics over chunks of points"] = (chunks_of_points, "")
    table["launches: configured once, no occupancy warning"] = (launch_warns_once, "")
    table["launches: a loop whose kernels fit a block is one kernel"] = (one_block_loops, "")
    table["error: a bad slice start in a one-block loop"] = (block_loop_marks_bad_starts, "")
    table["error: a quantum program on the CUDA target"] = (quantum_program_refused, "")
    table["error: a while loop past max_iter"] = (loop_limit, "")
    table["error: a one-block while loop past max_iter"] = (loop_limit_in_a_block_loop, "")
    table["error: a gather index out of bounds"] = (gather_out_of_bounds, "")
    return table


def main(selected: list[str]) -> None:
    results = {}
    for key, (run, name) in cases().items():
        if selected and key not in selected:
            continue
        try:
            run(name)
            results[key] = "ok"
        except Exception:  # noqa: BLE001  (reported to the test, which fails on it)
            results[key] = traceback.format_exc(limit=-6)
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
