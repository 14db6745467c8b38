"""The differentiation engines: forward mode (`forward.jvp_program`) and tapeless reverse mode
(`reverse.vjp_program`), interpreters over the primitive registry's ``jvp`` / ``vjp`` rules.

`rules` registers a primitive's rules, `tangents` holds what rules share, and
`classical_rules` holds the rules of the classical array primitives; importing this package
registers them. (The rules of loops and branches live with the loop strategies, in
`qdiff.loops.control_flow_rules`.)
"""

from . import classical_rules  # noqa: F401  (registers the classical primitives' rules)
