"""D-LSTM: train ADBench's LSTM loss on a Markov-chain sequence, the time loop a ``fori_loop``.

ADBench's D-LSTM objective: l stacked LSTM cells of width b (each with a weight and a bias
row per gate, gates fed by the input and the hidden state elementwise), an input scale and
an output affine map; for t = 0 .. c-2 the network reads the one-hot symbol x_t and scores
the next one, and the loss is -Σ_t Σ_j x_{t+1,j}·(y_{t,j} - log(Σ_j exp(y_{t,j}) + 2)) /
((c-1)·b) (the ``+ 2`` is ADBench's). The objective is written once, for qdiff.numpy with
``qdiff.fori_loop`` over time and for jax.numpy with ``jax.lax.fori_loop``.

The sequence is drawn from a seeded Markov chain on b symbols, so the best expected loss is
bounded below by the chain's entropy rate / b. Training: Adam (with a progress bar) on the
weights, with gradients from ``qdiff.value_and_grad``, reversing the time loop by storing
every step's carry (``--method reverse``) or by strip-mined checkpoints
(``--method checkpointed``, ``checkpoint=2``: about 2·sqrt(c) stored carries).

Self-checks: the gradient against central finite differences and ``jax.grad`` (when JAX is
installed); training closes at least half of the gap between the loss at the start and the
entropy floor (a floor in expectation: a short sequence can be learnt below it).

    python case_studies/lstm.py            # l = 2, b = 10, c = 100
    python case_studies/lstm.py --quick    # l = 2, b = 6, c = 16
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import common  # case_studies/common.py: this folder is on sys.path however the study starts
import numpy as np

import qdiff
import qdiff.numpy as qnp

LAYERS = 2


def lstm_objective(np_like: Any, fori_loop: Callable, main_params, extra_params, state,
                   sequence):
    """ADBench's D-LSTM loss. main_params (2l, 4b): a weight row then a bias row per layer;
    extra_params (3, b): input scale, output scale, output bias; state (2l, b): hidden then
    cell per layer; sequence (c, b)."""
    c, b = sequence.shape
    layers = state.shape[0] // 2

    def cell(weight, bias, hidden, memory, inputs):
        gates = np_like.concatenate([inputs, hidden, inputs, hidden]) * weight + bias
        forget = 1 / (1 + np_like.exp(-gates[:b]))
        ingate = 1 / (1 + np_like.exp(-gates[b:2 * b]))
        outgate = 1 / (1 + np_like.exp(-gates[2 * b:3 * b]))
        change = np_like.tanh(gates[3 * b:])
        memory = memory * forget + ingate * change
        return outgate * np_like.tanh(memory), memory

    def step(t, carry):
        state, total = carry
        inputs = sequence[t] * extra_params[0]
        rows = []
        for i in range(layers):
            hidden, memory = cell(main_params[2 * i], main_params[2 * i + 1], state[2 * i],
                                  state[2 * i + 1], inputs)
            rows += [hidden, memory]
            inputs = hidden
        scores = inputs * extra_params[1] + extra_params[2]
        normalized = scores - np_like.log(np_like.sum(np_like.exp(scores)) + 2)
        return np_like.stack(rows), total + np_like.sum(sequence[t + 1] * normalized)

    _, total = fori_loop(0, c - 1, step, (state, 0.0 * extra_params[0, 0]))
    return -total / ((c - 1) * b)


def markov_sequence(c: int, b: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """c one-hot rows from a random Markov chain on b symbols (sparse, peaked transitions),
    and the chain's entropy rate in nats."""
    transitions = rng.dirichlet(np.full(b, 0.3), size=b)
    symbols = [0]
    for _ in range(c - 1):
        symbols.append(rng.choice(b, p=transitions[symbols[-1]]))
    # stationary distribution: the left eigenvector for eigenvalue 1
    values, vectors = np.linalg.eig(transitions.T)
    stationary = np.real(vectors[:, np.argmin(np.abs(values - 1))])
    stationary /= stationary.sum()
    logs = np.log(transitions, where=transitions > 0, out=np.zeros_like(transitions))
    rate = -float(np.sum(stationary[:, None] * transitions * logs))
    return np.eye(b)[symbols], rate


