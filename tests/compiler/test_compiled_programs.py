"""Compiled programs against the interpreter: a table of programs exercising every
compiled rule (primal and derivative programs), at edge values, agreeing to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from qdiff.compiler.lowering import RULES
from qdiff.ir.primitives import all_primitives
from tests.backends import assert_agree

EDGES = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-300, 3.0])
RNG = np.random.default_rng(7)


def _mat(*shape):
    return RNG.normal(size=shape)


def _loop_recurrence(a, b):
    return qdiff.fori_loop(0, 50, lambda i, x: qnp.sin(x) * a + b, 0.5)


def _checkpointed(a):
    return qdiff.fori_loop(0, 40, lambda i, x: qnp.cos(x) * a, 0.3, checkpoint=2)


def _while(a):
    return qdiff.while_loop(lambda x: x < 10.0, lambda x: x * a + 1.0, 0.5, max_iter=100)


def _cond(k, x):
    return qdiff.switch(k, [qnp.sin, lambda v: v * v, qnp.exp], x)


def _map_rows(m):
    return qdiff.map(lambda row: qnp.sum(row ** 2) * qnp.max(row), m)


def _scan_and_reduce(x):
    prefix = qdiff.scan("add", 0.0, x)
    product = qdiff.reduce(lambda a, b: a * b + 0.5 * a, 1.0, x)
    return prefix, product


def _hist_scatter(v):
    h = qdiff.hist(qnp.zeros(4), "add", 0.0, np.array([0, 2, 0, 7, -1, 3]), v)
    s = qdiff.scatter(qnp.ones(4), np.array([1, 1, 3, 9, 0, 2]), v)
    return h * 2.0, s


def _indexing(m, i):
    row = m[i]
    update = m.at[1, 2].set(row[0] * 3.0)
    return row, update, m[::-1, 1:3], m[np.array([2, 0, 0])], qnp.argmax(m, axis=1)


def _shapes(m):
    return (qnp.concatenate([m, m * 2.0], axis=0).T, qnp.reshape(m, (-1,)),
            qnp.broadcast_to(m[:, :1], (3, 4)) + qnp.arange(4.0))


def _reductions(t):
    return (qnp.sum(t, axis=(0, 2)), qnp.max(t, axis=1), qnp.prod(t, axis=0), qnp.min(t),
            qnp.sum(t * t))


def _einsums(a, b):
    small = qnp.einsum("kij,nkj->nki", a, b)
    large = qnp.einsum("ij,jk->ik", qnp.ones((3, 80)), qnp.ones((80, 2)) * a[0, 0, 0])
    return small, large, qnp.einsum("kij,nki->kj", a, small)


def _logsumexp(x):
    top = qnp.max(x, axis=1)
    return qnp.sum(qnp.log(qnp.sum(qnp.exp(x - top[:, None]), axis=1)) + top)


def _float32(x):
    return qnp.sum(qnp.tanh(x) * np.float32(1.5)) + x[0]


def _ints(i, j):
    return (i // j, i % j, qnp.maximum(i, j), (i * 3 - j) ** 2, i < j)


PROGRAMS = {
    "elementwise at edges": (lambda x: (qnp.sin(x), qnp.exp(x) / (1.0 + x * x),
                                        qnp.log(qnp.abs(x)), qnp.sqrt(x), qnp.maximum(x, 1.0),
                                        qnp.where(x > 0, x, -x), qnp.round(x * 0.5),
                                        qnp.arctan2(x, 2.0), x ** 2.0, qnp.sign(x)), (EDGES,)),
    "recurrence": (_loop_recurrence, (0.3, 0.2)),
    "checkpointed loop": (_checkpointed, (1.1,)),
    "while loop": (_while, (1.5,)),
    "switch": (_cond, (1, 0.7)),
    "map over rows": (_map_rows, (_mat(5, 3),)),
    "scan and reduce": (_scan_and_reduce, (_mat(6),)),
    "hist and scatter": (_hist_scatter, (_mat(6),)),
    "indexing": (_indexing, (_mat(3, 4), 1)),
    "shapes": (_shapes, (_mat(3, 4),)),
    "reductions": (_reductions, (_mat(3, 4, 5),)),
    "einsums": (_einsums, (_mat(2, 3, 4), _mat(5, 2, 4))),
    "logsumexp": (_logsumexp, (_mat(6, 5),)),
    "float32": (_float32, (np.linspace(-1, 1, 5, dtype=np.float32),)),
    "integers": (_ints, (np.array([7, -7, 0, 5]), np.array([2, 3, -4, 5]))),
    "empty arrays": (lambda x: (qnp.sum(x), qnp.exp(x) * 2.0), (np.zeros(0),)),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_compiled_program_equals_interpreter(name):
    f, args = PROGRAMS[name]
    program = qdiff.trace(f, *args)
    compiled = CompiledProgram(program)
    assert_agree_tree(compiled(*args), program(*args), name)


GRADIENTS = ["recurrence", "checkpointed loop", "while loop", "switch", "map over rows",
             "scan and reduce", "hist and scatter", "reductions", "einsums", "logsumexp"]


def _scalar(f):
    def loss(*args):
        leaves = [qnp.sum(qnp.asarray(v) * 1.0) for v in _leaves(f(*args))]
        return sum(leaves[1:], leaves[0])
    return loss


def _leaves(out):
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("name", GRADIENTS)
def test_compiled_gradient_equals_interpreter(name):
    f, args = PROGRAMS[name]
    numbers = tuple(k for k, a in enumerate(args) if np.asarray(a).dtype.kind == "f")
    gradient = qdiff.grad(_scalar(f), argnums=numbers)
    assert_agree_tree(qdiff.jit(gradient)(*args), gradient(*args), name)


@pytest.mark.parametrize("name", ["recurrence", "map over rows", "einsums", "logsumexp"])
def test_compiled_forward_and_reverse_agree(name):
    """<vjp(c), t> == <c, jvp(t)>, both compiled."""
    f, args = PROGRAMS[name]
    loss = _scalar(f)
    tangents = tuple(RNG.normal(size=np.shape(a)) for a in args)
    _, directional = qdiff.jvp(loss, args, tangents, jit=True)
    _, back = qdiff.vjp(loss, *args, jit=True)
    cotangents = back(np.float64(1.0))
    total = sum(float(np.sum(c * t)) for c, t in zip(cotangents, tangents))
    assert total == pytest.approx(float(directional), rel=1e-10)


def assert_agree_tree(compiled, reference, where):
    got, want = _leaves(compiled), _leaves(reference)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_agree(a, b, f"{where}, output {k}")


def test_every_classical_primitive_compiles():
    """A new primitive joins the compiler's table (quantum primitives run on simulators)."""
    quantum = {"qalloc", "qextend", "gate", "fused_gate", "measure", "reset", "postselect",
               "expval", "probs", "statevector", "sample", "bit_to_int",
               "derivative_call",  # a quantum program's derivative, run on the simulator
               "compiled_segment"}  # already compiled: a segment of a program run around it
    missing = [n for n, p in all_primitives().items() if p not in RULES and n not in quantum]
    assert missing == []
