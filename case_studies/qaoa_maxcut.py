"""QAOA for MaxCut on random 3-regular graphs, depth p = 1..4, against the brute-force optimum.

For a graph with edges E the cut of a bit string z is C(z) = Σ_{(a,b) ∈ E} (1 - Z_a Z_b)/2.
QAOA of depth p prepares |+>^n, then p layers of exp(-iγ_k C) (one ``rzz(-γ_k)`` per edge)
and exp(-iβ_k Σ X_i) (``rx(2β_k)`` on every qubit); the layers are a ``qdiff.fori_loop``
indexing the angle arrays. Training maximizes <C> (Adam with a progress bar, then BFGS with
``qdiff.value_and_grad`` gradients, adjoint or parameter shift by ``--method``: parameter
shift runs two programs per gate occurrence, about ten times the adjoint method's time, so
it takes minutes even with --quick, and reaches the same angles); depth p
starts from depth p-1's angles interpolated (Zhou et al., PRX 10, 021067 (2020)), so <C>
can only grow with p. The approximation ratio is <C> / max_z C(z), the maximum found by
enumerating all 2^n cuts.

Self-checks:

- at depth 1, <C>(γ, β) has a closed form for any graph (Wang, Hadfield, Jiang, Rieffel,
  PRA 97, 022304 (2018), eq. 13, with the triangles of each edge); its optimum over a dense
  grid, refined by Nelder-Mead, is the reference for the trained depth-1 value (1e-6);
- every trained value is recomputed by an independent NumPy simulation (phases on the
  2^n cut values, rx by reshaping the state) (1e-9);
- the ratio does not decrease with p, and is below 1.

    python case_studies/qaoa_maxcut.py            # 10, 12 and 14 nodes, p = 1..4
    python case_studies/qaoa_maxcut.py --quick    # 10 nodes, p = 1..2
"""

from __future__ import annotations

import itertools
from pathlib import Path

import common  # case_studies/common.py: this folder is on sys.path however the study starts
import numpy as np
from scipy.optimize import minimize as scipy_minimize

import qdiff
from qdiff import quantum as qm


