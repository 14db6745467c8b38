"""`qdiff.jit`: programs and their derivative programs compiled to Numba.

A `CompiledProgram` is a Program compiled once for one argument signature; `jit(f)` keeps
one per signature of ``f``. The host side checks and converts arguments, allocates nothing
the generated code does not (checkpoint buffers are sized statically and checked against
the memory available before the call), and maps errors raised in compiled code back to the
interpreter's. Equations without a compiled form raise `NotCompilableError` naming them,
or, with ``fallback="interpret"``, run in the interpreter between compiled segments (the
reason is logged).
"""

from __future__ import annotations

import functools
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..autodiff.arguments import as_closed_program, as_program
from ..autodiff.whole_program import rule_for
from ..ir import pytree
from ..ir.core import Eqn, Program, Var
from ..ir.errors import QdiffError
from ..ir.interpreter import (
    argument_leaves,
    coerce_argument,
    evaluate,
    register_executor,
    runner_for,
    to_user,
)
from ..ir.program_function import ProgramFunction
from ..ir.tracer import Tracer
from ..loops.memory import check_buffer_memory
from . import rules  # noqa: F401  (fills the rule table)
from .claimed import differentiable_form, primal_form, remember_compiled
from .codegen import Generated, generate
from .cuda.codegen import generate_cuda, require_cuda
from .errors import NotCompilableError
from .hybrid import HybridForm
from .kernel import Kernel
from .lowering import Options, compiles, unsupported
from .split import split_program

BACKENDS = ("numba", "numba-cuda", "numpy")
# how each compiling back end writes a program's module
_GENERATORS: dict[str, Callable[[Program, Options], Generated]] = {
    "numba": generate, "numba-cuda": generate_cuda}
FALLBACKS = ("error", "interpret")
log = logging.getLogger("qdiff.compiler")


def _check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise QdiffError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def _log_plan(name: str, reason: str, hybrid: HybridForm) -> None:
    log.debug("%s: compiled around its quantum part (%s): %s", name, reason,
              "; ".join(hybrid.plan))
    if hybrid.interpreted:
        log.info("%s: primitive(s) %s have no compiled form; they run in the interpreter",
                 name, ", ".join(hybrid.interpreted))


class HybridDerivative:
    """A derivative of a quantum program that does not compile whole: the simulator's
    derivative rule (the adjoint method over branches) runs the program's `HybridForm`,
    whose classical segments and their VJPs are compiled."""

    def __init__(self, transformed: Any, rule: Any, hybrid: HybridForm, arg_tree: Any):
        self.transformed, self.rule, self.hybrid = transformed, rule, hybrid
        self.arg_tree = arg_tree

    @property
    def source(self) -> str:
        """The plan as comments, then the generated source of the compiled segments."""
        return self.hybrid.source

    @property
    def plan(self) -> list[str]:
        """What runs where (see `CompiledProgram.plan`)."""
        return [*self.hybrid.plan, f"simulator: the {self.transformed.kind} (its rule, "
                "chain-ruled through the compiled segments' VJPs)"]

    def call_leaves(self, leaves: Sequence[Any]) -> Any:
        """The derivative at the arguments whose leaves are ``leaves``."""
        args = pytree.unflatten(self.arg_tree, list(leaves))
        return self.transformed.whole(self.rule, self.hybrid.program, args)


