"""Running quantum programs: the branching statevector runner, the density-matrix runner and
jobs of many programs (`qdiff.quantum.run`)."""
