"""What the compiler does to avoid memory traffic, each checked twice: the compiled result
equals the interpreter's, and the generated source lacks the array the optimization removes
(never a timing)."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from qdiff.compiler.rematerialize import RECOMPUTED_CONTRACTION_MIN
from qdiff.compiler.tiles import TILE_ROWS
from tests.backends import assert_agree

RNG = np.random.default_rng(11)


def _compiled(f, *args, argnums=0):
    """The gradient of ``f`` compiled and interpreted, checked equal; its source."""
    gradient = qdiff.grad(f, argnums=argnums)
    compiled = qdiff.jit(gradient)
    got, want = compiled(*args), gradient(*args)
    for k, (a, b) in enumerate(zip(np.atleast_1d(got) if not isinstance(got, tuple) else got,
                                   np.atleast_1d(want) if not isinstance(want, tuple) else want)):
        assert_agree(a, b, f"output {k}")
    return compiled.compiled(*args).source


def _loop_bodies(source: str) -> str:
    """The text inside the outermost ``for`` loops of the generated function."""
    return source.split("    for ", 1)[1] if "    for " in source else ""


def _kmeans(centres, points):
    distances = qnp.sum((points[:, None, :] - centres[None, :, :]) ** 2, axis=2)
    return qnp.sum(qnp.min(distances, axis=1))


def test_kmeans_gradient_stores_no_point_centre_array():
    """The broadcasts ``points[:, None]`` and ``centres[None]`` are read by the primal's nest
    and the adjoint's: each reader recomputes them, so no (n, k, d) array is written."""
    source = _compiled(_kmeans, RNG.normal(size=(4, 3)), RNG.normal(size=(50, 3)))
    assert "np.empty((50, 4, 3" not in source and "(600,)" not in source


def test_reduction_joins_the_nest_of_its_operand_across_a_scalar_step():
    """``sum(y) * 3`` needs the first nest finished; ``sum(exp(y))`` comes after it in the
    program but is scheduled into that nest, so ``y`` is never stored."""
    program = qdiff.trace(lambda x: (lambda y: (qnp.sum(y) * 3.0, qnp.sum(qnp.exp(y))))(x * 2.0),
                          np.ones(40))
    x = RNG.normal(size=40)
    compiled = CompiledProgram(program)
    for got, want in zip(compiled(x), program(x)):
        assert_agree(got, want, "sums")
    assert compiled.source.count("for ") == 1 and "np.empty" not in compiled.source


def _windows(x):
    left = qnp.sin(x[:, 1:3])                         # a slice of columns
    stacked = qnp.concatenate([left, x[:, :1] * 2.0], axis=1)
    return qnp.sum(stacked ** 2)


def test_slices_concatenations_and_zero_paddings_fuse_into_loop_nests():
    """Column slices, concatenations and their adjoints (scatters into zeros) are element
    expressions in the nest that reads them, not copied arrays."""
    x = RNG.normal(size=(5, 3))
    program = qdiff.trace(_windows, x)
    assert_agree(CompiledProgram(program)(x), program(x), "primal")
    source = _compiled(_windows, x)
    assert "np.concatenate" not in source and "].copy()" not in source
    assert "scatter" not in source and ".copy()" not in source


def _accumulate(x):
    def body(i, acc):
        return acc + qnp.sin(x * i)
    return qnp.sum(qdiff.fori_loop(0, 6, body, qnp.zeros(8)) ** 2)


def test_loop_carry_is_updated_in_place():
    """``acc + f(x)`` with ``acc`` a carry the loop owns and reads no more is stored into
    ``acc``'s own array: no allocation per iteration, in the primal and in the reversed loop."""
    x = RNG.normal(size=8)
    program = qdiff.trace(_accumulate, x)
    compiled = CompiledProgram(program)
    assert_agree(compiled(x), program(x), "primal")
    assert "np.empty" not in _loop_bodies(compiled.source)
    gradient_source = _compiled(_accumulate, x)
    reversed_loop = gradient_source.rsplit("    for ", 1)[1]
    assert "np.empty" not in reversed_loop


