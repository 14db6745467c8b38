"""Where each array of a generated CUDA host function is valid: on the host, on the device,
or both, decided while the function's text is written.

The host function is plain Python; an array ``x`` has a host variable ``x`` and, once it has
been on the device, a device variable ``x_d``. Kernels read and write device arrays only:
an operand valid only on the host goes over once, before the first launch that reads it;
a kernel's result is allocated on the device by the host and stays there. A host statement
that reads an array valid only on the device gets a download just before it (and the
array is then valid on both sides); a host statement that assigns or may write an array
leaves only its host copy valid. ``y = x.reshape(...)``, ``y = x`` and ``y = x.copy()`` of
an array valid only on the device are done on the device instead (`rewrite`).

Device arrays that share memory (a reshaped view, an alias) are kept in one class: a kernel
writing one leaves the host copies of all of them stale.

Blocks (loops, branches) are written once and may run many times or not at all, so every
block ends where it began: an array valid on a side at the block's start is made valid on
that side again at its end (and before a ``break``), so each iteration starts in the state
its code was written for, and after the block the state is the state at its start. Names
first assigned inside a branch come back to the host at its end (the other branch assigns
them on the host, or not at all); names first assigned in a loop keep their state at the
end of its body (or, in a loop left by ``break``, come back to the host).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

HOST, DEVICE, BOTH = "host", "device", "both"

# NumPy functions that write into an argument (every other np.<name> only reads)
_NUMPY_WRITERS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal"})
# array methods that only read the array
_READING_METHODS = frozenset({
    "reshape", "copy", "astype", "ravel", "transpose", "sum", "max", "min", "any", "all",
    "conj", "conjugate", "dot", "item", "tolist", "view", "flatten", "argmax", "argmin",
    "mean", "prod", "cumsum", "nonzero", "copy_to_host"})
# Python builtins the host function calls on its values (none writes its arguments)
_PURE_BUILTINS = frozenset({"min", "max", "int", "float", "bool", "complex", "abs", "range",
                            "len", "divmod", "round", "tuple", "list", "zip", "enumerate"})


def device_name(name: str) -> str:
    """The device variable of host variable ``name``.

    >>> device_name("y5")
    'y5_d'
    """
    return f"{name}_d"


@dataclass
class Statement:
    """What one host statement does to names: reads, assigns, may write in place."""

    reads: list[str]
    assigns: list[str]
    writes: set[str]


def _call_writes(call: ast.Call) -> set[str]:
    """Names a call may write: every array argument, unless the callee only reads."""
    func = call.func
    args = [*call.args, *(k.value for k in call.keywords)]
    out = {k.value.id for k in call.keywords if k.arg == "out" and isinstance(k.value, ast.Name)}
    if isinstance(func, ast.Name) and func.id in _PURE_BUILTINS:
        return out
    if isinstance(func, ast.Attribute):
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id == "np":
            return out | (_names(args[:1]) if func.attr in _NUMPY_WRITERS else set())
        if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name) \
                and owner.value.id == "np":  # np.add.at(a, ...) writes a; np.add.reduce reads
            return out | (_names(args[:1]) if func.attr == "at" else set())
        if isinstance(owner, ast.Name) and owner.id not in ("rt", "rtc") \
                and func.attr not in _READING_METHODS:
            return out | {owner.id} | _names(args)
        if isinstance(owner, ast.Name) and owner.id not in ("rt", "rtc"):
            return out
    return out | _names(args)


def _names(nodes: list[ast.AST]) -> set[str]:
    """The array names passed as ``nodes`` (a name, or a name indexed or sliced)."""
    found = set()
    for node in nodes:
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        if isinstance(node, ast.Name):
            found.add(node.id)
    return found


def _base(target: ast.AST) -> str | None:
    while isinstance(target, (ast.Subscript, ast.Attribute)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def parse_statement(text: str) -> Statement:
    """The names a host statement (or block header) reads, assigns and may write in place.

    >>> s = parse_statement("y[0] = np.sin(x) + rt.fill(z, w[1:])")
    >>> s.reads, s.assigns, sorted(s.writes)
    (['y', 'x', 'z', 'w'], [], ['w', 'y', 'z'])
    >>> parse_statement("for i in range(n):").assigns
    ['i']
    """
    text = text.strip()
    if text.endswith(":"):
        header = text[:-1]
        if header == "else":
            return Statement([], [], set())
        if header.startswith("elif "):
            header = "if " + header[5:]
        text = header + ": pass"
    tree = ast.parse(text)
    nodes = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Name)),
                   key=lambda n: (n.lineno, n.col_offset))
    reads = list(dict.fromkeys(n.id for n in nodes if isinstance(n.ctx, ast.Load)))
    assigns = list(dict.fromkeys(n.id for n in nodes if isinstance(n.ctx, ast.Store)))
    writes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            writes |= _call_writes(node)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            base = _base(node)
            if base is not None:
                writes.add(base)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            reads.append(node.target.id)
    return Statement(reads, assigns, writes)


@dataclass
class _Frame:
    """A block being written: the state at its start, and its exits by ``break``."""

    loop: bool
    start: dict[str, str]
    defined: set[str]
    breaks: list[dict[str, str]] = field(default_factory=list)


class Residency:
    """The side(s) each host name is valid on while the host function is written, and the
    transfer statements that keep kernels and host statements supplied."""

    def __init__(self) -> None:
        self.where: dict[str, str] = {}        # absent: valid on the host only
        self.shared: dict[str, set[str]] = {}  # name -> the names sharing its device memory
        self.defined: set[str] = set()         # names assigned so far
        self.outside: set[str] = set()         # names read, never assigned (the arguments)
        self.frames: list[_Frame] = []

    # ------------------------------------------------------------------ state
    def state(self, name: str) -> str:
        return self.where.get(name, HOST)

    def _set(self, name: str, side: str) -> None:
        if side == HOST:
            self.where.pop(name, None)
        else:
            self.where[name] = side

    def _forget_memory(self, name: str) -> None:
        """``name``'s device variable no longer shares memory with others'."""
        group = self.shared.pop(name, None)
        if group is not None:
            group.discard(name)

    def _share(self, view: str, base: str) -> None:
        group = self.shared.setdefault(base, {base})
        group.add(view)
        self.shared[view] = group

    def download(self, name: str) -> str:
        self._set(name, BOTH)
        return f"{name} = rtc.download({device_name(name)})"

    def upload(self, name: str) -> str:
        self._set(name, BOTH)
        self._forget_memory(name)
        return f"{device_name(name)} = rtc.upload({name})"

    # ------------------------------------------------------------------ kernels
    def allocated(self, name: str) -> None:
        """``name`` is a new array on the device only (its host variable is unassigned)."""
        self._forget_memory(name)
        self.defined.add(name)
        self._set(name, DEVICE)

    def view(self, view: str, base: str) -> None:
        """``view``'s device array is a view of ``base``'s (they share memory)."""
        self.allocated(view)
        self._share(view, base)

    def on_device(self, names: list[str]) -> tuple[list[str], list[str]]:
        """The statements putting each of ``names`` (a kernel's parameters) on the device,
        and the device names to pass."""
        self.outside.update(n for n in names if n not in self.defined)
        moves = [self.upload(n) for n in names if self.state(n) == HOST]
        return moves, [device_name(n) for n in names]

    def written(self, name: str) -> None:
        """A kernel wrote ``name``'s device array: every host copy sharing it is stale."""
        for other in self.shared.get(name, {name}):
            if self.state(other) != HOST or other == name:
                self._set(other, DEVICE)

    # ------------------------------------------------------------------ host statements
    def statement(self, text: str) -> list[str]:
        """The lines to write for host statement ``text``: downloads of what it reads that
        is only on the device, then the statement (or its device form, `rewrite`)."""
        parsed = parse_statement(text)
        self.outside.update(n for n in parsed.reads if n not in self.defined)
        rewritten = self.rewrite(text)
        if rewritten is not None:
            return [rewritten]
        stripped = text.strip()
        moves = [self.download(n) for n in parsed.reads if self.state(n) == DEVICE]
        if moves and stripped.startswith(("elif ", "else")):
            raise AssertionError(f"a branch test reads a device array: {stripped}")
        if stripped == "break":
            moves += self._leave(self._loop_frame(), exiting=True)
        for name in parsed.writes:
            if self.state(name) != HOST:
                self._set(name, HOST)
                self._forget_memory(name)
        if not stripped.endswith(":"):
            self.assigned(parsed.assigns)
        return [*moves, text]

    def assigned(self, names: list[str]) -> None:
        """``names`` were assigned on the host."""
        for name in names:
            self._set(name, HOST)
            self._forget_memory(name)
            self.defined.add(name)

    def rewrite(self, text: str) -> str | None:
        """``a = b``, ``a = b.reshape(...)`` or ``a = b.copy()`` on the device, where ``b``
        is there only; None for any other statement."""
        try:
            tree = ast.parse(text.strip())
        except SyntaxError:
            return None
        node = tree.body[0] if len(tree.body) == 1 else None
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            return None
        target, value = node.targets[0].id, node.value
        source, method = None, None
        if isinstance(value, ast.Name):
            source = value.id
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and isinstance(value.func.value, ast.Name) \
                and value.func.attr in ("reshape", "copy"):
            source, method = value.func.value.id, value.func.attr
            if any(self.state(n) == DEVICE for a in value.args for n in _names([a])):
                return None
        if source is None or self.state(source) != DEVICE:
            return None
        indent = text[:len(text) - len(text.lstrip())]
        new, old = device_name(target), device_name(source)
        if method == "copy":
            self.allocated(target)
            return f"{indent}{new} = rtc.copy({old})"
        self.view(target, source)
        args = ast.get_source_segment(text.strip(), value)[len(source):] if method else ""
        return f"{indent}{new} = {old}{args}"

    # ------------------------------------------------------------------ blocks
    def enter(self, header: str, assigns: list[str]) -> None:
        """A block starts (after its header's statement); ``assigns`` are the names its
        header assigns each time the block runs (a loop's index)."""
        loop = header.startswith(("for ", "while "))
        self.frames.append(_Frame(loop, dict(self.where), set(self.defined)))
        self.assigned(assigns)

    def leave(self) -> list[str]:
        """The lines ending the innermost block (restoring its start's state); the state
        after it is then the state at its start."""
        frame = self.frames[-1]
        lines = self._leave(frame, exiting=False)
        self.frames.pop()
        ended = dict(self.where)
        self.where = dict(frame.start)
        for name in self._new(frame):
            side = ended.get(name, HOST)
            if frame.loop and not frame.breaks and side != HOST:
                self.where[name] = side
            else:
                self._forget_memory(name)
        return lines

    def _new(self, frame: _Frame) -> list[str]:
        """The names first assigned inside ``frame``'s block."""
        return sorted(self.defined - frame.defined - self.outside)

    def _loop_frame(self) -> _Frame:
        return next(f for f in reversed(self.frames) if f.loop)

    def _leave(self, frame: _Frame, exiting: bool) -> list[str]:
        """Transfers restoring ``frame``'s start state for the names it knew; names first
        assigned in it come back to the host where the block is a branch, or a loop that
        is left by ``break`` (``exiting``: this is such a ``break``)."""
        lines = []
        known = frame.defined | self.outside
        for name in sorted(known & (set(self.where) | set(frame.start))):
            before, now = frame.start.get(name, HOST), self.state(name)
            if before in (HOST, BOTH) and now == DEVICE:
                lines.append(self.download(name))
            if before in (DEVICE, BOTH) and now == HOST:
                lines.append(self.upload(name))
        if exiting:
            frame.breaks.append(dict(self.where))
        if not frame.loop or frame.breaks:
            for name in self._new(frame):
                if self.state(name) == DEVICE:
                    lines.append(self.download(name))
        return lines