class CompiledProgram:
    """``program`` compiled for ``backend``; call it like the program.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.sum(qnp.exp(x)), np.zeros(3))
    >>> compiled = CompiledProgram(p)
    >>> float(compiled(np.zeros(3)))
    3.0
    >>> "def kernel" in compiled.source
    True
    """

    def __init__(self, program: Program, backend: str = "numba", parallel: bool = False,
                 fallback: str = "error"):
        _check_choice("backend", backend, BACKENDS)
        _check_choice("fallback", fallback, FALLBACKS)
        self.program, self.backend = program, backend
        self.options = Options(parallel=parallel)
        if backend == "numba-cuda":
            require_cuda()
        self._generator = _GENERATORS.get(backend, generate)
        self._whole: Callable[..., Any] | None = None
        self._steps: list[Kernel | Eqn] = []
        # a claimed program that does not compile whole: its classical code compiled
        # around the runner's part (`hybrid.py`)
        self.hybrid: HybridForm | None = None
        self._buffer_checks = [
            (e.params["slots"], e.inputs[0].type.size * e.inputs[0].type.np_dtype.itemsize)
            for e in program.all_eqns() if e.primitive.name == "checkpoint_buffer"]
        missing = unsupported(program)
        self._claimed = runner_for(program) is not None  # e.g. a quantum program
        if backend == "numpy":
            self._whole = lambda values: evaluate(program, *values)
        elif self._claimed:
            # a higher layer may know a compiled form (`claimed.py`); its kernels (the
            # simulator's) are CPU code
            prepared = (primal_form(program) if backend == "numba" else
                        f"it compiles for backend='numba' only, not {backend!r}")
            if isinstance(prepared, Program):
                self._claimed = False
                self._steps = [Kernel(prepared, self.options)]
                remember_compiled(program, "primal", self)  # plain calls take it too
            elif backend == "numba":
                # the quantum part runs on the simulator, the classical code around it
                # compiled (not a fallback: the quantum part was never going to compile)
                self.hybrid = HybridForm(program, self.options, fallback)
                _log_plan(program.name, prepared, self.hybrid)
                hybrid = self.hybrid.program
                self._whole = lambda values: hybrid(*values)
                remember_compiled(program, "primal", self)
            else:
                self._plan_fallback(missing, fallback, prepared)
        elif missing:
            self._plan_fallback(missing, fallback)
        else:
            self._steps = [Kernel(program, self.options, self._generator)]

    def _plan_fallback(self, missing: list[str], fallback: str, reason: str = "") -> None:
        program = self.program
        claimed = self._claimed
        what = ((reason or "its runner executes it as a whole") if claimed else
                f"primitive(s) {', '.join(missing)} have no compiled form")
        if fallback == "error":
            where = "it on its runner" if claimed else "those parts in the interpreter"
            raise NotCompilableError(
                f"cannot compile program {program.name!r}: {what}; pass fallback='interpret' "
                f"to run {where}")
        if claimed:
            log.info("program %r runs on its runner, not compiled: %s", program.name, what)
            self._whole = lambda values: program(*values)
            return
        log.info("program %r: %s; they run in the interpreter", program.name, what)
        self._steps = [Kernel(p, self.options, self._generator) if isinstance(p, Program) else p
                       for p in split_program(program, compiles)]

    @property
    def source(self) -> str:
        """The generated Python source (every compiled segment; for a program compiled
        around its quantum part, its `plan` first, as comments)."""
        if self.hybrid is not None:
            return self.hybrid.source
        return "\n".join(s.source for s in self._steps if isinstance(s, Kernel))

    @property
    def plan(self) -> list[str]:
        """What runs where: one line per compiled segment and per equation that runs
        elsewhere (on the simulator, or in the interpreter)."""
        if self.hybrid is not None:
            return list(self.hybrid.plan)
        if self._whole is not None:
            return [f"{'simulator' if self._claimed else 'interpreted'}: {self.program.name}"]
        return [f"compiled: {s.program.name} ({len(s.program.eqns)} equations)"
                if isinstance(s, Kernel) else f"interpreted: {s.primitive.name}"
                for s in self._steps]

    def __call__(self, *args: Any) -> Any:
        leaves = argument_leaves(self.program, args)
        if any(isinstance(leaf, Tracer) for leaf in leaves):
            return self.program(*args)  # inside a trace: record the program, not a call
        return self.call_leaves(
            [coerce_argument(self.program, i, leaf) for i, leaf in enumerate(leaves)])

    def call_leaves(self, values: Sequence[Any]) -> Any:
        """Run on flat arguments of the program's shapes and dtypes; return the outputs
        structured as the program's."""
        program = self.program
        if self._whole is not None:
            if self._claimed and self.backend != "numpy":
                return self._whole(pytree.unflatten(program.in_tree, list(values))
                                   if program.in_tree is not None else values)
            outputs = [to_user(v) for v in self._whole(values)]
        else:
            outputs = self.run_flat(values)
        if program.out_tree is None:
            return outputs[0] if len(outputs) == 1 else tuple(outputs)
        return pytree.unflatten(program.out_tree, outputs)

    def run_flat(self, values: Sequence[Any]) -> list[Any]:
        """The flat outputs for flat argument values (a classical program)."""
        for slots, carry_bytes in self._buffer_checks:
            check_buffer_memory(slots, carry_bytes)
        if len(self._steps) == 1:
            return self._steps[0](values)
        env: dict[Var, Any] = dict(zip(self.program.inputs, values))
        for step in self._steps:
            if isinstance(step, Kernel):
                outs = step([env[v] for v in step.program.inputs])
                env.update(zip(step.program.outputs, outs))
            else:
                read = [a.value if not isinstance(a, Var) else env[a] for a in step.inputs]
                result = step.primitive.impl("numpy")(*read, **step.params)
                env.update(zip(step.outputs, result if step.primitive.multiple_results
                               else (result,)))
        return [to_user(a.value if not isinstance(a, Var) else env[a])
                for a in self.program.outputs]


