"""Loop strategies shared by classical and quantum differentiation.

`reversal` reverses a counted loop given its step program (store every carry, or a
strip-mined checkpoint schedule); `increments` finds carries that need no storage;
`memory` measures what the reversal stores; `inversion` proves loop bodies invertible
and derives their inverses (reverse computing, ``fori_loop(invertible=True)``);
`occurrences` holds the distributions with exactly known normalizers from which the
randomized derivative of an unbounded loop draws the one occurrence it differentiates;
`control_flow_rules` holds the derivative rules of `loop`, `while` and `cond`, built on
these strategies (importing this package registers them).
"""

# importing registers the rules of loop, while and cond, and the inversion pass
from . import control_flow_rules, inversion  # noqa: F401
