"""``mode="density"`` (density matrices, records merged by classical value) against
``mode="exact"`` (enumerated pure-state branches) on seeded random programs with gates from the
whole table, measurements, resets, classical control, counted and bounded while loops; and
both against closed forms."""

import functools

import numpy as np
import pytest
from quantum_programs_lib import postselected, until_one

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.quantum.lang.fusion import fuse_gates
from qdiff.quantum.simulator import random_circuit

NUM_ANGLES = 48


class RandomProgram:
    """A random program over ``n`` qubits, drawn from ``seed``; call it with an angle array.

    Every parametric gate reads its angles from the (traced) input, so the angles are program
    inputs; structure (gates, wires, control flow) is fixed by the seed.
    """

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.n = int(self.rng.integers(2, 5))
        self.plan = [self._op(depth=0) for _ in range(int(self.rng.integers(6, 11)))]
        self.labels = ["".join(self.rng.choice(list("IXYZ"), size=self.n)) for _ in range(3)]
        self.coefficients = self.rng.normal(size=3)
        self.probs_wires = [int(w) for w in self.rng.permutation(self.n)[:2]]
        self.bit_weights = self.rng.normal(size=16)
        self.angles = self.rng.uniform(-2 * np.pi, 2 * np.pi, NUM_ANGLES)
        self.kinds = {op[0] for op in _all_ops(self.plan)}

    def _wire(self) -> int:
        return int(self.rng.integers(self.n))

    def _gates(self, count: int) -> tuple:
        ops = random_circuit(self.n, count, rng=self.rng)
        return ("gates", ops, int(self.rng.integers(NUM_ANGLES)))

    def _op(self, depth: int) -> tuple:
        kinds = ["gates", "gates", "measure", "reset"]
        if depth == 0:
            kinds += ["cond", "cond_measure", "loop", "while"]
        kind = kinds[int(self.rng.integers(len(kinds)))]
        if kind == "gates":
            return self._gates(int(self.rng.integers(1, 5)))
        if kind == "measure":
            return ("measure", self._wire(), bool(self.rng.integers(2)))
        if kind == "reset":
            return ("reset", self._wire())
        if kind in ("cond", "cond_measure"):
            body = [self._op(depth + 1) for _ in range(int(self.rng.integers(1, 3)))]
            other = [self._gates(1)] if self.rng.integers(2) else []
            return (kind, self._wire(), body, other, self._wire())
        if kind == "loop":
            body = [self._gates(int(self.rng.integers(1, 3)))]
            return ("loop", int(self.rng.integers(1, 4)), body, self._wire(),
                    bool(self.rng.integers(2)))
        body = [self._gates(int(self.rng.integers(1, 3)))]
        return ("while", self._wire(), int(self.rng.integers(1, 4)), body)

    # -- tracing ----------------------------------------------------------------------------
    def _apply(self, plan: list, q: qm.Register, angles, bits: list) -> None:
        for op in plan:
            kind = op[0]
            if kind == "gates":
                _, ops, offset = op
                k = offset
                for gate in ops:
                    spec = qm.gate_spec(gate.gate) if not isinstance(gate.gate, str) else None
                    name = gate.gate if spec is None else spec.name
                    static = {} if spec is None else dict(spec.static)
                    count = len(gate.params)
                    params = [angles[(k + j) % NUM_ANGLES] for j in range(count)]
                    k += count
                    qm.apply(name, params, [q[w] for w in gate.wires], **static)
            elif kind == "measure":
                bits.append(qnp.asarray(qm.measure(q[op[1]], reset=op[2])))
            elif kind == "reset":
                qm.reset(q[op[1]])
            elif kind == "cond":
                _, wire, body, other, _ = op
                bit = qm.measure(q[wire])
                bits.append(qnp.asarray(bit))
                qdiff.cond(bit, lambda body=body: self._apply(body, q, angles, []),
                           lambda other=other: self._apply(other, q, angles, []))
            elif kind == "cond_measure":
                # control on an earlier bit when there is one; the true branch measures and
                # returns its outcome, the false branch returns a constant
                _, wire, body, other, inner = op
                pred = bits[-1] == 1 if bits else qm.measure(q[wire]) == 1

                def measured(body=body, inner=inner):
                    self._apply(body, q, angles, [])
                    return qnp.asarray(qm.measure(q[inner]))

                def constant(other=other):
                    self._apply(other, q, angles, [])
                    return qnp.asarray(1)

                bits.append(qdiff.cond(pred, measured, constant))
            elif kind == "loop":
                _, trips, body, wire, reset = op

                def step(i, count, body=body, wire=wire, reset=reset):
                    self._apply(body, q, angles, [])
                    qm.rx(angles[0] * (i + 1), q[wire])
                    return count + qnp.asarray(qm.measure(q[wire], reset=reset))

                bits.append(qdiff.fori_loop(0, trips, step, qnp.asarray(0)))
            else:
                _, wire, max_iter, body = op
                count = qdiff.Cell(qnp.asarray(0))

                def again(body=body, count=count, wire=wire):
                    self._apply(body, q, angles, [])
                    qm.ry(angles[1], q[wire])  # so that the loop can exit
                    count.set(count.value + 1)

                qdiff.while_loop(lambda wire=wire: qm.measure(q[wire]) == 1, again,
                                 max_iter=max_iter)
                bits.append(count.value)

    def __call__(self, angles):
        q = qm.qubits(self.n)
        bits: list = []
        self._apply(self.plan, q, angles, bits)
        observable = qm.PauliSum([(float(c), label)
                                  for c, label in zip(self.coefficients, self.labels)])
        outputs = [qm.expval(observable, q), qm.probs([q[w] for w in self.probs_wires])]
        if bits:
            weighted = sum(float(c) * b for c, b in zip(self.bit_weights, bits))
            both = bits[0] * bits[-1]
            parity = qnp.mod(sum(bits), 2)
            outputs += [weighted, both, parity, bits[-1] == bits[0]]
        return tuple(outputs)


