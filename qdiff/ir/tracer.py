"""Tracing Python functions into programs.

A `Builder` collects the equations of one program. Values flowing through user code during
tracing are `Tracer`s (a var plus the builder it belongs to). Combinators trace their bodies
in child builders; a body that reads a tracer of an enclosing builder captures it as an extra
input ("const"), so every sub-program is closed. A `Cell` is a mutable slot (a quantum
register's state, for instance): a body that writes a cell makes it part of the loop's or
branch's carry automatically.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import pytree
from .core import Atom, Eqn, Literal, Program, Var
from .errors import QdiffError, TracerConversionError, TypeCheckError
from .primitives import Primitive, get_primitive
from .types import Bit, Tensor, Type, type_of_value

_BIT_AS_INT = Tensor((), "int64")

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_builder_stack: list[Builder] = []


def current_builder() -> Builder | None:
    """The builder receiving equations now, or None outside tracing."""
    return _builder_stack[-1] if _builder_stack else None


def user_location() -> str:
    """``file:line`` of the innermost stack frame outside the qdiff package."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        path = os.path.abspath(frame.filename)
        if not path.startswith(_PACKAGE_DIR + os.sep):
            return f"{frame.filename}:{frame.lineno}"
    return "<qdiff>"


class Builder:
    """Collects the equations, captured values and touched cells of one program."""

    def __init__(self, parent: Builder | None, allow_cell_writes: bool = True,
                 scope: str = "program"):
        self.parent = parent
        self.eqns: list[Eqn] = []
        self.scope = scope
        self.allow_cell_writes = allow_cell_writes
        self.active = False
        # a top-level trace that may read tracers of the traces enclosing it (closure
        # conversion, as in JAX): they become extra inputs, see `trace_closed`
        self.closure = False
        # outer var -> (outer tracer, inner input var), in capture order
        self.captures: dict[Var, tuple[Tracer, Var]] = {}
        # cells opened from an enclosing scope: cell -> (outer value, inner input var or None)
        self.cells_opened: dict[Cell, tuple[Any, Var]] = {}
        self.cell_values: dict[Cell, Any] = {}
        self.cells_written: list[Cell] = []
        # per-trace data of front ends (the quantum register file, for instance)
        self.context: dict[str, Any] = {}

    @property
    def root(self) -> Builder:
        """The builder of the top-level program being traced."""
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def __enter__(self) -> Builder:
        self.active = True
        _builder_stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        popped = _builder_stack.pop()
        assert popped is self, "builder stack corrupted"
        self.active = False

    def is_enclosed_by(self, other: Builder) -> bool:
        scope = self.parent
        while scope is not None:
            if scope is other:
                return True
            scope = scope.parent
        return False

    def atom(self, value: Any) -> Atom:
        """The atom of this program that stands for ``value`` (capturing outer tracers)."""
        if isinstance(value, Tracer):
            if value.builder is self:
                return value.var
            if not value.builder.active or not (
                    self.is_enclosed_by(value.builder) or self._closes_over(value.builder)):
                raise QdiffError(
                    "a traced value escaped the scope it was defined in (for example a value "
                    "computed inside a loop body and stored in an outer Python variable); "
                    "return it from the body instead")
            captured = self.captures.get(value.var)
            if captured is None:
                captured = (value, Var(value.var.type))
                self.captures[value.var] = captured
            return captured[1]
        if isinstance(value, Cell):
            raise QdiffError("a Cell is not a value; use cell.value")
        return Literal(value)

    def _closes_over(self, other: Builder) -> bool:
        """Whether ``other`` belongs to a trace enclosing this closure-converting trace."""
        root = self.root
        return root.closure and other.root is not root

    def read_cell(self, cell: Cell) -> Any:
        if cell in self.cell_values:
            return self.cell_values[cell]
        if cell.owner is self:
            raise QdiffError("cell was read before it was given a value")
        if cell.owner is not None and not self.is_enclosed_by(cell.owner):
            raise QdiffError("a register or cell is used outside the scope where it was created")
        outer = cell.owner_value() if self.parent is None else self.parent.read_cell(cell)
        # Always a fresh input var: whether the cell is a const or part of the carry is only
        # known once the whole body has been traced.
        inner_var = Var(outer.var.type if isinstance(outer, Tracer) else type_of_value(outer))
        inner = Tracer(inner_var, self)
        self.cells_opened[cell] = (outer, inner_var)
        self.cell_values[cell] = inner
        return inner

    def write_cell(self, cell: Cell, value: Any) -> None:
        if cell.owner is not self:
            if not self.allow_cell_writes:
                raise QdiffError(
                    f"a {self.scope} cannot update a register or cell of its enclosing "
                    "program; use fori_loop or while_loop for sequential updates")
            if cell not in self.cell_values:
                self.read_cell(cell)
            if cell not in self.cells_written:
                self.cells_written.append(cell)
        self.cell_values[cell] = value