def _leaf_signature(leaf: Any) -> Any:
    """What of an argument decides the program traced for it: an array's shape and dtype,
    a scalar's type (its dtype); cheaper than the IR type, on every call."""
    if isinstance(leaf, np.ndarray):
        return leaf.shape, leaf.dtype.char
    return type(leaf)


class JittedFunction:
    """A function compiled per argument signature (see `jit`)."""

    def __init__(self, f: Any, backend: str, parallel: bool, fallback: str):
        _check_choice("backend", backend, BACKENDS)
        _check_choice("fallback", fallback, FALLBACKS)
        self.f = f if isinstance(f, (Program, ProgramFunction)) else ProgramFunction(f)
        self.backend, self.parallel, self.fallback = backend, parallel, fallback
        self._by_signature: dict[Any, CompiledProgram | str] = {}
        self.last: CompiledProgram | HybridDerivative | None = None
        self.__name__ = getattr(self.f, "name", None) or getattr(self.f, "__name__", "f")

    def compiled(self, *args: Any) -> CompiledProgram | HybridDerivative:
        """The `CompiledProgram` for arguments shaped like ``args`` (compiled once; a
        `HybridDerivative` for a derivative computed on the simulator around compiled
        classical code)."""
        leaves, tree = pytree.flatten(tuple(args))
        compiled = self._compiled_for(args, leaves, tree)
        if isinstance(compiled, str):
            raise self._not_compilable(compiled)
        return compiled

    def _compiled_for(self, args: tuple, leaves: list[Any], tree: Any
                      ) -> CompiledProgram | HybridDerivative | str:
        """The compiled program for this argument signature, or why it runs uncompiled
        (decided once per signature: later calls pay one dictionary lookup)."""
        key = (tree, *map(_leaf_signature, leaves))
        compiled = self._by_signature.get(key)
        if compiled is None:
            compiled = self._by_signature[key] = self._compile(args)
        if not isinstance(compiled, str):
            self.last = compiled
        return compiled

    def _compile(self, args: tuple) -> CompiledProgram | HybridDerivative | str:
        on_jets = self._evaluated_on_jets(args)
        if on_jets is not None:
            return on_jets
        if self._runs_on_simulator(args):
            return self._compiled_derivative(args)
        program = self.f if isinstance(self.f, Program) else self.f.trace(*args)
        return CompiledProgram(program, self.backend, self.parallel, self.fallback)

    def _compiled_derivative(self, args: tuple) -> CompiledProgram | HybridDerivative | str:
        """The compiled derivative of a quantum program (a program a runner claims) from
        its differentiable form (`claimed.differentiable_form`), or why there is none."""
        program, captured = as_closed_program(self.f.source, args)
        build = getattr(self.f, "compiled_build", None)
        form = ("it reads traced values of an enclosing transformation" if captured else
                "its method and options are the simulator's" if build is None else
                f"it compiles for backend='numba' only, not {self.backend!r}"
                if self.backend != "numba" else differentiable_form(program))
        if isinstance(form, Program):
            try:
                form = build(form)
            except QdiffError as error:  # e.g. a Hessian, which needs forward mode
                form = str(error)
        if isinstance(form, Program):
            compiled = CompiledProgram(form, self.backend, self.parallel, self.fallback)
            # the simulator's calls take it from now on
            remember_compiled(program, (self.f.kind, getattr(self.f, "argnums", None)), compiled)
            return compiled
        if not captured and build is not None and self.backend == "numba":
            # the derivative on the simulator, the classical code around it compiled
            hybrid = HybridForm(program, Options(parallel=self.parallel), self.fallback)
            _log_plan(f"{self.f.kind} of {program.name}", form, hybrid)
            return HybridDerivative(self.f, rule_for(program), hybrid,
                                    pytree.flatten(tuple(args))[1])
        return f"it differentiates a quantum program, whose derivative runs on the simulator " \
               f"({form})"

    def _not_compilable(self, reason: str) -> NotCompilableError:
        return NotCompilableError(f"cannot compile {self.__name__}: {reason}; pass "
                                  "fallback='interpret' to run it uncompiled")

    @property
    def plan(self) -> list[str]:
        """What runs where for the signature compiled last (`CompiledProgram.plan`)."""
        return self._last_compiled().plan

    def _last_compiled(self) -> CompiledProgram | HybridDerivative:
        if self.last is None:
            raise QdiffError(f"{self.__name__} has not been compiled yet: call it (or "
                             ".compiled(*args)) first")
        return self.last

    @property
    def source(self) -> str:
        """The generated source of the signature compiled last."""
        return self._last_compiled().source

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self.f, ProgramFunction):
            args = self.f.bind_arguments(args, kwargs)
        elif kwargs:
            raise QdiffError(f"{self.__name__} takes positional arguments only")
        leaves, tree = pytree.flatten(tuple(args))
        if any(isinstance(leaf, Tracer) for leaf in leaves):
            return self.f(*args)
        compiled = self._compiled_for(args, leaves, tree)
        if not isinstance(compiled, str):
            return compiled.call_leaves(leaves)
        # a derivative of a quantum program without a compiled form runs on the simulator
        if self.fallback != "interpret":
            raise self._not_compilable(compiled)
        log.info("%s runs uncompiled: %s", self.__name__, compiled)
        return self.f(*args)

    def _runs_on_simulator(self, args: tuple) -> bool:
        source = getattr(self.f, "source", None)  # what a derivative differentiates
        if source is None or getattr(self.f, "whole", None) is None:
            return False
        return rule_for(as_program(source, args)) is not None

    def _evaluated_on_jets(self, args: tuple) -> str | None:
        """Why a derivative of a quantum program's derivative (a Hessian, ``grad(grad(f))``)
        runs uncompiled: the simulator evaluates it by forward mode on jets, which has no
        compiled form; None for anything else."""
        jet_chain = getattr(self.f, "jet_chain", None)
        chain = None if jet_chain is None else jet_chain(args)
        if chain is None:
            return None
        return (f"the {self.f.kind} of a {chain[1].name} program is evaluated on the "
                "simulator by forward mode on jets (exact), which has no compiled form")

    def __repr__(self) -> str:
        return f"<qdiff.jit {self.__name__} backend={self.backend!r}>"


