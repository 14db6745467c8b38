"""Host loops whose kernels each fit one thread block, run as one kernel (CUDA target).

The host function keeps a loop of the program on the host and launches its body's kernels
at every step: the ADBench D-LSTM's 1023 steps launched 9 210 kernels per value call and
26 600 per gradient call, each costing the host far more than its kernel ran. Where every
kernel a loop launches runs in one block (its thread count, known from the shapes when the
code is written, at most `MAX_THREADS`; a kernel of several blocks counts where its threads
know themselves by ``cuda.grid(1)`` alone) and every other statement of the loop can run on
the device, the whole loop, nested loops included, becomes ONE kernel of one block that
runs the loop itself:

- each kernel of the body is called as a device function (its text, its shared arrays
  sized for the whole block: lanes beyond its own threads are inert, as in its launch);
  ``cuda.syncthreads()`` follows each call, so that the next reads what it wrote (a barrier
  after every call, not only where a later call reads what it wrote: the views make
  which arrays share memory a runtime matter, and a barrier of one block costs little);
- scalar statements (indices, slice starts) run in every thread alike; a slice start the
  loop bounds do not prove in range marks an error code that the host raises after the
  launch (`device.raise_marked`);
- the device arrays the body allocates are allocated once, before the launch, and so are
  the views of them and of arrays the loop does not reassign; views taken with the loop's
  indices are taken in the kernel;
- each carry (an array a loop's step reassigns) has an array of its own, made before the
  launch, into which its new value is copied at the end of each step (by all threads,
  between barriers): the body's arrays are written again at the next step;
- arrays filled or copied at each step (``rtc.full``, ``rtc.copy``, a checkpoint row
  written ``x_d[i] = v_d``) are filled or copied by the block.

- branches and ``while`` loops whose tests are scalar take the same way in every thread;
  ``break`` and a ``while`` loop's step limit (its error marked for the host) likewise.

Any other statement (a download, a host computation on arrays, a launch of several
blocks) keeps the loop on the host, as before. The decision is made on the
host function's finished text (`fuse_block_loops`), which the kernels' launches describe
fully: their grids and arguments.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .duplicates import deduplicated
from .kernels import free_names

# threads of the largest block a fused loop may run in (CUDA's limit per block)
MAX_THREADS = 1024
# a scalar statement may call these (each takes and gives scalars, in Python and a kernel)
_SCALAR_CALLS = {"min", "max", "abs", "int", "float", "bool", "np.minimum", "np.maximum",
                 "np.int64", "np.int32", "np.float64", "np.float32"}
_SHARED = re.compile(r"cuda\.shared\.array\((\d+),")
_LAUNCH = re.compile(r"rtc\.launch\((\w+), ")
_BLOCK_LEVEL = re.compile(r"cuda\.(shared|syncthreads|threadIdx|blockIdx|blockDim|gridDim)\b")


class _NotFusable(Exception):
    """A statement of the loop that cannot run in the kernel: the loop stays on the host."""


@dataclass
class _Kernel:
    """A kernel of the module: its parameters and body lines (indented once)."""

    name: str
    params: list[str]
    body: list[str]

    @property
    def barriers(self) -> bool:
        return any("cuda.syncthreads()" in line for line in self.body)

    @property
    def grid_only(self) -> bool:
        """Whether its threads know themselves by ``cuda.grid(1)`` alone (not by their block
        or lane, nor sharing memory): launched in several blocks, it runs the same in one
        block of as many threads."""
        return not any(_BLOCK_LEVEL.search(line) for line in self.body)

    def device_function(self, name: str, block: int, threads: int) -> str:
        """The kernel as a device function called by every thread of a block of ``block``
        threads, launched before with ``threads``: its shared arrays take a lane per thread
        of the block (its guards leave the lanes beyond ``threads`` inert)."""
        body = [_SHARED.sub(f"cuda.shared.array({block},", line) for line in self.body]
        return f"@cuda.jit(device=True)\ndef {name}({', '.join(self.params)}):\n" + \
            "\n".join(body)


def _parse_kernel(text: str) -> _Kernel:
    lines = text.split("\n")
    header = next(k for k, line in enumerate(lines) if line.startswith("def "))
    function = ast.parse("\n".join(lines[header:])).body[0]
    assert isinstance(function, ast.FunctionDef)
    return _Kernel(function.name, [a.arg for a in function.args.args], lines[header + 1:])


@dataclass
class _Interval:
    lo: int
    hi: int


@dataclass
class _Region:
    """What writing one loop as a kernel collected."""

    hoisted: list[str] = field(default_factory=list)   # host lines before the launch
    body: list[str] = field(default_factory=list)      # the kernel's lines (loop and all)
    calls: dict[tuple[str, int], str] = field(default_factory=dict)  # (kernel, threads)
    threads: int = 1
    marks: bool = False      # a slice start checked in the kernel: an error mark
    counter: int = 0


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return None


def _device(name: str) -> bool:
    return name.endswith("_d")


def _blocks(lines: Sequence[str], start: int) -> int:
    """The index just past the block whose header is ``lines[start]``."""
    depth = _indent(lines[start])
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > depth):
        end += 1
    return end


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


class _Writer:
    """Writes one host loop (``lines``, its header first) as a one-block kernel, or raises
    `_NotFusable`."""

    def __init__(self, lines: list[str], kernels: dict[str, _Kernel], ranks: dict[str, int],
                 scalars: set[str], outside_reads: set[str], defined: set[str], key: int):
        self.lines, self.kernels, self.ranks = lines, kernels, dict(ranks)
        self.defined = defined  # names the host assigns before the loop
        self.scalars = set(scalars)
        self.host_scalars = frozenset(scalars)
        self.outside_reads = outside_reads
        self.key = key
        self.region = _Region()
        self.statements = [_statement(line) for line in lines]
        self.assigned = self._assigned()
        self.carries = self._carries()
        self.buffered: set[str] = set()     # carries whose own array is made
        self.in_kernel: set[str] = set()    # names bound in the kernel (not on the host)
        self.hoisted: set[str] = set()      # names assigned before the launch
        self.intervals: dict[str, _Interval] = {}
        self.roots: dict[str, str] = {}     # views and aliases made in the loop -> base
        # arrays the host views or copies before the launch (`rtc.view`, `rtc.copy`)
        self.viewed = {node.args[0].id for statement in self.statements
                       for node in ast.walk(statement)
                       if _call_name(node) in ("rtc.view", "rtc.copy") and node.args
                       and isinstance(node.args[0], ast.Name)}

    # ------------------------------------------------------------------ analysis
    def _assigned(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for statement in self.statements:
            targets = statement.targets if isinstance(statement, ast.Assign) else (
                [statement.target] if isinstance(statement, (ast.For, ast.AugAssign)) else [])
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        counts[node.id] = counts.get(node.id, 0) + 1
        return counts

    def _carries(self) -> set[str]:
        """The device arrays the loops' steps reassign (their carries: the loop rules'
        ``c1_d, c2_d, = y_d, z_d,``, `control_flow.assign`)."""
        found = set()
        for statement in self.statements:
            if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Tuple):
                found |= {n.id for n in statement.targets[0].elts
                          if isinstance(n, ast.Name) and _device(n.id)}
        return found

    def available(self, name: str) -> bool:
        """Whether ``name`` is bound on the host, before the launch, to the array it is bound
        to at every step: the loop does not reassign it, or its assignment goes before the
        launch, or it is a carry (its own array)."""
        return name not in self.assigned or name in self.hoisted or name in self.buffered

    def hoist(self, name: str, text: str) -> list[str]:
        """``text``, assigning ``name``, goes before the launch: no kernel lines."""
        self.region.hoisted.append(text)
        self.hoisted.add(name)
        return []

    def root(self, name: str) -> str:
        """The array whose memory ``name`` views (itself where it is no view)."""
        return self.roots.get(name, name)

    def rank(self, name: str) -> int:
        rank = self.ranks.get(name, self.ranks.get(name[:-2]) if _device(name) else None)
        if rank is None and _device(name) and name[:-2] in self.host_scalars:
            rank = 1  # a scalar kept on the device: an array of one element
        if rank is None:
            raise _NotFusable(f"the rank of {name} is not known")
        return rank

    def fresh(self, prefix: str) -> str:
        self.region.counter += 1
        return f"bl{self.key}_{prefix}{self.region.counter}"

    # ------------------------------------------------------------------ writing
    def write(self) -> _Region:
        first = _indent(self.lines[0])
        read_first, seen = set(), set()  # names a statement reads before any assigns them
        for statement in self.statements:
            nodes = [n for n in ast.walk(statement) if isinstance(n, ast.Name)]
            read_first |= {n.id for n in nodes if isinstance(n.ctx, ast.Load)} - seen
            seen |= {n.id for n in nodes}
        for carry in sorted(self.carries):
            if self._defined_before(carry):
                self.region.hoisted.append(f"{carry} = rtc.copy({carry})")
                self.buffered.add(carry)
            elif carry in read_first:
                raise _NotFusable(f"{carry} is read before the loop assigns it")
        for line, statement in zip(self.lines, self.statements):
            indent = "    " * ((_indent(line) - first) // 4 + 1)
            for text in self.statement(statement, line.strip()):
                self.region.body.append(indent + text)
        if not self.region.calls:
            raise _NotFusable("no kernel: scalar code runs on the host")
        for name in self.in_kernel | {n for n in self.assigned if not _device(n)}:
            if name in self.outside_reads and name not in self.buffered:
                raise _NotFusable(f"{name} is read on the host after the loop")
        return self.region

    def _defined_before(self, carry: str) -> bool:
        """Whether ``carry`` comes into the loop with a value: the host assigned it before,
        and its first assignment in the loop is a step's update, not its inner loop's
        start."""
        if carry not in self.defined:
            return False  # a branch's result, say: its array is made at its first value
        for statement in self.statements:
            if isinstance(statement, ast.Assign):
                target = statement.targets[0]
                if isinstance(target, ast.Name) and target.id == carry:
                    return False
                if isinstance(target, ast.Tuple) and carry in _names(target):
                    return True
        return True

    def statement(self, node: ast.stmt, text: str) -> list[str]:
        """The kernel lines of one host statement (none where it goes before the launch)."""
        if isinstance(node, ast.For):
            return self.loop(node, text)
        if isinstance(node, (ast.While, ast.If)):
            # the same test in every thread: the block takes one way
            self._check_scalar(node.test, text)
            return [text]
        if isinstance(node, (ast.Break, ast.Continue)) or text == "else:":
            return [text]
        if isinstance(node, ast.Raise) and _call_name(node.exc) == "CompiledCodeError":
            (code,) = node.exc.args
            return self.mark(ast.literal_eval(code))
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) \
                and not _device(node.target.id):
            self._check_scalar(node.target, text)
            self._check_scalar(node.value, text)
            self.in_kernel.add(node.target.id)
            return [text]
        if isinstance(node, ast.Expr) and _call_name(node.value) == "rtc.launch":
            return self.launch(node.value)
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            raise _NotFusable(text)
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Tuple):
            return self.carry_update(target, value, text)
        if isinstance(target, ast.Subscript):
            return self.copy_into(target, value)
        if not isinstance(target, ast.Name):
            raise _NotFusable(text)
        name = target.id
        if _device(name):
            return self.device_assignment(name, value, text)
        return self.scalar(name, value, text)

    def loop(self, node: ast.For, text: str) -> list[str]:
        call = node.iter
        if not (isinstance(node.target, ast.Name) and _call_name(call) == "range"
                and not node.orelse):
            raise _NotFusable(text)
        for arg in call.args:
            self._check_scalar(arg, text)
        variable = node.target.id
        self.scalars.add(variable)
        self.in_kernel.add(variable)
        bounds = [self.interval(arg) for arg in call.args]
        if len(call.args) == 1:
            bounds.insert(0, _Interval(0, 0))
        if len(bounds) == 2 and None not in bounds:
            self.intervals[variable] = _Interval(bounds[0].lo, bounds[1].hi - 1)
        return [text]

    def launch(self, call: ast.Call) -> list[str]:
        kernel, blocks, threads, args = call.args
        if not (isinstance(kernel, ast.Name) and isinstance(blocks, ast.Constant)
                and isinstance(threads, ast.Constant) and isinstance(args, ast.Tuple)
                and kernel.id in self.kernels):
            raise _NotFusable(ast.unparse(call))
        definition = self.kernels[kernel.id]
        count = blocks.value * threads.value
        if blocks.value > 1 and not definition.grid_only:
            raise _NotFusable(f"{kernel.id}: {blocks.value} blocks working together")
        sizes = {int(s) for line in definition.body for s in _SHARED.findall(line)}
        if count > MAX_THREADS or not sizes <= {count}:
            raise _NotFusable(f"{kernel.id}: {count} threads, shared arrays {sizes}")
        names = [ast.unparse(a) for a in args.elts]
        for name in names:
            self._check_readable(name)
        self.region.threads = max(self.region.threads, count)
        function = self.region.calls.setdefault((kernel.id, count), f"{kernel.id}_in_block")
        text = f"{function}({', '.join(names)})"
        if definition.barriers:
            # every thread takes part in its barriers; the lanes beyond its own threads are
            # inert where its work is guarded by the thread's index (block folds, scans),
            # not where a lane strides over its work (a final fold's ``while``)
            if any(line.lstrip().startswith("while ") for line in definition.body):
                raise _NotFusable(f"{kernel.id}: lanes stride over its work")
            return [text, "cuda.syncthreads()"]
        return [f"if cuda.threadIdx.x < {count}:", f"    {text}", "cuda.syncthreads()"]

    def _check_readable(self, name: str) -> None:
        if _device(name) or name in self.scalars:
            return
        raise _NotFusable(f"{name}: neither a device array nor a known scalar")

    def device_assignment(self, name: str, value: ast.expr, text: str) -> list[str]:
        call = _call_name(value)
        if name in self.carries:
            if not isinstance(value, ast.Name):
                raise _NotFusable(text)
            return self.carry_copy(name, value.id)
        if self.assigned.get(name, 0) > 1:
            raise _NotFusable(f"{name} is assigned more than once")
        viewed = value.args[0] if call == "rtc.view" else (
            value.value if isinstance(value, ast.Subscript) else value)
        if isinstance(viewed, ast.Name):  # a view or alias shares its base's memory
            self.roots[name] = self.root(viewed.id)
        if call == "rtc.empty":
            self.ranks[name] = len(ast.literal_eval(value.args[0]))
            return self.hoist(name, text)
        if call == "rtc.full":
            shape, fill, dtype = value.args
            self.ranks[name] = len(ast.literal_eval(shape))
            self._check_scalar(fill, text)
            self.hoist(name, f"{name} = rtc.empty({ast.unparse(shape)}, {ast.unparse(dtype)})")
            return self.elementwise(name, None, ast.unparse(fill))
        if call == "rtc.copy" and isinstance(value.args[0], ast.Name) \
                and self.available(value.args[0].id):
            source = value.args[0].id
            self.ranks[name] = self.rank(source)
            self.hoist(name, text)
            return self.elementwise(name, source, None)
        if call == "rtc.view" and isinstance(value.args[0], ast.Name) \
                and self.available(value.args[0].id):
            self.ranks[name] = len(ast.literal_eval(value.args[1]))
            return self.hoist(name, text)
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) \
                and _device(value.value.id):
            base = value.value.id
            index = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
            self.ranks[name] = self.rank(base) - sum(not isinstance(i, ast.Slice)
                                                     for i in index)
            if all(self.available(n) for n in _names(value)) and (
                    name in self.outside_reads or name in self.viewed):
                return self.hoist(name, text)
            # taken in the kernel (a few integer operations a step) rather than passed: a
            # kernel's parameters take room (each array 7 to 9 words)
            for n in _names(value.slice):
                self._check_readable(n)
            self.in_kernel.add(name)
            return [text]
        if isinstance(value, ast.Name) and _device(value.id):
            self.ranks[name] = self.rank(value.id)
            if self.available(value.id):
                return self.hoist(name, text)
            self.in_kernel.add(name)
            return [text]
        raise _NotFusable(text)

    def scalar(self, name: str, value: ast.expr, text: str) -> list[str]:
        self.in_kernel.add(name)
        self.scalars.add(name)
        if _call_name(value) == "rt.start_index":
            return self.start_index(name, value)
        if _call_name(value) == "rtc.download_scalar" and isinstance(value.args[0], ast.Name) \
                and _device(value.args[0].id):
            # a scalar the host tested (a while loop's): read by every thread, after the
            # barrier that followed the call writing it
            return [f"{name} = {value.args[0].id}[0]"]
        self._check_scalar(value, text)
        interval = self.interval(value)
        if interval is not None and self.assigned.get(name) == 1:
            self.intervals[name] = interval
        return [text]

    def _check_scalar(self, value: ast.expr, text: str) -> None:
        """Refuse ``value`` unless it is scalar code of known scalars (literals, arithmetic,
        comparisons, `_SCALAR_CALLS`)."""
        if isinstance(value, ast.Call):
            if _call_name(value) not in _SCALAR_CALLS or value.keywords:
                raise _NotFusable(text)
            children = value.args
        elif isinstance(value, ast.Name):
            if value.id not in self.scalars:
                raise _NotFusable(f"{value.id} in {text}: not a known scalar")
            return
        elif isinstance(value, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare,
                                ast.BoolOp, ast.IfExp)):
            children = list(ast.iter_child_nodes(value))
        elif isinstance(value, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop)):
            return
        else:
            raise _NotFusable(text)
        for child in children:
            self._check_scalar(child, text)

    def interval(self, node: ast.expr) -> _Interval | None:
        """The values ``node`` (a scalar expression) takes at most, where the loops' bounds
        tell them; None where they do not."""
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return _Interval(node.value, node.value)
        if isinstance(node, ast.Name):
            return self.intervals.get(node.id)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            a, b = self.interval(node.left), self.interval(node.right)
            if a is None or b is None:
                return None
            if isinstance(node.op, ast.Add):
                return _Interval(a.lo + b.lo, a.hi + b.hi)
            return _Interval(a.lo - b.hi, a.hi - b.lo)
        name = _call_name(node)
        if name in ("min", "max", "np.minimum", "np.maximum") and len(node.args) == 2:
            a, b = (self.interval(arg) for arg in node.args)
            if a is None or b is None:
                return None
            pick = min if name in ("min", "np.minimum") else max
            return _Interval(pick(a.lo, b.lo), pick(a.hi, b.hi))
        return None

    def start_index(self, name: str, call: ast.Call) -> list[str]:
        """``rt.start_index(start, dim, size, code)`` in the kernel: checked when the code is
        written where the loops' bounds prove it in range, else marked for the host."""
        start, dim, size, code = call.args
        self._check_scalar(start, ast.unparse(call))
        dim, size, code = (ast.literal_eval(a) for a in (dim, size, code))
        known = self.interval(start)
        text = ast.unparse(start)
        shift = 0 if known is None or known.lo >= 0 else dim  # negative: from the end
        if known is not None and (known.lo >= 0 or known.hi < 0) \
                and known.lo + shift >= 0 and known.hi + shift <= dim - size:
            # in range at every step, checked here
            self.intervals[name] = _Interval(known.lo + shift, known.hi + shift)
            return [f"{name} = {text} + {shift}" if shift else f"{name} = {text}"]
        return [f"{name} = rtc.checked_start({text}, {dim}, {size})", f"if {name} < 0:",
                *("    " + line for line in self.mark(code))]

    def mark(self, code: int) -> list[str]:
        """Kernel lines ending the kernel with error ``code`` marked for the host (every
        thread meets them alike: the test before them reads scalars only)."""
        self.region.marks = True
        return [f"{self.mark_name}[0] = {code + 1}", "return"]

    @property
    def mark_name(self) -> str:
        return f"bl{self.key}_mark_d"

    def _own_array(self, carry: str, source: str, reason: str) -> None:
        """Give ``carry`` an array of its own, copied from ``source`` before the kernel
        (the kernel copies into it in place, so it must not alias an input)."""
        if carry in self.buffered:
            return
        if not self.available(source):
            raise _NotFusable(f"{carry}: {reason}")
        self.region.hoisted.append(f"{carry} = rtc.copy({source})")
        self.buffered.add(carry)
        self.ranks[carry] = self.rank(source)

    def carry_copy(self, carry: str, source: str) -> list[str]:
        self._own_array(carry, source, "its first value is made in the kernel")
        self._check_readable(source)
        return ["cuda.syncthreads()", *self.elementwise(carry, source, None),
                "cuda.syncthreads()"]

    def carry_update(self, target: ast.Tuple, value: ast.expr, text: str) -> list[str]:
        if not (isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts)
                and all(isinstance(n, ast.Name) for n in (*target.elts, *value.elts))):
            raise _NotFusable(text)
        pairs = [(t.id, v.id) for t, v in zip(target.elts, value.elts)]
        written = {t for t, v in pairs if t != v}
        if any(self.root(v) in written and self.root(v) != t for t, v in pairs):
            # copied one after the other, a carry would take another's new value
            raise _NotFusable(f"{text}: a carry takes another's value")
        lines, scalars = ["cuda.syncthreads()"], []
        for carry, source in pairs:
            if carry == source:
                continue
            if _device(carry):
                self._own_array(carry, source, "it has no array of its own")
                lines += self.elementwise(carry, source, None)
            else:
                self._check_scalar(ast.Name(source), text)
                self.in_kernel.add(carry)
                scalars.append((carry, source))
        if scalars:
            lines.append(f"{', '.join(t for t, _ in scalars)}, = "
                         f"{', '.join(v for _, v in scalars)},")
        return [*lines, "cuda.syncthreads()"]

    def copy_into(self, target: ast.Subscript, value: ast.expr) -> list[str]:
        """``x_d[...] = v_d`` (a checkpoint row): a view of the target taken in the kernel,
        copied into by the block."""
        if not (isinstance(target.value, ast.Name) and _device(target.value.id)
                and isinstance(value, ast.Name) and _device(value.id)):
            raise _NotFusable(ast.unparse(target))
        for name in _names(target.slice):
            self._check_readable(name)
        view = self.fresh("v")
        self.ranks[view] = self.rank(value.id)
        return ["cuda.syncthreads()", f"{view} = {ast.unparse(target)}",
                *self.elementwise(view, value.id, None), "cuda.syncthreads()"]

    def elementwise(self, target: str, source: str | None, fill: str | None) -> list[str]:
        """Block lines setting every element of ``target`` to the same element of ``source``
        or to ``fill``, then a barrier."""
        rank, flat = self.rank(target), self.fresh("k")
        lines = [f"for {flat} in range(cuda.threadIdx.x, {target}.size, "
                 f"{self.region_threads_name}):"]
        index, rest = [], flat
        for axis in reversed(range(rank)):
            if axis == 0:
                index.insert(0, rest)
                break
            digit = self.fresh("j")
            lines.append(f"    {digit} = {rest} % {target}.shape[{axis}]")
            if axis > 0:
                quotient = self.fresh("q")
                lines.append(f"    {quotient} = {rest} // {target}.shape[{axis}]")
                rest = quotient
            index.insert(0, digit)
        at = ", ".join(index) if rank else "0"
        lines.append(f"    {target}[{at}] = {fill if source is None else f'{source}[{at}]'}")
        return [*lines, "cuda.syncthreads()"]

    @property
    def region_threads_name(self) -> str:
        # the block's size is known only once every launch is seen: filled in at the end
        return f"BL{self.key}_THREADS"