def jax_gradient(main_params, extra_params, state, sequence) -> list[np.ndarray] | None:
    """The gradient by ``jax.grad`` in double precision, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    loss = lambda m, e: lstm_objective(jnp, jax.lax.fori_loop, m, e,  # noqa: E731
                                       jnp.asarray(state), jnp.asarray(sequence))
    return [np.asarray(g) for g in jax.grad(loss, argnums=(0, 1))(jnp.asarray(main_params),
                                                                  jnp.asarray(extra_params))]


def main(argv: list[str] | None = None) -> int:
    args = common.parse_args(__doc__.splitlines()[0], ("reverse", "checkpointed"), argv)
    rng = np.random.default_rng(args.seed)
    b, c, steps = (6, 16, 20) if args.quick else (10, 100, 250)
    sequence, entropy_rate = markov_sequence(c, b, rng)
    main_params = 0.3 * rng.normal(size=(2 * LAYERS, 4 * b))
    extra_params = 0.3 * rng.normal(size=(3, b))
    state = np.zeros((2 * LAYERS, b))
    checkpoint = 2 if args.method == "checkpointed" else None

    def loop(lower, upper, body, init):
        return qdiff.fori_loop(lower, upper, body, init, checkpoint=checkpoint)

    objective = qdiff.trace(lambda m, e, s, x: lstm_objective(qnp, loop, m, e, s, x),
                            main_params, extra_params, state, sequence)
    value_and_grad = qdiff.value_and_grad(objective, argnums=(0, 1))
    split = main_params.size

    def loss_and_grad(flat):
        m, e = flat[:split].reshape(main_params.shape), flat[split:].reshape(extra_params.shape)
        value, (gm, ge) = value_and_grad(m, e, state, sequence)
        return float(value), np.concatenate([np.ravel(gm), np.ravel(ge)])

    def loss(flat):
        return float(objective(flat[:split].reshape(main_params.shape),
                               flat[split:].reshape(extra_params.shape), state, sequence))

    start = np.concatenate([main_params.ravel(), extra_params.ravel()])
    start_loss, grad = loss_and_grad(start)
    h = 1e-6
    # central differences along 40 random coordinates (all of them would take long)
    chosen = rng.choice(start.size, size=min(40, start.size), replace=False)
    finite = np.array([(loss(start + h * e) - loss(start - h * e)) / (2 * h)
                       for e in np.eye(start.size)[chosen]])
    scale = np.max(np.abs(grad))
    passed = [common.check("gradient vs central differences (max relative, 40 coordinates)",
                           np.max(np.abs(grad[chosen] - finite)) / scale, 0.0, 1e-6)]
    reference = jax_gradient(main_params, extra_params, state, sequence)
    if reference is None:
        print("JAX is not installed: no JAX check")
    else:
        reference = np.concatenate([np.ravel(r) for r in reference])
        passed.append(common.check("gradient vs jax.grad (max relative)",
                                   np.max(np.abs(grad - reference)) / scale, 0.0, 1e-9))

    trained = common.adam(loss_and_grad, start, steps=steps, lr=0.05,
                          desc=f"D-LSTM ({args.method})")
    final = loss(trained.params)
    floor = entropy_rate / b
    print(common.results_table([{
        "layers": LAYERS, "b": b, "c": c, "loss at start": start_loss, "trained loss": final,
        "entropy floor": floor, "steps": steps, "evaluations": trained.evaluations,
        "seconds": f"{trained.seconds:.1f}"}], "D-LSTM, reverse mode with "
        + ("every carry stored" if checkpoint is None else "strip-mined checkpoints")))
    common.plot_loss(trained.losses, Path(args.out) / "loss.png")
    passed += [
        common.check("training closes the gap to the entropy floor (fraction left)",
                     (final - floor) / (start_loss - floor), 0.0, 0.5),
    ]
    return common.finish(all(passed))


if __name__ == "__main__":
    raise SystemExit(main())
