"""The gradient, Jacobian and batching benchmark scripts run end to end on a tiny register (or a
small batch), and the methods they compare agree (their max|d| column)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def benchmark_output(name: str, *args: str) -> str:
    """What ``benchmarks/<name> args`` prints, after checking that it ran through."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def run_script(name: str, *args: str) -> list[list[str]]:
    return table_rows(benchmark_output(name, *args))


def table_rows(stdout: str, header: tuple[str, ...] = ("n", "L")) -> list[list[str]]:
    """The rows of the first table whose header starts with ``header``, up to its end."""
    lines = stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if tuple(line.split()[:len(header)]) == header)
    rows = []
    for line in lines[start + 1:]:
        if not (line.strip() and (line[0] == " " or line[:1].isdigit())):
            break
        rows.append(line.split())
    return rows


@pytest.mark.parametrize("script, args", [
    ("gradients.py", ["--methods", "qdiff", "qdiff-shift", "--observables", "Z"]),
    ("jacobian.py", ["--methods", "qdiff", "qdiff-rows"]),
    ("batching.py", ["--batch", "4", "--no-lightning"]),
    ("batching.py", ["--batch", "4", "--no-lightning", "--backend", "numpy"]),
])
def test_benchmark_script_runs_and_its_methods_agree(script, args):
    rows = run_script(script, "--sizes", "5", "--layers", "1", "--repeats", "1", *args)
    assert len(rows) == 2
    for row in rows:
        assert float(row[-1]) < 1e-8  # max|d| against qdiff's adjoint result


def test_wide_gates_benchmark_batches_the_random_circuit_and_agrees_with_the_loop():
    out = benchmark_output("wide_gates.py", "--batch", "3", "--repeats", "1")
    lines = out.splitlines()
    assert lines[0].endswith("one batched circuit: True")
    rows = [line.split() for line in lines[2:]]
    assert [row[0] for row in rows] == ["value", "value+grad"]
    assert all(float(row[-1]) < 1e-12 for row in rows)


def test_loops_benchmark_prints_both_runners_within_four_standard_errors():
    out = benchmark_output("loops.py", "--shots", "3000", "--python-shots", "20", "--samples",
                           "2000", "--python-samples", "5", "--rounds", "4", "--stored-up-to", "4")
    rows = [line for line in out.splitlines()
            if "trajectories" in line or " batch " in line]
    assert [("batch" in row) for row in rows] == [False, True] * 4  # runs, then gradients
    for row in rows:
        estimate, error, exact = (float(row.split()[k]) for k in (-4, -2, -1))
        if "batch" in row:
            assert abs(estimate - exact) <= 4 * error
    adjoint = [line.split() for line in out.splitlines()
               if line.startswith(("every round stored", "checkpointed segments"))]
    assert len(adjoint) == 2
    assert float(adjoint[1][-1]) < 1e-12  # checkpointed against stored: max rel. diff


def test_library_table_in_complex64():
    # --dtype complex64: qdiff runs the circuits in single precision (the table says so), its
    # probabilities within single-precision rounding of lightning's double-precision ones
    pytest.importorskip("pennylane")
    out = benchmark_output("statevector.py", "--library-only", "--sizes", "5", "--repeats", "1",
                           "--clock", "cpu", "--dtype", "complex64", "--circuits", "qft", "random")
    lines = out.splitlines()
    assert any(line.startswith("Library circuits, complex64") for line in lines)
    start = next(k for k, line in enumerate(lines) if line.split()[:2] == ["circuit", "n"])
    rows = [line.split() for line in lines[start + 1:start + 3]]
    assert [row[0] for row in rows] == ["qft", "random"]
    assert all(1e-12 < float(row[-1]) < 1e-5 for row in rows), rows


def test_library_table_runs_and_lightning_agrees_with_qdiff():
    # lightning runs each library circuit gate for gate (converted from the transpiled Qiskit
    # circuit, wires reversed); its probabilities are qdiff's
    pytest.importorskip("pennylane")
    pytest.importorskip("qiskit_aer")
    out = benchmark_output("statevector.py", "--library-only", "--sizes", "5", "--repeats", "1",
                           "--clock", "cpu")
    lines = out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.split()[:2] == ["circuit", "n"])
    rows = [line.split() for line in lines[start + 1:start + 8]]
    assert [row[0] for row in rows] == ["hea", "qft", "qaoa", "su2", "qpe", "graph", "random"]
    for row in rows:
        assert float(row[-1]) < 1e-12, row
    assert sum("goal <=" in line for line in lines) == 7 * 2 + 2


def test_batched_loops_benchmark_runs_and_its_gradients_agree():
    out = benchmark_output("batched_loops.py", "--batch", "3", "--repeats", "1")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [row[0] for row in rows] == ["repeat_until_one", "cycle_walk", "measured_rounds"]
    for row in rows:
        assert float(row[-1]) < 1e-12  # batched against the loop of value_and_grad calls


def test_gradient_benchmark_reports_no_ratio_from_calls_over_the_budget():
    # a gradient over --budget is one call (its warm-up included), and so is the value
    # beside it: both are marked `~` and the goal line gives no ratio of the two
    out = benchmark_output("gradients.py", "--sizes", "5", "--layers", "1", "--methods", "qdiff",
                           "--observables", "Z", "--budget", "0")
    row = next(line.split() for line in out.splitlines()
               if line.split()[:2] == ["5", "1"])
    assert row[5].startswith("~") and row[6].startswith("~")
    assert "grad / value not measured" in out


def test_gradient_benchmark_prints_the_forward_and_reverse_blocks_of_the_adjoint_method():
    out = benchmark_output("gradients.py", "--sizes", "10", "--layers", "2", "--methods", "qdiff",
                           "--observables", "Z", "--repeats", "1")
    rows = table_rows(out, ("n", "L", "forward"))
    assert [row[:2] for row in rows] == [["10", "2"]]
    forward, undo, sweep, with_sweep, with_undo = map(float, rows[0][2:])
    assert min(forward, undo, sweep) > 0
    assert with_sweep == pytest.approx(1 + sweep / forward, rel=0.05)
    assert with_undo == pytest.approx(1 + undo / forward, rel=0.05)
