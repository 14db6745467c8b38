"""The quantum language: gates, observables, primitives, the tracing front end and fusion.

Nothing here runs a circuit: this layer says what a quantum program is, for every back
end, gradient method and exporter above it.
"""
