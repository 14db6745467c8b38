"""Derivatives of quantum programs: the adjoint method, parameter-shift rules and the
shifted-program gradient, behind `qdiff.quantum.gradient` and `qdiff.quantum.jacobian`."""