class Cell:
    """A mutable slot holding a traced value.

    Loops, while loops and branches that write a cell carry its value automatically; this is
    how quantum registers thread their state through control flow.

    >>> import qdiff
    >>> def f(x):
    ...     acc = Cell(x)
    ...     qdiff.fori_loop(0, 3, lambda i: acc.set(acc.value * 2.0))
    ...     return acc.value
    >>> float(qdiff.trace(f, 1.0)(1.5))
    12.0
    """

    def __init__(self, value: Any):
        self.owner = current_builder()
        self._eager_value = None
        self.set(value)

    def owner_value(self) -> Any:
        return self._eager_value

    @property
    def value(self) -> Any:
        builder = current_builder()
        if builder is None:
            if self.owner is not None:
                raise QdiffError("a register or cell is used after the trace that created it ended")
            return self._eager_value
        return builder.read_cell(self)

    def set(self, value: Any) -> None:
        builder = current_builder()
        if builder is None:
            self._eager_value = value
        else:
            builder.write_cell(self, value)


class Tracer:
    """A value of a program being traced. Supports NumPy-style operators and methods (bound
    by `qdiff.numpy`)."""

    __slots__ = ("var", "builder")
    __array_priority__ = 1000
    __array_ufunc__ = None  # make NumPy defer to our reflected operators

    def __init__(self, var: Var, builder: Builder):
        self.var = var
        self.builder = builder

    @property
    def type(self) -> Type:
        return self.var.type

    @property
    def shape(self) -> tuple[int, ...]:
        return self._tensor_type("shape").shape

    @property
    def dtype(self) -> np.dtype:
        return self._tensor_type("dtype").np_dtype

    @property
    def ndim(self) -> int:
        return self._tensor_type("shape").ndim

    @property
    def size(self) -> int:
        return self._tensor_type("shape").size

    def _tensor_type(self, what: str) -> Tensor:
        if isinstance(self.var.type, Bit):
            return _BIT_AS_INT  # a measured bit computes like the integer 0 or 1
        if not isinstance(self.var.type, Tensor):
            raise QdiffError(f"a {self.var.type.short()} value has no {what}")
        return self.var.type

    def __repr__(self) -> str:
        return f"Tracer<{self.var.type.short()}>"

    # Python needs concrete values here; name the combinator that replaces the construct.
    def __bool__(self) -> bool:
        raise TracerConversionError(
            f"the truth value of a traced {self.var.type.short()} is not known while tracing "
            f"(at {user_location()}): use qdiff.cond(pred, true_fn, false_fn, ...) instead of "
            "`if`, qdiff.while_loop(cond_fn, body_fn, init) instead of `while`, and "
            "qdiff.numpy.where for elementwise choices")

    def _concrete_error(self, what: str) -> TracerConversionError:
        return TracerConversionError(
            f"cannot convert a traced {self.var.type.short()} to {what} while tracing "
            f"(at {user_location()}); keep the computation in qdiff.numpy, and use "
            "qdiff.fori_loop / qdiff.cond for control flow that depends on it")

    def __int__(self) -> int:
        raise self._concrete_error("a Python int")

    def __float__(self) -> float:
        raise self._concrete_error("a Python float")

    def __complex__(self) -> complex:
        raise self._concrete_error("a Python complex")

    def __index__(self) -> int:
        raise self._concrete_error("an index (use it as an array index instead: x[i] works)")

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise self._concrete_error("a NumPy array")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __hash__(self) -> int:
        return id(self)

    def __pos__(self) -> Tracer:
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError("traced arrays are immutable: use x = x.at[index].set(value)")

    # The operators (`+`, `<`, `x[i]`, ...), `.at`, `.T` and the ndarray-like methods are
    # the array API's: `qdiff.numpy` binds them to this class when it is imported.


