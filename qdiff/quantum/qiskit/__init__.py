"""The Qiskit bridge: circuits imported as programs, programs exported as circuits, and runs
and gradients on Qiskit's primitives."""
