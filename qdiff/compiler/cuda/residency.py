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

Blocks (loops, branches) are written once and may run many times or not at all. Each
block remembers the state at its start and the sides its code relied on without making
them: at its end (and before a ``break``) those are made valid again, so that every
iteration finds what its code expects; after the block a name is valid where it was both
at the block's start and at each of its exits. A transfer of a name that no enclosing
block has changed so far goes before the outermost such block's header (before its
chain's ``if``, for an ``elif``/``else``): once, not per iteration. Names first assigned
inside a branch, or inside a loop left by ``break``, come back to the host at its exits
(the other branch assigns them on the host, or not at all), unless no later line reads
them (`Residency.prune`); names first assigned in another loop keep their state at the end
of its body.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .statements import parse_statement, viewed_names

HOST, DEVICE = "host", "device"


def device_name(name: str) -> str:
    """The device variable of host variable ``name``.

    >>> device_name("y5")
    'y5_d'
    """
    return f"{name}_d"


@dataclass
class _Frame:
    """A block being written: its header's place, the state at its start, and what its
    statements so far assigned, established and relied on."""

    loop: bool
    header: int  # index of the header line in the host lines (of an elif/else: its if's)
    depth: int                         # the header's indentation
    start: dict[str, frozenset[str]]
    defined: set[str]
    touched: set[str] = field(default_factory=set)   # names assigned or written in it
    established: dict[str, set[str]] = field(default_factory=dict)  # sides made valid in it
    relied: dict[str, set[str]] = field(default_factory=dict)  # sides used, valid at start
    breaks: list[dict[str, frozenset[str]]] = field(default_factory=list)


ON_HOST = frozenset({HOST})


