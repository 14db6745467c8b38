"""Loop strategies shared by classical and quantum differentiation.

`reversal` reverses a counted loop given its step program (store every carry, or a
strip-mined checkpoint schedule); `increments` finds carries that need no storage;
`memory` measures what the reversal stores.
"""