SEEDS = list(range(30))


@functools.cache
def _runs(seed: int) -> tuple:
    program = RandomProgram(seed)
    traced = qdiff.trace(program, program.angles)
    return (program, qm.run(traced, program.angles),
            qm.run(traced, program.angles, mode="density"))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_programs_exact_equals_density(seed):
    _, exact, density = _runs(seed)
    assert density.mode == "density"
    assert len(exact.values) == len(density.values)
    for got, want in zip(density.values, exact.values):
        np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float),
                                   rtol=0, atol=1e-10)
    assert density.aborted_mass == pytest.approx(exact.aborted_mass, abs=1e-10)
    assert exact.dropped_mass < 1e-9 and density.dropped_mass < 1e-9
    # the expectation of the probabilities is a distribution
    assert np.sum(density.values[1]) == pytest.approx(1.0 - density.missing_mass, abs=1e-10)


def test_the_random_programs_cover_every_construct():
    kinds = set().union(*(_runs(seed)[0].kinds for seed in SEEDS))
    assert kinds == {"gates", "measure", "reset", "cond", "cond_measure", "loop", "while"}
    programs = [_runs(seed)[0] for seed in SEEDS]
    aborting = [seed for seed in SEEDS if _runs(seed)[1].aborted_mass > 1e-3]
    assert len(aborting) >= 5, "too few random programs have a while loop that aborts"
    gates = {gate.gate if isinstance(gate.gate, str) else gate.gate.name
             for p in programs for op in _all_ops(p.plan) if op[0] == "gates"
             for gate in op[1]}
    assert {"rx", "crz", "u", "unitary", "pauli_rot"} & gates and len(gates) >= 20


def _all_ops(plan):
    """Every op of a plan, nested ones included (cond branches, loop bodies)."""
    nested = {"cond": (2, 3), "cond_measure": (2, 3), "loop": (2,), "while": (3,)}
    for op in plan:
        yield op
        for k in nested.get(op[0], ()):
            yield from _all_ops(op[k])


def test_density_mode_mixes_records_instead_of_enumerating_branches():
    def dephase(theta):
        q = qm.qubits(2)
        qdiff.fori_loop(0, 6, lambda i: (qm.ry(theta, q[0]), qm.cx(q[0], q[1]),
                                         qm.measure(q[1]), qm.h(q[1])))
        return qm.expval("ZI", q), qm.probs(q)

    exact = qm.run(dephase, 0.9)
    density = qm.run(dephase, 0.9, mode="density")
    assert exact.num_branches == 2 ** 6  # every unused outcome is a branch
    assert density.num_branches == 1     # ... and one mixed state here
    np.testing.assert_allclose(density.values[1], exact.values[1], atol=1e-12)
    assert density.values[0] == pytest.approx(exact.values[0], abs=1e-12)


