"""Per-member gradients of a batch of a quantum program with measurements, by one batched
branching run and one reverse sweep over its branches (``qdiff.vmap(qdiff.grad(f))``).

The forward run is the batched branching simulation's (`execution.batched_branches`):
every branch holds the whole batch's states, ``(members, 2**n)``, and a weight per member.
Here it also records what it executes on each branch (a tape: the branches share their
prefix, so the records form a tree and one backward walk over the tape visits every
branch once). The reverse sweep carries, per member, the cotangents of classical values
and weights and the adjoint vectors λ of the states (``dJ = 2 Re<λ|dψ>``), with the rules of
the unbatched sweep (`adjoint`), a leading axis of members instead of rows:

- gate: ``θ̄ = 2 Im<λ_out|G ψ_out>``, ``λ_in = U^†λ_out`` (each member its own ``U``);
- measure/reset/postselect: ``ψ' = A P ψ/√q``, ``w' = w q``: ``q̄ = w̄'w - Re<λ'|ψ'>/q``,
  ``w̄ = w̄'q``, ``λ_in = P(A^†λ'/√q + q̄ψ)``, zero for members without this branch;
- expval ``λ_in = λ_out + ē Oψ``; probs ``λ_in,i = λ_out,i + p̄_j(i) ψ_i``;
- a ``cond`` on a value that differs per member: ``w̄ = Σ_k [member takes k] w̄_k``;
- classical equations: their VJP programs batched (`batch_subprogram`).

The final value is ``Σ_b w_b g_b`` per member, divided by the kept mass ``Σ_b w_b`` where a
member was postselected (the unbatched convention, `adjoint.RecordedRun`), so values and
gradients are those of the unbatched adjoint member by member. The forward states are kept
(no uncomputation): memory grows with the gates times the branches.

Claimed: programs the batched branches run with no ``loop`` or ``while`` (measurements,
``cond`` on outcomes, resets, postselection), one scalar output. Where the batched run
would leave its form (more than ``tol`` pruned, postselection that never succeeds, a
classical equation carrying a state), each member is differentiated on its own.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def reset_then_rotate(t):
...     q = qm.qubits(1)
...     qm.rx(t, q[0])
...     qm.reset(q[0])
...     qm.ry(t, q[0])
...     return qm.expval("Z", q)
>>> theta = np.array([0.3, 1.1])
>>> value, grad = branch_value_and_grad(qdiff.trace(reset_then_rotate, 0.1), [theta],
...                                     [True], 2, 0)
>>> np.allclose(value, np.cos(theta)), np.allclose(grad, -np.sin(theta))
(True, True)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...autodiff.arguments import ArgNums, argnum_tuple, wrt_flags, wrt_tree
from ...autodiff.reverse import vjp_program
from ...autodiff.tangents import is_differentiable
from ...batching import register_batched_gradient
from ...ir import pytree
from ...ir.control_flow import cond_p, loop_p, while_p
from ...ir.core import Eqn, Literal, Program
from ...ir.interpreter import evaluate
from ...ir.passes import unpack_scalars
from ..execution import batched_branches as bb
from ..execution.batched import (
    batched_part,
    member_matrices,
    observable_rows,
    readout_adjoint,
)
from ..lang import primitives as qp
from ..lang.gates import gate_spec
from ..lang.primitives import pauli_sum_of
from ..simulator.batched_kernels import run_circuit
from .adjoint import probability_cotangent
from .gradient import gradient

__all__ = ["branch_value_and_grad"]


@dataclass
class _Record:
    """One equation executed on one branch: nodes and values in and out, the weights'
    nodes and values (``extra``: a ``cond``'s member mask)."""

    eqn: Eqn | None
    in_nodes: list[int | None]
    in_values: list[tuple[Any, bool]]
    out_nodes: list[int]
    out_values: list[tuple[Any, bool]]
    w_in: int
    w_out: int
    weight_in: np.ndarray
    weight_out: np.ndarray
    mask: np.ndarray | None = None


class _Tape:
    """The batched branching run, recording every equation on every branch."""

    def __init__(self, size: int):
        self.batch = bb._Batch(size)
        self.size = size
        self.records: list[_Record] = []
        self.count = 0

    def new(self) -> int:
        self.count += 1
        return self.count

    def run(self, program: Program, branches: list[tuple[np.ndarray, int, dict]]) -> list:
        """``branches`` of (weights, weight node, {var: (value, batched, node)}) through
        ``program``'s equations."""
        for eqn in program.eqns:
            step = []
            for weights, w_node, env in branches:
                step.extend(self.equation(eqn, weights, w_node, env))
            branches = step
        return branches

    def equation(self, eqn: Eqn, weights: np.ndarray, w_node: int, env: dict) -> list:
        found = [_read(env, a) for a in eqn.inputs]
        inputs = [(v, b) for v, b, _ in found]
        if eqn.primitive is cond_p:
            return self.cond(eqn, weights, w_node, env, inputs)
        handler = bb._HANDLERS.get(eqn.primitive)
        if eqn.primitive is qp.reset_p:   # the outcome is recorded: the rule needs it
            measured = Eqn(eqn.primitive, eqn.inputs, eqn.outputs, {**eqn.params, "reset": True})
            outcomes = bb._measure(self.batch, measured, weights, inputs)
        elif handler is None:
            outcomes = [(weights, bb._classical(eqn, inputs, self.size))]
        else:
            outcomes = handler(self.batch, eqn, weights, inputs)
        out = []
        for k, (w, values) in enumerate(outcomes):
            nodes = [self.new() for _ in values]
            w_out = w_node if w is weights else self.new()
            self.records.append(_Record(eqn, [n for _, _, n in found], inputs, nodes, values,
                                        w_node, w_out, weights, w))
            target = env if k == len(outcomes) - 1 else dict(env)
            target.update((v, (x, b, n)) for v, (x, b), n in zip(eqn.outputs, values, nodes))
            out.append((w, w_out, target))
        return out

    def cond(self, eqn: Eqn, weights: np.ndarray, w_node: int, env: dict,
             inputs: list) -> list:
        operands = [_read(env, a) for a in eqn.inputs[1:]]
        programs = eqn.params["branches"]
        out = []
        for k, w in bb._choices(inputs[0], len(programs), weights):
            node = w_node
            if w is not weights:   # the members that take branch k
                node = self.new()
                self.records.append(_Record(None, [], [], [], [], w_node, node, weights, w,
                                            mask=(w > 0) | (weights == 0)))
            inner = dict(zip(programs[k].inputs, operands))
            for w_k, n_k, env_k in self.run(programs[k], [(w, node, inner)]):
                target = dict(env)
                target.update(zip(eqn.outputs, (_read(env_k, a)
                                                for a in programs[k].outputs)))
                out.append((w_k, n_k, target))
        return out


def _read(env: dict, atom: Any) -> tuple[Any, bool, int | None]:
    return (atom.value, False, None) if isinstance(atom, Literal) else env[atom]


class _Sweep:
    """The reverse sweep: per-member cotangents ``ct`` (classical values and weights,
    ``(members, *shape)``) and adjoint vectors ``lam`` (states)."""

    def __init__(self, size: int):
        self.size = size
        self.ct: dict[int, np.ndarray] = {}
        self.lam: dict[int, np.ndarray] = {}

    def add(self, node: int | None, value: Any) -> None:
        if node is not None and value is not None:
            have = self.ct.get(node)
            self.ct[node] = value if have is None else have + value

    def add_lam(self, node: int | None, value: np.ndarray) -> None:
        if node is not None:
            have = self.lam.get(node)
            self.lam[node] = value if have is None else have + value

    def walk(self, records: list[_Record]) -> None:
        for record in reversed(records):
            if record.eqn is None:      # a cond's members: w̄ += [takes it] w̄_k
                self.add(record.w_in, np.where(record.mask, self.ct.pop(record.w_out, 0.0),
                                               0.0))
                continue
            _RULES.get(record.eqn.primitive, _classical)(self, record)


def _members(value: Any, batched: bool, size: int) -> np.ndarray:
    x = np.asarray(value)
    return x if batched else np.broadcast_to(x, (size, *x.shape))


def _gate(sweep: _Sweep, record: _Record) -> None:
    # θ̄ = 2 Im<λ_out|G ψ_out>, λ_in = U^†λ_out
    lam = sweep.lam.pop(record.out_nodes[0], None)
    if lam is None:
        return
    eqn = record.eqn
    (psi_in, _), *angles = record.in_values
    psi_out = record.out_values[0][0]
    n = psi_in.shape[1].bit_length() - 1
    static = eqn.params.get("static")
    wires = tuple(eqn.params["wires"])
    circuit = bb._one_gate(eqn.params["name"], tuple(sorted(static.items())) if static else None,
                           wires, bool(angles), n)
    if angles:
        generator = gate_spec(eqn.params["name"], **(static or {})).generator
        moved = observable_rows(psi_out, n, generator, wires)
        sweep.add(record.in_nodes[1], 2.0 * np.einsum("bi,bi->b", lam.conj(), moved).imag)
    mats = member_matrices(circuit, [a for a, _ in angles], sweep.size)
    inverse = np.ascontiguousarray(mats.conj().swapaxes(-1, -2))
    sweep.add_lam(record.in_nodes[0], run_circuit(lam.copy(), *circuit.arrays(), inverse,
                                                  bb._NO_TABLES))


def _projective(sweep: _Sweep, record: _Record) -> None:
    # ψ' = A P ψ/√q, w' = w q: q̄ = w̄'w - Re<λ'|ψ'>/q, w̄ = w̄'q, λ_in = P(A^†λ'/√q + q̄ψ)
    eqn = record.eqn
    psi, _ = record.in_values[0]
    wire = eqn.params["wire"]
    if eqn.primitive is qp.postselect_p:
        outcome, flip = eqn.params["value"], False
    else:
        outcome = int(record.out_values[1][0])
        flip = outcome == 1 and (eqn.primitive is qp.reset_p or eqn.params["reset"])
    mask = ((np.arange(psi.shape[1]) >> wire) & 1) == outcome
    projected = np.where(mask, psi, 0.0)
    q = np.einsum("bi,bi->b", projected.conj(), projected).real
    alive = record.weight_out > 0
    safe_q = np.where(alive, q, 1.0)
    w_bar = sweep.ct.pop(record.w_out, None)
    w_bar = np.zeros(sweep.size) if w_bar is None else np.where(alive, w_bar, 0.0)
    sweep.add(record.w_in, w_bar * q)
    lam = sweep.lam.pop(record.out_nodes[0], None)
    lam_in = np.zeros_like(psi)
    if lam is not None:
        lam = np.where(alive[:, None], lam, 0.0)
    overlap = None if lam is None else np.einsum("bi,bi->b", lam.conj(), record.out_values[0][0])
    q_bar = probability_cotangent(w_bar, record.weight_out, safe_q, overlap)
    if lam is not None:
        if flip:
            lam = lam[:, np.arange(psi.shape[1]) ^ (1 << wire)]
        lam_in = np.where(mask, lam, 0.0) / np.sqrt(safe_q)[:, None]
    sweep.add_lam(record.in_nodes[0], lam_in + q_bar[:, None] * projected)


def _readout(sweep: _Sweep, record: _Record) -> None:
    # expval: λ_in = λ_out + ē Oψ; probs: λ_in,i = λ_out,i + p̄_j(i) ψ_i
    eqn = record.eqn
    psi, _ = record.in_values[0]
    lam = sweep.lam.pop(record.out_nodes[0], None)
    value_bar = sweep.ct.pop(record.out_nodes[1], None)
    if value_bar is not None:
        n = psi.shape[1].bit_length() - 1
        obs = None if eqn.primitive is qp.probs_p else pauli_sum_of(eqn.params["terms"])
        term = readout_adjoint(np, psi, n, obs, tuple(eqn.params["wires"]), value_bar,
                               lambda x, o, w: observable_rows(x, n, o, w))
        lam = term if lam is None else lam + term
    if lam is not None:
        sweep.add_lam(record.in_nodes[0], lam)


def _qalloc(sweep: _Sweep, record: _Record) -> None:
    sweep.lam.pop(record.out_nodes[0], None)


@functools.lru_cache(maxsize=1024)
def _equation_vjp(eqn: Eqn, active: tuple[bool, ...]) -> Program:
    return vjp_program(bb._equation_program(eqn), list(active), with_primal=False)


def _classical(sweep: _Sweep, record: _Record) -> None:
    # v̄_in = the equation's VJP program, batched over the members
    eqn = record.eqn
    cts = [sweep.ct.pop(n, None) for n in record.out_nodes]
    if all(c is None for c in cts):
        return
    program = bb._equation_program(eqn)
    found = {a: (v, n) for a, v, n in zip(eqn.inputs, record.in_values, record.in_nodes)}
    active = tuple(found[v][1] is not None and is_differentiable(v.type)
                   for v in program.inputs)
    if not any(active):
        return
    seeds = [np.zeros((sweep.size, *a.type.shape)) if c is None else c
             for c, a in zip(cts, eqn.outputs) if is_differentiable(a.type)]
    values = [found[v][0][0] for v in program.inputs]
    flags = (*(found[v][0][1] for v in program.inputs), *[True] * len(seeds))
    back = batched_part(_equation_vjp(eqn, active), flags, sweep.size, True)
    grads = evaluate(back, *values, *seeds)
    for g, v in zip(grads, [v for v, a in zip(program.inputs, active) if a]):
        sweep.add(found[v][1], np.asarray(g, np.float64).reshape(sweep.size, *v.type.shape))


_RULES = {qp.gate_p: _gate, qp.measure_p: _projective, qp.reset_p: _projective,
          qp.postselect_p: _projective, qp.expval_p: _readout, qp.probs_p: _readout,
          qp.qalloc_p: _qalloc}


class _LeavesForm(Exception):
    """The batch leaves the batched form: its members are differentiated one by one."""


def _recorded(program: Program, values: Sequence[Any], flags: Sequence[bool], size: int,
              active: Sequence[bool]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each member's value and cotangents of the ``active`` flat inputs."""
    flat = unpack_scalars(program)
    tape = _Tape(size)
    env = {}
    input_nodes = []
    for v, x, f in zip(flat.inputs, values, flags):
        input_nodes.append(tape.new())
        env[v] = (np.asarray(x), bool(f), input_nodes[-1])
    try:
        items = tape.run(flat, [(np.ones(size), tape.new(), env)])
    except bb._MemberByMember as error:
        raise _LeavesForm from error
    batch = tape.batch
    mass = sum((w for w, _, _ in items), np.zeros(size))
    postselected = batch.postselected_away > 0
    if np.any(batch.dropped > batch.tol) or np.any(postselected & (mass <= batch.tol)):
        raise _LeavesForm
    out = flat.outputs[0]
    scores = [_members(*_read(env, out)[:2], size).astype(np.float64) for _, _, env in items]
    raw = sum((w * g for (w, _, _), g in zip(items, scores)), np.zeros(size))
    norm = np.where(postselected, mass, 1.0)
    sweep = _Sweep(size)
    for (w, w_node, env), g in zip(items, scores):   # J = F/P: w̄ = g/P - F/P², ḡ = w/P
        sweep.add(w_node, g / norm - np.where(postselected, raw / norm ** 2, 0.0))
        node = _read(env, out)[2]
        if is_differentiable(out.type):
            sweep.add(node, w / norm)
    sweep.walk(tape.records)
    grads = [sweep.ct.get(n, np.zeros((size, *np.shape(x)[1 if f else 0:])))
             for n, x, f, a in zip(input_nodes, values, flags, active) if a]
    return raw / norm, grads


def _member_by_member(program: Program, values: Sequence[Any], flags: Sequence[bool],
                      size: int, argnums: ArgNums) -> tuple[Any, Any]:
    results = [gradient(program, *[np.asarray(v)[b] if f else v for v, f in zip(values, flags)],
                        argnums=argnums) for b in range(size)]
    leaves = [pytree.flatten(r.grad)[0] for r in results]
    tree = pytree.flatten(results[0].grad)[1]
    value = np.array([float(np.asarray(r.value).reshape(())) for r in results])
    return value, pytree.unflatten(tree, [np.stack([np.asarray(g[k], np.float64)
                                                    for g in leaves])
                                          for k in range(len(leaves[0]))])


def branch_value_and_grad(program: Program, values: Sequence[Any], flags: Sequence[bool],
                          size: int, argnums: ArgNums) -> tuple[Any, Any]:
    """Each member's value and gradient (with respect to ``argnums``, structured like
    them) of a scalar-valued ``program`` with measurements, batch axis first, from one
    batched branching run and one reverse sweep over its branches."""
    numbers = argnum_tuple(argnums, program, "grad")
    active = wrt_flags(program, numbers, "grad")
    try:
        value, grads = _recorded(program, values, flags, size, active)
    except _LeavesForm:
        return _member_by_member(program, values, flags, size, argnums)
    return value, pytree.unflatten(wrt_tree(program, argnums, numbers), grads)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    return (len(program.outputs) == 1 and program.out_types[0].shape == ()
            and bb.branches_claim(program, flags)
            and not any(e.primitive in (loop_p, while_p) for e in program.all_eqns()))


register_batched_gradient(_claims, branch_value_and_grad)