def bind(primitive: Primitive, *args: Any, **params: Any) -> Any:
    """Apply ``primitive`` to ``args``: record an equation while tracing, else evaluate.

    Pure primitives whose operands are all concrete are evaluated on the spot (constant
    folding), so Python-level constants never clutter the program.
    """
    builder = current_builder()
    traced = any(isinstance(a, Tracer) for a in args)
    if not traced and (builder is None or not is_effectful(primitive, params)):
        in_types = [type_of_value(a) for a in args]
        _check_types(primitive, in_types, params)
        return primitive.impl("numpy")(*args, **params)
    if builder is None:
        raise QdiffError(
            f"{primitive.name}: a traced value is used after the trace that made it ended")
    return record(primitive, *args, **params)


def record(primitive: Primitive, *args: Any, **params: Any) -> Any:
    """Record an equation in the program being traced, even when every operand is a constant.

    Transformations use it for values they must not fold into literals, such as large
    zero arrays (a folded one would be embedded in the program, JSON included).
    """
    builder = current_builder()
    if builder is None:
        return bind(primitive, *args, **params)
    atoms = [builder.atom(a) for a in args]
    out_types = _check_types(primitive, [a.type for a in atoms], params)
    outputs = tuple(Var(t) for t in out_types)
    builder.eqns.append(Eqn(primitive, tuple(atoms), outputs, dict(params)))
    tracers = [Tracer(v, builder) for v in outputs]
    return tracers if primitive.multiple_results else tracers[0]


def _check_types(primitive: Primitive, in_types: Sequence[Type], params: dict) -> tuple[Type, ...]:
    try:
        return tuple(primitive.type_rule(*in_types, **params))
    except TypeCheckError as exc:
        message = str(exc)
        if not message.startswith(primitive.name):
            message = f"{primitive.name}: {message}"
        raise TypeCheckError(f"{message} (at {user_location()})") from None


def is_effectful(primitive: Primitive, params: dict) -> bool:
    """Whether an equation of ``primitive`` with ``params`` may allocate, measure or otherwise
    have effects (its own or a sub-program's), so that it must run even when nothing reads it.

    >>> from qdiff.ir.primitives import get_primitive
    >>> is_effectful(get_primitive("sin"), {})
    False
    """
    if primitive.effectful:
        return True
    for name in primitive.subprogram_params:
        value = params.get(name)
        if value is None:
            continue
        programs = [value] if isinstance(value, Program) else list(value)
        if any(program_is_effectful(p) for p in programs):
            return True
    return False


def program_is_effectful(program: Program) -> bool:
    """Whether evaluating ``program`` may allocate, measure or otherwise have effects."""
    return any(is_effectful(eqn.primitive, eqn.params) for eqn in program.eqns)


