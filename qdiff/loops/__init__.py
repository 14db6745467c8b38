"""Loop strategies shared by classical and quantum differentiation.

`reversal` reverses a counted loop given its step program (store every carry, or a
strip-mined checkpoint schedule); `increments` finds carries that need no storage;
`memory` measures what the reversal stores; `occurrences` holds the distributions with
exactly known normalizers from which the randomized derivative of an unbounded loop draws
the one occurrence it differentiates.
"""