@functools.lru_cache(maxsize=1 << 16)
def _statement(line: str) -> ast.stmt:
    """A host line parsed as a statement of its own (a loop tries each line many times)."""
    return ast.parse(_as_statement(line)).body[0]


@functools.lru_cache(maxsize=1 << 16)
def _names_of(line: str, context: type) -> frozenset[str]:
    """The names a host line reads (``ast.Load``) or assigns (``ast.Store``)."""
    return frozenset(n.id for n in ast.walk(_statement(line))
                     if isinstance(n, ast.Name) and isinstance(n.ctx, context))


def _as_statement(line: str) -> str:
    """A host line as a statement of its own (a block's header with an empty body)."""
    text = line.strip()
    if text == "else:":
        return "pass"
    if text.startswith("elif "):
        text = text[2:]
    return text + " pass" if text.endswith(":") else text


def fuse_block_loops(kernels: Sequence[str], host: Sequence[str], ranks: dict[str, int],
                     scalars: Sequence[str]) -> tuple[list[str], list[str]]:
    r"""``kernels`` and ``host`` (the host function's lines) with each outermost loop whose
    kernels all fit one block, and whose other statements can run on the device, written as
    one kernel launched once (the kernels it called become device functions of it); the
    kernels no longer launched are left out. ``ranks``: the number of axes of host names'
    arrays; ``scalars``: host names of scalars (a device array of one element each).

    >>> k1 = "@cuda.jit(cache=True)\ndef k1(x, y):\n    t = cuda.grid(1)\n    if t < 4:\n" \
    ...      "        y[t] = x[t] * 2.0"
    >>> host = ["    c1_d = rtc.upload(c1)", "    for i in range(0, 3):",
    ...         "        o1_d = rtc.empty((4,), np.float64)",
    ...         "        rtc.launch(k1, 1, 4, (c1_d, o1_d, ))", "        c1_d, = o1_d,"]
    >>> kernels, lines = fuse_block_loops([k1], host, {"c1": 1}, [])
    >>> print("\n".join(lines))
        c1_d = rtc.upload(c1)
        c1_d = rtc.copy(c1_d)
        o1_d = rtc.empty((4,), np.float64)
        rtc.launch(loop0, 1, 4, (c1_d, o1_d, ))
    >>> print(kernels[-1])
    @cuda.jit(cache=True)
    def loop0(c1_d, o1_d):
        for i in range(0, 3):
            if cuda.threadIdx.x < 4:
                k1_in_block(c1_d, o1_d)
            cuda.syncthreads()
            for bl0_k1 in range(cuda.threadIdx.x, c1_d.size, 4):
                c1_d[bl0_k1] = o1_d[bl0_k1]
            cuda.syncthreads()
    """
    parsed = {k.name: k for k in map(_parse_kernel, kernels)}
    # names the host function gives a number (a while loop's count, a scalar carry's start)
    scalars = [*scalars, *(statement.targets[0].id for statement in map(
        _statement, host)
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name)
        and isinstance(statement.value, (ast.Constant, ast.UnaryOp))
        and isinstance(ast.literal_eval(statement.value), (int, float)))]
    lines, added, functions = list(host), [], {}
    k, key = 0, 0
    while k < len(lines):
        if not lines[k].lstrip().startswith(("for ", "while ")):
            k += 1
            continue
        end = _blocks(lines, k)
        # names the host reads after the loop (before it too, in a loop around it)
        around = lines[end:] if _indent(lines[k]) <= _indent(lines[0]) else \
            [*lines[:k], *lines[end:]]
        outside = {name for line in around for name in _names_of(line, ast.Load)}
        defined = {name for line in lines[:k] for name in _names_of(line, ast.Store)}
        writer = _Writer(lines[k:end], parsed, ranks, set(scalars), outside, defined, key)
        try:
            region = writer.write()
        except _NotFusable:
            k += 1  # its inner loops may still fuse
            continue
        kernel, launch = _loop_kernel(writer, region, key, parsed, functions)
        added.append(kernel)
        indent = lines[k][:_indent(lines[k])]
        lines[k:end] = [indent + line for line in (*region.hoisted, *launch)]
        k += len(region.hoisted) + len(launch)
        key += 1
    if not added:
        return list(kernels), lines
    # loops' kernels that are the same but for names (two loops of one body): written once
    added, lines = deduplicated(added, lines, frozenset(functions))
    launched = {m.group(1) for line in lines for m in _LAUNCH.finditer(line)}
    text = "\n".join(lines)
    kept = [source for source in kernels if _parse_kernel(source).name in launched
            or re.search(rf"\b{_parse_kernel(source).name}\b", text)]  # rtc.fold(...)
    return [*kept, *functions.values(), *added], lines