def test_one_row_of_a_block_is_read_as_a_row():
    """``m[i]`` in a loop (a dynamic slice of one row, then a reshape dropping the axis)
    is ``m[s]``: a view, no copy and no reshape call."""
    m = RNG.normal(size=(4, 5))
    f = lambda m: qdiff.fori_loop(0, 4, lambda i, s: s + qnp.sum(qnp.tanh(m[i])), 0.0)  # noqa: E731
    program = qdiff.trace(f, m)
    compiled = CompiledProgram(program)
    assert_agree(compiled(m), program(m), "primal")
    body = _loop_bodies(compiled.source)
    assert ".copy()" not in body and ".reshape(" not in body


def test_repeated_map_outputs_agree_with_the_interpreter():
    """A map returning one value twice computes and stores it once; a repeat that is a
    program output still gets its own array."""
    def twice(v):
        e = qnp.exp(v)
        return e, e

    def f(x, m):
        a, b = qdiff.map(twice, x)
        return qnp.sum(a), b @ m, b

    x, m = RNG.normal(size=6), RNG.normal(size=(6, 2))
    program = qdiff.trace(f, x, m)
    got, want = CompiledProgram(program)(x, m), program(x, m)
    for k, (a, b) in enumerate(zip(got, want)):
        assert_agree(a, b, f"output {k}")
    got[2][0] = 123.0  # the returned array is the caller's own
    assert CompiledProgram(program)(x, m)[2][0] != 123.0


def test_constants_never_share_a_name_with_a_local():
    """Regression: a loop nest's flat index named ``k3`` overwrote the fourth constant
    argument (also ``k3``), a typing error in Numba or a wrong value."""
    source = _compiled(_kmeans, RNG.normal(size=(4, 3)), RNG.normal(size=(30, 3)))
    function = next(node for node in ast.walk(ast.parse(source))
                    if isinstance(node, ast.FunctionDef))
    parameters = {a.arg for a in function.args.args}
    assigned = {t.id for node in ast.walk(function) if isinstance(node, (ast.Assign, ast.For))
                for t in ast.walk(node.targets[0] if isinstance(node, ast.Assign) else node.target)
                if isinstance(t, ast.Name)}
    assert parameters & assigned == set()
    assert any(p.startswith("const") for p in parameters)


def test_power_with_an_array_of_exponents_compiles():
    """Regression: ``x ** [-0.7, -1.7, 0.2]`` (a literal array exponent) failed to compile
    ("only 0-dimensional arrays can be converted to Python scalars")."""
    exponents = np.array([-0.7, -1.7, 0.2])
    program = qdiff.trace(lambda x: x ** exponents, np.ones(3))
    x = np.array([0.5, 1.5, 2.5])
    assert_agree(CompiledProgram(program)(x), program(x), "power")


ROW = re.compile(r"row\d+ = np.empty")


def _row_contractions(factors, centred, counts, offsets):
    # GMM's per-point products Q_k (x_i - μ_k): the result's last axis is the nest's innermost
    transformed = qnp.einsum("kij,nkj->nki", factors, centred)
    moved = qnp.einsum("kji,nkj->nki", factors, centred)  # the row index last in the factor
    whole = qnp.einsum("kij,nkj->nki", counts, offsets)  # integers
    return qnp.sum(qnp.tanh(transformed) * moved) + qnp.sum(whole)


def test_contractions_in_a_nest_are_computed_a_row_at_a_time_in_the_same_order():
    factors, centred = RNG.normal(size=(4, 16, 16)), RNG.normal(size=(3, 4, 16))
    counts, offsets = RNG.integers(-3, 4, size=(4, 16, 16)), RNG.integers(-3, 4, size=(3, 4, 16))
    args = (factors, centred, counts, offsets)
    program = qdiff.trace(_row_contractions, *args)
    for parallel in (False, True):
        compiled = CompiledProgram(program, parallel=parallel)
        # each element sums its products in the interpreter's order: equal to rounding
        assert_agree(compiled(*args), program(*args), f"parallel={parallel}")
        assert len(ROW.findall(compiled.source)) == 3
    source = _compiled(_row_contractions, *args, argnums=(0, 1))
    assert ROW.findall(source)
    # shorter rows keep one register per element (floating rows from `ROW_TILE_MIN`, 8,
    # may be tiles of BLAS products)
    small = (factors[:, :6, :6], centred[..., :6], counts[:, :6, :6], offsets[..., :6])
    small_program = qdiff.trace(_row_contractions, *small)
    small_compiled = CompiledProgram(small_program)
    assert_agree(small_compiled(*small), small_program(*small), "rows of 6")
    assert not ROW.findall(small_compiled.source)