_COMPILED: dict[str, weakref.WeakKeyDictionary[Program, CompiledProgram]] = {
    backend: weakref.WeakKeyDictionary() for backend in _GENERATORS}


def run_compiled(program: Program, values: list[Any], backend: str = "numba") -> list[Any]:
    """Run a classical program compiled (once per Program and back end):
    ``backend="numba"`` (or ``"numba-cuda"``) on any program call, or every call inside
    ``default_backend("numba")``."""
    compiled = _COMPILED[backend].get(program)
    if compiled is None:
        compiled = _COMPILED[backend][program] = CompiledProgram(program, backend)
    return compiled.run_flat(values)


for _backend in _GENERATORS:
    register_executor(_backend, functools.partial(run_compiled, backend=_backend))


def jit(f: Any, backend: str = "numba", parallel: bool = False,
        fallback: str = "error") -> JittedFunction:
    """Compile ``f`` (a function, `qdiff.program`, derivative such as ``qdiff.grad(g)``, or
    Program) to machine code with Numba, once per argument signature.

    ``backend``: "numba" (CPU), "numba-cuda" (each parallel loop nest a CUDA kernel, the
    rest host code launching them; needs a GPU or ``NUMBA_ENABLE_CUDASIM=1``) or "numpy"
    (the reference interpreter). ``parallel=True`` runs the outer loop of each CPU loop
    nest on all cores. ``fallback="interpret"`` runs the
    equations the compiler cannot compile in the interpreter instead of raising.

    >>> import qdiff, qdiff.numpy as qnp
    >>> step = lambda i, x: qnp.sin(x) * 0.9 + 0.1
    >>> f = qdiff.jit(qdiff.grad(lambda x: qdiff.fori_loop(0, 100, step, x)))
    >>> reference = qdiff.grad(lambda x: qdiff.fori_loop(0, 100, step, x))
    >>> abs(float(f(0.5)) - float(reference(0.5))) < 1e-12
    True
    """
    return JittedFunction(f, backend, parallel, fallback)

