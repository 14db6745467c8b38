"""``loop``, ``while`` and ``cond`` as Python control flow around their inlined bodies.

The loop protocol makes in-place updates of carries safe: a carry enters the loop owned
(copied unless it is an array this program allocated and reads no more), the body may
update its carries in place, and whatever the body returns that it does not own (a const,
a literal, a repeated value) is copied before it becomes the next carry.
"""

from __future__ import annotations

from ...ir.control_flow import UNBOUNDED_WHILE_LIMIT, LoopLimitError, cond_p, loop_p, while_p
from ...ir.core import Eqn, Var
from ...ir.types import Tensor
from ..lowering import Scope, rule
from ..source import cast


def _is_array(atom: object) -> bool:
    return isinstance(atom.type, Tensor) and bool(atom.type.shape)


def carries_in(scope: Scope, atoms: tuple, exprs: list[str], consts: tuple = ()) -> list[str]:
    """Fresh carry variables holding ``exprs``, arrays owned by the loop: a value passed as
    two carries (a cotangent equal to a primal, say) is copied for the second, and so is a
    carry whose array one of the loop's ``consts`` also reads (the same value or a view of
    it), since the body may update each carry in place."""
    read = {scope.live.root_of(c) for c in consts if isinstance(c, Var)}
    names: list[str] = []
    for atom, expr in zip(atoms, exprs):
        name = scope.fresh("c")
        own = not _is_array(atom) or (isinstance(atom, Var) and scope.can_overwrite(atom)
                                      and expr not in exprs[:len(names)]
                                      and scope.live.root_of(atom) not in read)
        scope.line(f"{name} = {expr}" if own else f"{name} = {expr}.copy()")
        if own:  # the loop's outputs may be this very array
            scope.name_array(name, atom)
        names.append(name)
    return names


def assign(scope: Scope, names: list[str], exprs: list[str]) -> None:
    """``names = exprs`` at once: a body may return its carries permuted (a swap), so
    assigning one by one could overwrite a carry before it is read."""
    changed = [(name, expr) for name, expr in zip(names, exprs) if name != expr]
    if changed:
        scope.line(f"{', '.join(n for n, _ in changed)}, = "
                   f"{', '.join(e for _, e in changed)},")


@rule(loop_p)
def _loop(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    body = eqn.params["body"]
    num_consts = eqn.params["num_consts"]
    consts = args[2:2 + num_consts]
    carry = carries_in(scope, eqn.inputs[2 + num_consts:], args[2 + num_consts:],
                       eqn.inputs[2:2 + num_consts])
    i = scope.fresh("i")
    index = cast(i, body.inputs[0].type.dtype)
    with scope.src.loop(f"for {i} in range({args[0]}, {args[1]})"):
        outs = scope.inline(body, [index, *consts, *carry], body.inputs[1 + num_consts:])
        assign(scope, carry, scope.owned_outputs(body, outs, body.inputs[1 + num_consts:]))
    return carry


@rule(while_p)
def _while(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    cond, body = eqn.params["cond"], eqn.params["body"]
    n_cond, n_body = eqn.params["num_cond_consts"], eqn.params["num_body_consts"]
    max_iter = eqn.params["max_iter"]
    cond_consts, body_consts = args[:n_cond], args[n_cond:n_cond + n_body]
    carry = carries_in(scope, eqn.inputs[n_cond + n_body:], args[n_cond + n_body:],
                       eqn.inputs[:n_cond + n_body])
    limit = UNBOUNDED_WHILE_LIMIT if max_iter is None else max_iter
    message = (f"while loop still running after max_iter={max_iter} iterations"
               if max_iter is not None else
               f"while loop still running after {limit} iterations with no max_iter: it may "
               "never end; pass max_iter= to bound it (or allow more rounds)")
    count = scope.fresh("n")
    scope.line(f"{count} = 0")
    with scope.src.loop("while True"):
        cond_carries = cond.inputs[n_cond:]
        pred, *outs = scope.inline(cond, [*cond_consts, *carry], cond_carries)
        assign(scope, carry, scope.owned_outputs(cond, [pred, *outs], cond_carries)[1:])
        with scope.src.block(f"if not {pred}"):
            scope.line("break")
        with scope.src.block(f"if {count} >= {limit}"):
            scope.line(scope.src.error(LoopLimitError, message))
        body_carries = body.inputs[n_body:]
        outs = scope.inline(body, [*body_consts, *carry], body_carries)
        assign(scope, carry, scope.owned_outputs(body, outs, body_carries))
        scope.line(f"{count} += 1")
    return carry


@rule(cond_p)
def _cond(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    branches = eqn.params["branches"]
    outs = [scope.fresh("b") for _ in eqn.outputs]
    k = scope.fresh("k")
    scope.line(f"{k} = min(max({args[0]}, 0), {len(branches) - 1})")
    for index, branch in enumerate(branches):
        header = "if" if index == 0 else "elif" if index < len(branches) - 1 else "else"
        test = f" {k} == {index}" if header != "else" else ""
        with scope.src.block(f"{header}{test}"):
            results = scope.inline(branch, args[1:])
            assign(scope, outs, results)
    return outs
