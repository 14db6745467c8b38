"""The VQE study: H2 to 1e-6 of exact diagonalization, the Ising chain within its bound."""

import importlib.util
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import vqe  # noqa: E402


def test_vqe_quick_run_passes_its_self_checks(tmp_path):
    assert vqe.main(["--quick", "--out", str(tmp_path)]) == 0
    if importlib.util.find_spec("matplotlib"):
        for name in ("h2_loss.png", "ising_loss.png", "h2_landscape.png"):
            assert (tmp_path / name).stat().st_size > 0


def test_h2_hamiltonian_has_the_published_ground_energy():
    # -1.857275030202 Ha: the electronic ground energy quoted with these coefficients
    assert abs(vqe.exact_ground_energy(vqe.H2_HAMILTONIAN) + 1.857275030202) < 1e-9


def test_ising_chain_exact_energy_matches_free_fermions():
    # the open chain at h = 1 is a free-fermion problem: E0 = -Σ_k ε_k with ε_k the
    # singular values of the (n×n) hopping matrix A with A_ii = h, A_{i,i+1} = J = 1
    n = 6
    a = np.eye(n) + np.diag(np.ones(n - 1), 1)
    assert abs(vqe.exact_ground_energy(vqe.ising_chain(n))
               + np.sum(np.linalg.svd(a, compute_uv=False))) < 1e-9