def test_small_einsums_with_transposed_operands_run_as_direct_loops():
    # GMM's Σ_n t̄[n,k,i] c[n,k,j]: BLAS would need both (n, K, d) operands transposed
    t, c = RNG.normal(size=(300, 5, 6)), RNG.normal(size=(300, 5, 7))
    counts, square = RNG.integers(-4, 5, size=(300, 5, 6)), RNG.normal(size=(6, 5))

    def products(t, c, counts, square):
        return (qnp.einsum("nki,nkj->kij", t, c), qnp.einsum("nki,nkj->kij", counts, counts),
                qnp.einsum("ij,ji->", t[0], square))

    args = (t, c, counts, square)
    program = qdiff.trace(products, *args)
    compiled = CompiledProgram(program)
    for k, (got, want) in enumerate(zip(compiled(*args), program(*args))):
        assert_agree(got, want, f"output {k}")
    assert "batched_matmul" not in compiled.source and "transpose" not in compiled.source
    # a large result per batch member stays a BLAS product
    big = qdiff.trace(lambda a, b: qnp.einsum("nki,nkj->kij", a, b), t[:, :, :1].repeat(40, 2),
                      c[:, :, :1].repeat(40, 2))
    assert "batched_matmul" in CompiledProgram(big).source


def _centred_products(factors, x, means, scales):
    # GMM's Q_k (x_i - μ_k) with x_i - μ_k made in the contraction's own nest
    centred = x[:, None, :] - means[None, :, :]
    transformed = scales[None] * centred + qnp.einsum("kij,nkj->nki", factors, centred)
    return qnp.sum(qnp.sum(transformed ** 2, axis=2) * qnp.arange(1.0, 4.0)[None, :])


def test_contraction_operand_made_in_its_nest_is_not_stored():
    """GMM's x_i - μ_k and exp(q_k) ⊙ (x_i - μ_k) were written as two (n, K, d) arrays
    before the contraction's nest read them back: now the nest computes x_i - μ_k again at
    each summed position, stores no (n, K, d) array, and loops over the components first
    (each Q_k is read once for all points)."""
    factors, x = RNG.normal(size=(3, 16, 16)), RNG.normal(size=(20, 16))
    means, scales = RNG.normal(size=(3, 16)), RNG.normal(size=(3, 16))
    args = (factors, x, means, scales)
    program = qdiff.trace(_centred_products, *args)
    for parallel in (False, True):
        compiled = CompiledProgram(program, parallel=parallel)
        assert_agree(compiled(*args), program(*args), f"parallel={parallel}")
        assert "np.empty((20, 3, 16,)" not in compiled.source
    # (the points' loop runs over tiles of points: `range(0, 20, 20)`)
    loops = re.findall(r"for [ip]\d+ in p?range\((?:0, )?(\d+)", CompiledProgram(program).source)
    assert loops.index("3") < loops.index("20")  # components outside, points inside
    _compiled(_centred_products, *args, argnums=(0, 2, 3))
    # an operand indexed by the row (the result's last axis) is still stored
    program = qdiff.trace(lambda f, c: qnp.sum(qnp.einsum("kij,nkj->nki", f, qnp.exp(c)) ** 2),
                          factors, RNG.normal(size=(20, 3, 16)))
    assert_agree(CompiledProgram(program)(factors, RNG.normal(size=(20, 3, 16)) * 0 + 1),
                 program(factors, np.ones((20, 3, 16))), "stored operand")


def test_batched_product_reads_an_operand_transposed_without_an_element_copy():
    """Σ_n t̄[n,k,i] c[n,k,j] (GMM's reverse pass at d=64) copied t̄ to (k, i, n), an
    element at a time; BLAS now reads it as (k, n, i) transposed in place."""
    t, c = RNG.normal(size=(100, 2, 40)), RNG.normal(size=(100, 2, 30))
    b = RNG.normal(size=(2, 30, 100))  # and a right operand whose summed index is last
    program = qdiff.trace(lambda t, c, b: (qnp.einsum("nki,nkj->kij", t, c),
                                           qnp.einsum("kin,kjn->kij", b, b)), t, c, b)
    compiled = CompiledProgram(program)
    for k, (got, want) in enumerate(zip(compiled(t, c, b), program(t, c, b))):
        assert_agree(got, want, f"output {k}")
    assert "batched_matmul_transposed" in compiled.source
    assert "(1, 2, 0,)" not in compiled.source