def teleport(a, b):
    """Teleport ry(a) rz(b)|0> from wire 0 to wire 2 with classically controlled fixes."""
    q = qm.qubits(3)
    qm.ry(a, q[0]); qm.rz(b, q[0])
    qm.h(q[1]); qm.cx(q[1], q[2])
    qm.cx(q[0], q[1]); qm.h(q[0])
    m0, m1 = qm.measure(q[0]), qm.measure(q[1])
    qdiff.cond(m1, lambda: qm.x(q[2]), lambda: None)
    qdiff.cond(m0, lambda: qm.z(q[2]), lambda: None)
    return qm.expval("Z", [q[2]]), qm.expval("X", [q[2]]), qm.expval("Y", [q[2]])


@pytest.mark.parametrize("mode", ["exact", "density"])
def test_closed_forms(mode):
    a, b = 0.83, -1.4
    z, x, y = qm.run(teleport, a, b, mode=mode).values
    assert (z, x, y) == pytest.approx((np.cos(a), np.sin(a) * np.cos(b), np.sin(a) * np.sin(b)),
                                      abs=1e-12)
    theta = 1.2
    looped = qm.run(until_one, theta, mode=mode)
    assert looped.values == pytest.approx(1 / np.sin(theta / 2) ** 2, rel=1e-9)
    assert looped.missing_mass < 1e-9

    p = np.sin(theta / 2) ** 2
    result = qm.run(lambda t: until_one(t, max_iter=3), theta, mode=mode)
    assert result.values == pytest.approx(p + 2 * (1 - p) * p + 3 * (1 - p) ** 2 * p)
    assert result.aborted_mass == pytest.approx((1 - p) ** 3)

    x = 0.512
    ps = qm.run(postselected, x, mode=mode)
    assert ps.values == pytest.approx(-np.cos(x))
    assert ps.postselection_probability == pytest.approx(0.5)

    def reset_channel(t):
        q = qm.qubits(2)
        qm.ry(t, q[0]); qm.cx(q[0], q[1])
        qm.reset(q[0])                      # q1 keeps P(1) = sin²(t/2), now mixed
        qm.measure(q[1], reset=True)        # and is reset too
        qm.x(q[0])
        return qm.probs(q)

    np.testing.assert_allclose(qm.run(reset_channel, 0.7, mode=mode).values, [0, 1, 0, 0],
                               atol=1e-12)


def test_density_mode_errors_are_clear():
    def big():
        q = qm.qubits(11)
        return qm.expval("Z", q[0])

    with pytest.raises(qdiff.QdiffError, match="at most 10 qubits; this program has 11"):
        qm.run(big, mode="density")

    def grown():
        q = qm.qubits(6)
        r = qm.qubits(5)
        qm.cx(q[0], r[0])
        return qm.expval("Z", r[0])

    with pytest.raises(qdiff.QdiffError, match="this program has 11"):
        qm.run(grown, mode="density")

    def debug():
        q = qm.qubits(1)
        return qm.state(q)

    with pytest.raises(qdiff.QdiffError, match="statevector, which mode='density'"):
        qm.run(debug, mode="density")
    with pytest.raises(qdiff.QdiffError,
                       match="mode must be one of exact, sample, density, qiskit, got 'densty'"):
        qm.run(debug, mode="densty")


@pytest.mark.parametrize("seed", SEEDS[:8])
def test_fused_programs_run_in_density_mode(seed):
    """Density mode applies a fused gate part by part from the gate table, so it checks the
    fusion pass too (``exact`` mode fuses by default)."""
    program, _, density = _runs(seed)
    fused, stats = fuse_gates(qdiff.trace(program, program.angles), max_qubits=3,
                                     report=True)
    assert stats.passes < stats.gates
    assert "fused_gate" in str(fused)
    result = qm.run(fused, program.angles, mode="density")
    for got, want in zip(result.values, density.values):
        np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float),
                                   rtol=0, atol=1e-10)