@dataclass
class TracedBody:
    """A traced sub-function before it is closed into a program (see `close`)."""

    builder: Builder
    arg_vars: list[Var]
    outputs: list[Any]
    out_tree: tuple

    @property
    def out_types(self) -> list[Type]:
        return [self.builder.atom(x).type for x in self.outputs]

    def const_values(self, carry_cells: Sequence[Cell] = ()) -> dict[Any, Any]:
        """Key -> outer value of each const of this body: captured values and read-only cells.

        Keys identify the outer value, so bodies of one equation (the branches of a `cond`)
        can share one const list.
        """
        b = self.builder
        found: dict[Any, Any] = {("var", v): t for v, (t, _) in b.captures.items()}
        for cell, (outer, _) in b.cells_opened.items():
            if cell not in carry_cells:
                found[("cell", cell)] = outer
        return found

    def close(self, leading: int, carry_cells: Sequence[Cell] = (),
              const_keys: Sequence[Any] | None = None) -> Program:
        """Close the body into a program ``(leading args, consts, carry args, cell carry)``.

        The first ``leading`` traced arguments come first (a loop index, say); the rest are
        carry arguments, followed by one carry argument per cell in ``carry_cells``. The
        consts are those named by ``const_keys`` (default: this body's own, in the order of
        `const_values`); a const this body does not use gets an unused input.
        """
        b = self.builder
        own: dict[Any, Var] = {("var", v): inner for v, (_, inner) in b.captures.items()}
        for cell, (_, inner_var) in b.cells_opened.items():
            own[("cell", cell)] = inner_var
        if const_keys is None:
            const_keys = list(self.const_values(carry_cells))
        const_vars = [own.get(key) or Var(_key_type(b, key)) for key in const_keys]
        cell_in_vars: list[Var] = []
        cell_outs: list[Any] = []
        for cell in carry_cells:
            opened = b.cells_opened.get(cell)
            if opened is not None:
                cell_in_vars.append(opened[1])
                cell_outs.append(b.cell_values[cell])
            else:  # untouched by this body: passed through
                in_var = Var(_key_type(b, ("cell", cell)))
                cell_in_vars.append(in_var)
                cell_outs.append(Tracer(in_var, b))
        out_atoms = [b.atom(x) for x in list(self.outputs) + cell_outs]
        inputs = (self.arg_vars[:leading] + const_vars + self.arg_vars[leading:]
                  + cell_in_vars)
        return Program(tuple(inputs), tuple(b.eqns), tuple(out_atoms), name=b.scope)


def _key_type(builder: Builder, key: Any) -> Type:
    kind, what = key
    if kind == "var":
        return what.type
    outer = builder.parent.read_cell(what) if builder.parent else what.owner_value()
    return outer.type if isinstance(outer, Tracer) else type_of_value(outer)


def close_body(body: TracedBody, leading: int,
               carry_cells: Sequence[Cell] = ()) -> tuple[Program, list[Any]]:
    """Close one body; returns the program and the outer values of its consts."""
    consts = body.const_values(carry_cells)
    return body.close(leading, carry_cells, list(consts)), list(consts.values())


def close_bodies(bodies: Sequence[TracedBody], leading: int,
                 carry_cells: Sequence[Cell] = ()) -> tuple[list[Program], list[Any]]:
    """Close several bodies of one equation over one shared const list (union of theirs)."""
    consts: dict[Any, Any] = {}
    for body in bodies:
        consts.update(body.const_values(carry_cells))
    programs = [body.close(leading, carry_cells, list(consts)) for body in bodies]
    return programs, list(consts.values())


def cells_written(bodies: Sequence[TracedBody]) -> list[Cell]:
    """Cells of enclosing scopes that any of ``bodies`` writes, in first-write order."""
    found: list[Cell] = []
    for body in bodies:
        for cell in body.builder.cells_written:
            if cell not in found:
                found.append(cell)
    return found


def cell_outer_values(cells: Sequence[Cell]) -> list[Any]:
    """The current values of ``cells`` in the current scope (the carry's initial values)."""
    builder = current_builder()
    return [cell.value if builder is None else builder.read_cell(cell) for cell in cells]


def update_cells(cells: Sequence[Cell], values: Sequence[Any]) -> None:
    """Store the results of a control-flow equation back into the cells it carried."""
    for cell, value in zip(cells, values):
        cell.set(value)


def trace_body(fn: Callable[..., Any], arg_types: Sequence[Type], in_tree: tuple | None = None,
               scope: str = "body", allow_cell_writes: bool = True) -> TracedBody:
    """Trace ``fn`` in a child of the current builder, with fresh args of ``arg_types``."""
    builder = Builder(current_builder(), allow_cell_writes=allow_cell_writes, scope=scope)
    arg_vars = [Var(t) for t in arg_types]
    with builder:
        tracers = [Tracer(v, builder) for v in arg_vars]
        args = pytree.unflatten(in_tree, tracers) if in_tree is not None else tracers
        result = fn(*args)
    leaves, out_tree = pytree.flatten(result)
    for leaf in leaves:
        if isinstance(leaf, Tracer) and leaf.builder is not builder:
            builder.atom(leaf)  # capture (or reject) values returned from outer scopes
    return TracedBody(builder, arg_vars, leaves, out_tree)