def _mixture(factors, x, means, logs):
    # ADBench GMM's data term: the derivative's forward sweep makes x_i - μ_k and
    # exp(q_k) ⊙ (x_i - μ_k) in one elementwise map, read by several reverse nests
    centred = x[:, None, :] - means[None, :, :]
    transformed = qnp.exp(logs)[None] * centred + qnp.einsum("kij,nkj->nki", factors, centred)
    inner = -0.5 * qnp.sum(transformed ** 2, axis=2)
    top = qnp.max(inner, axis=1)
    return qnp.sum(qnp.log(qnp.sum(qnp.exp(inner - top[:, None]), axis=1)) + top)


def test_gradient_forward_sweep_stores_no_centred_points_for_its_reverse_nests():
    """The GMM gradient's forward sweep stored x_i - μ_k, exp(q_k) ⊙ (x_i - μ_k) and the
    row products L_k (x_i - μ_k) as three (n, K, d) arrays, then copied two (n, K, d)
    arrays to (K, n, d) for the Σ_n t̄ (x_i - μ_k)ᵀ product: each nest now computes the cheap
    chain and the row products again (tile products in both nests), and the Σ_n product
    is added tile of points by tile in the reverse nest (its operands never stored): three
    BLAS products on tiles, no (n, K, d) array (the means' Σ_n L_kᵀ t̄ is L_kᵀ Σ_n t̄,
    `linear_sums.py`, no product per point)."""
    factors, x = RNG.normal(size=(3, 20, 20)), RNG.normal(size=(70, 20))
    means, logs = RNG.normal(size=(3, 20)), 0.1 * RNG.normal(size=(3, 20))
    source = _compiled(_mixture, factors, x, means, logs, argnums=(0, 2, 3))
    assert not re.findall(r"np\.empty\(\((70, 3, 20,|4200,)\)", source)
    assert "batched_matmul" not in source
    assert source.count("np.dot(") == 3
    assert source.count("np.ascontiguousarray(np.transpose(") == 2  # the factors' rows, per nest


@pytest.mark.parametrize("n", (2 * TILE_ROWS + 37, TILE_ROWS, 1, 0))
def test_gradient_reverse_nest_computes_wide_row_products_again_instead_of_reading_them(n):
    """From `rematerialize.RECOMPUTED_CONTRACTION_MIN` products per element, the row
    products L_k (x_i - μ_k) are computed again by the reverse nest (a tile product)
    instead of stored by the forward nest as an (n, K, d) array: no array of that size is
    left, and there are three tile products (forward rows, reverse rows, Σ_n t̄ cᵀ)."""
    d = RECOMPUTED_CONTRACTION_MIN
    factors, x = 0.3 * RNG.normal(size=(3, d, d)), RNG.normal(size=(n, d))
    means, logs = RNG.normal(size=(3, d)), 0.1 * RNG.normal(size=(3, d))
    source = _compiled(_mixture, factors, x, means, logs, argnums=(0, 2, 3))
    if n > 1:  # (at one point an (n, K, d) array has the shape of a (K, d) one)
        assert not re.findall(rf"np\.(empty|zeros)\(\(({n}, 3, {d},|{n * 3 * d},)\)", source)
        assert source.count("np.dot(") == 3


def test_batched_product_reads_operands_whose_batch_axis_moves_as_views():
    t, c = RNG.normal(size=(90, 3, 20)), RNG.normal(size=(90, 3, 30))
    counts = RNG.integers(-4, 5, size=(90, 3, 20))
    program = qdiff.trace(lambda t, c, m: (qnp.einsum("nki,nkj->kij", t, c),
                                           qnp.einsum("nki,knj->kij", t, qnp.swapaxes(c, 0, 1)),
                                           qnp.einsum("nki,nkj->kij", m, m)), t, c, counts)
    compiled = CompiledProgram(program)
    for k, (got, want) in enumerate(zip(compiled(t, c, counts), program(t, c, counts))):
        assert_agree(got, want, f"output {k}")
    assert compiled.source.count("batched_matmul_views") == 2  # integers take loops