class Residency:
    """The sides each host name is valid on while the host function is written (``lines``,
    the host function's lines so far), and the transfer statements kernels and host
    statements need. A transfer of a value that a loop does not change goes before the
    loop (once), not into its body.

    >>> r = Residency([])
    >>> r.allocated("y")  # a kernel's result, made on the device
    >>> r.statement("z = np.sum(y)")  # a host statement reads it: one download first
    ['y = rtc.download(y_d)', 'z = np.sum(y)']
    >>> r.on_device(["y", "z"])  # a launch: y is still on the device, z goes over
    (['z_d = rtc.upload(z)'], ['y_d', 'z_d'])
    """

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.where: dict[str, frozenset[str]] = {}  # absent: valid on the host only
        self.shared: dict[str, set[str]] = {}  # name -> the names sharing its device memory
        self.defined: set[str] = set()         # names assigned so far
        self.outside: set[str] = set()         # names read, never assigned (the arguments)
        self.frames: list[_Frame] = []
        self.chain_head = -1  # the header line of the block last left
        # downloads at a block's exit of names first assigned in it: the host may never
        # read them (temporaries of a branch or loop body); `prune` drops those
        self.unless_read: set[str] = set()

    # ------------------------------------------------------------------ state
    def sides(self, name: str) -> frozenset[str]:
        return self.where.get(name, ON_HOST)

    def _set(self, name: str, sides: frozenset[str]) -> None:
        if sides == ON_HOST:
            self.where.pop(name, None)
        else:
            self.where[name] = sides

    def _forget_memory(self, name: str) -> None:
        """``name``'s device variable no longer shares memory with others'."""
        group = self.shared.pop(name, None)
        if group is not None:
            group.discard(name)

    def _use(self, name: str, side: str) -> None:
        """The code written here relies on ``name`` being valid on ``side``."""
        for frame in reversed(self.frames):
            if side in frame.established.get(name, ()):
                return
            frame.relied.setdefault(name, set()).add(side)

    def _made(self, name: str, sides: frozenset[str], touched: bool) -> None:
        """``name`` is now valid on ``sides``: all of them made here where ``touched`` (its
        value is new), else those it was not valid on."""
        made = sides if touched else sides - self.sides(name)
        self._set(name, sides)
        if self.frames:
            frame = self.frames[-1]
            frame.established.setdefault(name, set()).update(made)
            if touched:
                frame.touched.add(name)

    def _old(self, name: str, frame: _Frame) -> bool:
        return name in frame.defined or name in self.outside

    def _transfer(self, name: str, side: str, hoist: bool = True) -> list[str]:
        """Make ``name`` valid on ``side`` too; return the statement to write here, or none
        where it went before the outermost enclosing block that has not changed ``name``."""
        source = DEVICE if side == HOST else HOST
        text = (f"{name} = rtc.download({device_name(name)})" if side == HOST else
                f"{device_name(name)} = rtc.upload({name})")
        level = len(self.frames)
        while hoist and level and name not in self.frames[level - 1].touched \
                and self._old(name, self.frames[level - 1]) \
                and source in self.frames[level - 1].start.get(name, ON_HOST):
            level -= 1
        inner, self.frames = self.frames[level:], self.frames[:level]
        self._use(name, source)
        if side == DEVICE:
            self._forget_memory(name)
        self._made(name, self.sides(name) | {side}, touched=False)
        if inner:  # before the header of the outermost block left (of its if, in a chain)
            self.lines.insert(inner[0].header, "    " * inner[0].depth + text)
            if inner[0].header <= self.chain_head:
                self.chain_head += 1
            for frame in inner:
                frame.header += 1
                frame.start[name] = frame.start.get(name, ON_HOST) | {side}
                frame.relied.setdefault(name, set()).add(side)
        self.frames += inner
        return [] if inner else [text]

    # ------------------------------------------------------------------ kernels
    def allocated(self, name: str) -> None:
        """``name`` is a new array on the device only (its host variable is unassigned)."""
        self._forget_memory(name)
        self.defined.add(name)
        self._made(name, frozenset({DEVICE}), touched=True)

    def view(self, view: str, base: str) -> None:
        """``view``'s device array is a view of ``base``'s (they share memory)."""
        self._use(base, DEVICE)
        self.allocated(view)
        group = self.shared.setdefault(base, {base})
        group.add(view)
        self.shared[view] = group

    def on_device(self, names: list[str]) -> tuple[list[str], list[str]]:
        """The statements putting each of ``names`` (a kernel's parameters) on the device,
        and the device names to pass."""
        moves = []
        for name in names:
            if name not in self.defined:
                self.outside.add(name)
            if DEVICE in self.sides(name):
                self._use(name, DEVICE)
            else:
                moves += self._transfer(name, DEVICE)
        return moves, [device_name(n) for n in names]

    def written(self, name: str) -> None:
        """A kernel wrote ``name``'s device array: every host copy sharing it is stale."""
        for other in self.shared.get(name, {name}):
            if DEVICE in self.sides(other) or other == name:
                self._made(other, frozenset({DEVICE}), touched=True)

    # ------------------------------------------------------------------ host statements
    def statement(self, text: str) -> list[str]:
        """The lines to write for host statement ``text``: downloads of what it reads that
        is only on the device, then the statement (or its device form, `rewrite`)."""
        parsed = parse_statement(text)
        self.outside.update(n for n in parsed.reads if n not in self.defined)
        rewritten = self.rewrite(text)
        if rewritten is not None:
            return rewritten
        stripped = text.strip()
        moves = []
        for name in parsed.reads:
            if HOST in self.sides(name):
                self._use(name, HOST)
            else:
                moves += self._transfer(name, HOST)
        if moves and stripped.startswith(("elif ", "else")):
            raise AssertionError(f"a branch test reads a device array: {stripped}")
        if stripped == "break":
            moves += self._exit(next(f for f in reversed(self.frames) if f.loop), exiting=True)
        for name in parsed.writes:
            self._forget_memory(name)
            self._made(name, ON_HOST, touched=True)
        if not stripped.endswith(":"):
            self.assigned(parsed.assigns)
        return [*moves, text]

    def assigned(self, names: list[str]) -> None:
        """``names`` were assigned on the host."""
        for name in names:
            self._forget_memory(name)
            self.defined.add(name)
            self._made(name, ON_HOST, touched=True)

    def rewrite(self, text: str) -> list[str] | None:
        """``a = b``, ``a = b.reshape(...)`` or ``a = b.copy()`` on the device, where ``b``
        is there only; None for any other statement."""
        try:
            tree = ast.parse(text.strip())
        except SyntaxError:
            return None
        node = tree.body[0] if len(tree.body) == 1 else None
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            return None
        if isinstance(node.targets[0], ast.Tuple):
            return self._rewrite_tuple(text, node.targets[0], node.value)
        if not isinstance(node.targets[0], ast.Name):
            return None
        target, value = node.targets[0].id, node.value
        source, method = None, None
        if isinstance(value, ast.Name):
            source = value.id
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and isinstance(value.func.value, ast.Name) \
                and value.func.attr in ("reshape", "copy"):
            source, method = value.func.value.id, value.func.attr
            if any(HOST not in self.sides(n) for a in value.args for n in viewed_names([a])):
                return None
        if source is None or HOST in self.sides(source):
            return None
        indent = text[:len(text) - len(text.lstrip())]
        new, old = device_name(target), device_name(source)
        if method == "copy":
            self._use(source, DEVICE)
            self.allocated(target)
            return [f"{indent}{new} = rtc.copy({old})"]
        self.view(target, source)
        args = ast.get_source_segment(text.strip(), value)[len(source):] if method else ""
        return [f"{indent}{new} = {old}{args}"]

    def _rewrite_tuple(self, text: str, targets: ast.Tuple, value: ast.AST
                       ) -> list[str] | None:
        """``a, b, = x, y,`` (loop carries taking their new values) with the values only on
        the device assigned there: one assignment of host names, one of device names."""
        if not (isinstance(value, ast.Tuple) and len(value.elts) == len(targets.elts)
                and all(isinstance(n, ast.Name) for n in (*targets.elts, *value.elts))):
            return None
        pairs = [(t.id, v.id) for t, v in zip(targets.elts, value.elts)]
        on_device = [(t, v) for t, v in pairs if HOST not in self.sides(v)]
        if not on_device:
            return None
        on_host = [(t, v) for t, v in pairs if HOST in self.sides(v)]
        for _, source in on_host:
            self._use(source, HOST)
        for _, source in on_device:
            self._use(source, DEVICE)
        # the sources are read before any target is assigned, as in the one statement
        groups = {source: set(self.shared.get(source, {source})) for _, source in on_device}
        self.assigned([t for t, _ in on_host])
        for target, source in on_device:
            self.allocated(target)
            group = groups[source] | {target}
            for name in group:
                self.shared[name] = group
        indent = text[:len(text) - len(text.lstrip())]
        tuple_text = lambda names: "".join(f"{n}, " for n in names).rstrip()  # noqa: E731
        lines = [f"{tuple_text(device_name(t) for t, _ in on_device)} = "
                 f"{tuple_text(device_name(v) for _, v in on_device)}"]
        if on_host:
            lines.append(f"{tuple_text(t for t, _ in on_host)} = "
                         f"{tuple_text(v for _, v in on_host)}")
        return [indent + line for line in lines]

    # ------------------------------------------------------------------ blocks
    def enter(self, header: str, assigns: list[str]) -> None:
        """A block starts, its header the last host line; ``assigns`` are the names the
        header assigns each time the block runs (a loop's index)."""
        loop = header.startswith(("for ", "while "))
        depth = (len(self.lines[-1]) - len(self.lines[-1].lstrip())) // 4
        # an elif/else branch starts where its chain's `if` does: nothing goes between
        opened = self.chain_head if header.startswith(("elif ", "else")) else len(self.lines) - 1
        self.frames.append(_Frame(loop, opened, depth, dict(self.where), set(self.defined)))
        self.assigned(assigns)

    def leave(self) -> list[str]:
        """The lines ending the innermost block; after it each name is valid where it was
        both at the block's start and at each of its exits."""
        frame = self.frames[-1]
        lines = self._exit(frame, exiting=False)
        self.frames.pop()
        self.chain_head = frame.header
        if self.frames:
            self.frames[-1].touched |= frame.touched
        ends = [dict(self.where), *frame.breaks]
        for name in self._new(frame):
            if not frame.loop or frame.breaks:
                self._set(name, ON_HOST)  # downloaded by _exit where it was not
            if HOST in self.sides(name) and DEVICE not in self.sides(name):
                self._forget_memory(name)
        for name in sorted((frame.defined | self.outside)
                           & {*frame.start, *(n for end in ends for n in end)}):
            sides = frame.start.get(name, ON_HOST)
            for end in ends:
                sides &= end.get(name, ON_HOST)
            assert sides, name
            self._set(name, sides)
        return lines

    def prune(self, lines: list[str]) -> list[str]:
        """``lines`` (the whole host function) without the downloads at block exits whose
        host value no later line reads. Such a name is first assigned in its block, so no
        read of it can come earlier in the text (not even in a loop's next iteration)."""
        last_read = {}
        for k, line in enumerate(lines):
            for name in parse_statement(line).reads:
                last_read[name] = k
        return [line for k, line in enumerate(lines)
                if line.strip() not in self.unless_read
                or last_read.get(line.split("=")[0].strip(), -1) > k]

    def _new(self, frame: _Frame) -> list[str]:
        """The names first assigned inside ``frame``'s block."""
        return sorted(self.defined - frame.defined - self.outside)

    def _exit(self, frame: _Frame, exiting: bool) -> list[str]:
        """Transfers leaving ``frame``'s block (at its end, or at a ``break`` out of it:
        ``exiting``): the sides its code relied on valid at its start are made valid again
        (each next iteration starts as its code expects), and each name keeps a side valid
        at its start; names first assigned in it come back to the host where the block is
        a branch or a loop left by ``break``."""
        lines = []
        for name in sorted((frame.defined | self.outside) & {*self.where, *frame.start}):
            before, now = frame.start.get(name, ON_HOST), self.sides(name)
            need = frame.relied.get(name, set()) & before
            if not before & now:
                need |= before
            for side in sorted(need - now):
                lines += self._transfer(name, side, hoist=False)
        if not frame.loop or exiting or frame.breaks:
            for name in self._new(frame):
                if HOST not in self.sides(name):
                    lines += self._transfer(name, HOST, hoist=False)
                    self.unless_read.add(lines[-1])
        if exiting:
            frame.breaks.append(dict(self.where))
        return lines