def trace(fn: Callable[..., Any], *example_args: Any, name: str | None = None) -> Program:
    """Trace ``fn`` at the types of ``example_args`` into a verified Program.

    >>> import qdiff.numpy as qnp
    >>> p = trace(lambda x, y: qnp.sum(x * y), np.ones(3), np.ones(3))
    >>> print(p)  # doctest: +NORMALIZE_WHITESPACE
    program <lambda>(a: f64[3], b: f64[3]) -> f64[] {
      c: f64[3] = mul a b
      d: f64[] = reduce_sum[axes=(0,)] c
      return d
    }
    """
    program, _ = _trace(fn, example_args, name, closure=False)
    return program


def trace_closed(fn: Callable[..., Any], *example_args: Any,
                 name: str | None = None) -> tuple[Program, list[Tracer]]:
    """`trace`, where ``fn`` may read traced values of the traces enclosing this call (a
    directional derivative inside a gradient, say): each becomes an extra input after the
    arguments, in one last argument (`pytree.closure_arguments`), and they are returned, so
    the caller passes them when calling the program.

    >>> import qdiff.numpy as qnp
    >>> def outer(x):
    ...     inner, captured = trace_closed(lambda y: y * x, 1.0)
    ...     return inner(2.0, *pytree.closure_arguments(captured))
    >>> trace(outer, 1.0)(3.0).item()
    6.0
    """
    return _trace(fn, example_args, name, closure=True)


def _trace(fn: Callable[..., Any], example_args: tuple, name: str | None,
           closure: bool) -> tuple[Program, list[Tracer]]:
    leaves, in_tree = pytree.flatten(tuple(example_args))
    in_types = [leaf.type if isinstance(leaf, Tracer) else _arg_type(leaf) for leaf in leaves]
    builder = Builder(None, scope=name or getattr(fn, "__name__", "program"))
    builder.closure = closure
    arg_vars = [Var(t) for t in in_types]
    saved_stack = list(_builder_stack)
    _builder_stack.clear()  # a trace is independent of any trace it is started from
    try:
        with builder:
            tracers = [Tracer(v, builder) for v in arg_vars]
            result = fn(*pytree.unflatten(in_tree, tracers))
            out_leaves, out_tree = pytree.flatten(result)
            out_atoms = [builder.atom(x) for x in out_leaves]
    finally:
        _builder_stack[:] = saved_stack
    captured = [outer for outer, _ in builder.captures.values()]
    if captured:  # one extra trailing argument holding them
        arg_vars += [inner for _, inner in builder.captures.values()]
        in_tree = pytree.flatten((*example_args, *pytree.closure_arguments(captured)))[1]
    program = Program(tuple(arg_vars), tuple(builder.eqns), tuple(out_atoms),
                      name=builder.scope, in_tree=in_tree, out_tree=out_tree)
    return program.verify(), captured


def _arg_type(value: Any) -> Type:
    if isinstance(value, Type):
        return value  # tracing from types alone, e.g. trace(f, Tensor((3,), "float64"))
    return type_of_value(value)


def value_type(value: Any) -> Type:
    """The IR type of a traced or concrete value."""
    return value.type if isinstance(value, Tracer) else type_of_value(value)


def as_operand(value: Any, dtype: Any = None) -> Any:
    """A tracer as is (converted to ``dtype`` if given), anything else as a NumPy array.

    Concrete leaves become arrays so their dtype is fixed (``1.0`` becomes float64).
    """
    if isinstance(value, Tracer):
        if isinstance(value.type, Bit):
            value = bind(get_primitive("bit_to_int"), value)
        if dtype is not None and isinstance(value.type, Tensor) and value.dtype != np.dtype(dtype):
            return bind(get_primitive("convert"), value, dtype=np.dtype(dtype).name)
        return value
    return np.asarray(value, dtype=dtype)
