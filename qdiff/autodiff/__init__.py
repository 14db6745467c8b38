"""The differentiation engines: forward mode (`forward.jvp_program`) and tapeless reverse mode
(`reverse.vjp_program`), interpreters over the primitive registry's ``jvp`` / ``vjp`` rules.

Rules live beside the primitives they differentiate; `tangents` holds what rules share.
"""