def _carried_in(body: list[str]) -> list[str]:
    """Names the kernel ``body`` reads before it first assigns them (a while loop's count, a
    scalar carry): they start from the host's values.

    >>> _carried_in(["    while n < 3:", "        v = n + 1", "        n = v"])
    ['n']
    """
    tree = ast.parse("def _():\n" + "\n".join(body))
    names = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Name)),
                   key=lambda n: (n.lineno, n.col_offset))
    first: dict[str, ast.Name] = {}
    for node in names:
        first.setdefault(node.id, node)
    stored = {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return [name for name, node in first.items()
            if name in stored and isinstance(node.ctx, ast.Load)]


def _loop_kernel(writer: _Writer, region: _Region, key: int, kernels: dict[str, _Kernel],
                 functions: dict[str, str]) -> tuple[str, list[str]]:
    """The loop's kernel text and the host lines launching it (and raising its marks)."""
    block = 1 << max(0, region.threads - 1).bit_length()
    body = [line.replace(writer.region_threads_name, str(block)) for line in region.body]
    for (kernel, threads), name in region.calls.items():
        # the block's size changes a device function only through its shared arrays
        shared = _SHARED.search("\n".join(kernels[kernel].body))
        name = f"{kernel}_in_block{block if shared else ''}"
        functions.setdefault(name, kernels[kernel].device_function(name, block, threads))
        body = [re.sub(rf"\b{kernel}_in_block\(", f"{name}(", line) for line in body]
    if region.marks:
        mark = writer.mark_name
        region.hoisted.append(f"{mark} = rtc.empty((1,), np.int64)")
        body = ["    if cuda.threadIdx.x == 0:", f"        {mark}[0] = 0",
                "    cuda.syncthreads()", *body]
    # a barrier right after another (a copy's and the call's before it) is dropped
    body = [line for k, line in enumerate(body) if not (
        line.strip() == "cuda.syncthreads()" and k and body[k - 1] == line)]
    # a block whose statements all went before the launch (allocations in a branch)
    body = [*(line for k, line in enumerate(body) for line in (
        [line, " " * (_indent(line) + 4) + "pass"] if line.endswith(":") and (
            k + 1 == len(body) or _indent(body[k + 1]) <= _indent(line)) else [line]))]
    name = f"loop{key}"
    carried = _carried_in(body)  # scalars the kernel reassigns, starting from the host's
    params = [p for p in free_names(body) if p not in functions]
    header = [*params, *(f"{p}_in" for p in carried)]
    body = [*(f"    {p} = {p}_in" for p in carried), *body]
    text = f"@cuda.jit(cache=True)\ndef {name}({', '.join(header)}):\n" + "\n".join(body)
    launch = [f"rtc.launch({name}, 1, {block}, "
              f"({''.join(p + ', ' for p in (*params, *carried))}))"]
    if region.marks:
        launch.append(f"rtc.raise_marked({writer.mark_name})")
    return text, launch