def random_regular_graph(n: int, degree: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """A uniformly drawn simple ``degree``-regular graph on n nodes (pairing model with
    rejection), as a sorted edge list."""
    while True:
        stubs = rng.permutation(np.repeat(np.arange(n), degree)).reshape(-1, 2)
        edges = {tuple(sorted(map(int, pair))) for pair in stubs}
        if len(edges) == len(stubs) and all(a != b for a, b in edges):
            return sorted(edges)


def cut_values(n: int, edges) -> np.ndarray:
    """C(z) for every z in 0..2^n-1 (bit k of z is node k)."""
    bits = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1
    return sum((bits[:, a] != bits[:, b]).astype(np.float64) for a, b in edges)


def qaoa_program(n: int, edges, p: int):
    """The traced program angles -> <C>, with angles of shape (2, p): γ then β."""
    labels = []
    for a, b in edges:
        label = ["I"] * n
        label[a] = label[b] = "Z"
        labels.append((-0.5, "".join(label)))
    observable = qm.PauliSum(labels)

    def expected_cut(angles):
        q = qm.qubits(n)
        for i in range(n):
            qm.h(q[i])

        def layer(k):
            for a, b in edges:
                qm.rzz(-angles[0, k], q[a], q[b])   # exp(-iγ(1 - Z_a Z_b)/2) up to a phase
            for i in range(n):
                qm.rx(2 * angles[1, k], q[i])

        qdiff.fori_loop(0, p, layer)
        return len(edges) / 2 + qm.expval(observable, q)

    return qdiff.trace(expected_cut, np.zeros((2, p)))


def numpy_expected_cut(n: int, cuts: np.ndarray, angles: np.ndarray) -> float:
    """<C> by a direct NumPy simulation, independent of qdiff."""
    state = np.full(2 ** n, 2 ** (-n / 2), dtype=np.complex128)
    for gamma, beta in angles.T:
        state = state * np.exp(-1j * gamma * cuts)
        rx = np.array([[np.cos(beta), -1j * np.sin(beta)], [-1j * np.sin(beta), np.cos(beta)]])
        for k in range(n):
            # axis 0 of the reshaped state is bit n-1, so bit k is axis n-1-k
            view = np.moveaxis(state.reshape([2] * n), n - 1 - k, 0)
            state = np.moveaxis(np.tensordot(rx, view, axes=1), 0, n - 1 - k).reshape(-1)
    return float(np.real(np.vdot(state, cuts * state)))


def depth_one_closed_form(n: int, edges, gamma: float, beta: float) -> float:
    """<C> at depth 1 from Wang et al. 2018 (eq. 13): per edge (u, v) with degrees d_u, d_v
    and λ triangles through it,
    1/2 + sin4β sinγ (cos^{d_u-1}γ + cos^{d_v-1}γ)/4
        - sin²2β cos^{d_u+d_v-2-2λ}γ (1 - cos^λ 2γ)/4."""
    neighbours = [set() for _ in range(n)]
    for a, b in edges:
        neighbours[a].add(b)
        neighbours[b].add(a)
    total = 0.0
    for u, v in edges:
        du, dv = len(neighbours[u]) - 1, len(neighbours[v]) - 1   # other neighbours
        triangles = len(neighbours[u] & neighbours[v])
        c = np.cos(gamma)
        total += (0.5 + 0.25 * np.sin(4 * beta) * np.sin(gamma) * (c ** du + c ** dv)
                  - 0.25 * np.sin(2 * beta) ** 2 * c ** (du + dv - 2 * triangles)
                  * (1 - np.cos(2 * gamma) ** triangles))
    return float(total)


def depth_one_optimum(n: int, edges, points: int) -> tuple[float, np.ndarray]:
    """The maximum of the depth-1 closed form over a grid of γ ∈ [0, π), β ∈ [0, π/2),
    refined by Nelder-Mead from the best grid point."""
    gammas = np.linspace(0, np.pi, points, endpoint=False)
    betas = np.linspace(0, np.pi / 2, points, endpoint=False)
    grid = [(depth_one_closed_form(n, edges, g, b), g, b)
            for g, b in itertools.product(gammas, betas)]
    _, g0, b0 = max(grid)
    found = scipy_minimize(lambda x: -depth_one_closed_form(n, edges, *x), [g0, b0],
                           method="Nelder-Mead", options=dict(xatol=1e-10, fatol=1e-13))
    return -float(found.fun), found.x


def interpolate(angles: np.ndarray) -> np.ndarray:
    """Depth p angles to depth p+1 (INTERP of Zhou et al.): each row resampled linearly."""
    p = angles.shape[1]
    old = np.linspace(0, 1, p) if p > 1 else np.zeros(1)
    new = np.linspace(0, 1, p + 1)
    return np.stack([np.interp(new, old, row) for row in angles])


def train(program, x0: np.ndarray, args, desc: str, steps: int) -> common.TrainResult:
    """Maximize <C>: Adam, then BFGS, on -<C> with qdiff's gradients."""
    value_and_grad = qdiff.value_and_grad(program, method=args.method)
    shape = x0.shape

    def negative(x):
        value, grad = value_and_grad(x.reshape(shape))
        return -float(value), -np.asarray(grad).ravel()

    first = common.adam(negative, x0.ravel(), steps=steps, lr=0.02, desc=desc)
    polished = common.minimize(lambda x: negative(x)[0], first.params,
                               jac=lambda x: negative(x)[1])
    return common.TrainResult(params=polished.params.reshape(shape),
                              losses=first.losses + polished.losses,
                              evaluations=first.evaluations + polished.evaluations,
                              seconds=first.seconds + polished.seconds)


def main(argv: list[str] | None = None) -> int:
    args = common.parse_args(__doc__.splitlines()[0], ("adjoint", "parameter-shift"), argv)
    sizes, depths, steps, points = ([10], 2, 40, 60) if args.quick else ([10, 12, 14], 4, 100,
                                                                        200)
    rng = np.random.default_rng(args.seed)
    rows, passed = [], []
    for n in sizes:
        edges = random_regular_graph(n, 3, rng)
        cuts = cut_values(n, edges)
        best_cut = float(cuts.max())
        reference, _ = depth_one_optimum(n, edges, points)
        angles = np.array([[0.4], [0.3]])  # a generic start, not the grid's optimum
        values = []
        for p in range(1, depths + 1):
            if p > 1:
                angles = interpolate(angles)
            program = qaoa_program(n, edges, p)
            result = train(program, angles, args, f"n = {n}, p = {p}", steps)
            angles = result.params
            value = float(program(angles))
            values.append(value)
            rows.append({"nodes": n, "edges": len(edges), "p": p, "<C>": value,
                         "max cut": best_cut, "ratio": value / best_cut,
                         "γ": np.round(angles[0], 4).tolist(),
                         "β": np.round(angles[1], 4).tolist(),
                         "evaluations": result.evaluations, "seconds": f"{result.seconds:.1f}"})
            passed.append(common.check(f"n = {n}, p = {p}: <C> vs NumPy simulation", value,
                                       numpy_expected_cut(n, cuts, angles), 1e-9))
            if p == 1:
                passed.append(common.check(f"n = {n}, p = 1: <C> vs closed-form optimum",
                                           value, reference, 1e-6))
                landscape = (n, edges, angles[:, 0].copy())
            if n == sizes[0]:
                loss_curve = result.losses   # the deepest circuit's, on the first graph
        passed.append(common.check(f"n = {n}: ratio does not decrease with p (smallest step)",
                                   min(0.0, float(np.min(np.diff(values)))), 0.0, 1e-7))
        passed.append(common.check(f"n = {n}: <C> above the maximum cut (excess)",
                                   max(0.0, values[-1] - best_cut), 0.0, 1e-9))
    print(common.results_table(rows, f"QAOA MaxCut on random 3-regular graphs, "
                                     f"{args.method} gradients"))
    common.plot_loss(loss_curve, Path(args.out) / "loss.png")
    n, edges, trained = landscape
    common.plot_landscape(lambda g, b: depth_one_closed_form(n, edges, g, b),
                          np.linspace(0, np.pi, 61), np.linspace(0, np.pi / 2, 31),
                          trained=(trained[0] % np.pi, trained[1] % (np.pi / 2)),
                          path=Path(args.out) / "landscape_p1.png")
    return common.finish(all(passed))


if __name__ == "__main__":
    raise SystemExit(main())
