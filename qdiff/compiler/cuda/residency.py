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

Slices (basic indexing: ``y = x[i]``, ``y = x[a:b]``) and reshapes are not written where
they are met: each is a recipe, taken on the side that reads ``y`` when it does
(``y_d = x_d[i]`` for a kernel, ``x`` going over first where it is only on the host, once,
before the loops that do not change it; ``y = x[i]`` for a host statement where ``x`` is
on the host, else the device view and a download of it), so that a host loop over the
rows of an array feeding kernels copies nothing per iteration and relies on no host copy
it does not read. An element read (``v = x[i, j]``, all of ``x``'s axes) of an array only
on the device brings that element back alone (`rtc.element`). The rank of each name
(`Residency.ranks`: from the arguments' types, the allocations' shapes and the statements
making views) tells a slice from an element read; a name of unknown rank keeps the host
path. A view not yet taken is taken before a statement changes its base or its index.

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

A loop's header is written before its body shows which carries kernels update, so the text
is written again knowing what the pass before found (`CarryPlan`): carries that came back
at the end of every step go over before their loop, and checkpoint buffers whose rows take
them are device arrays, a row written there as a device-side copy (``x_d[i] = v_d``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..source import dtype_name
from .statements import parse_statement

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
    key: int | None  # of a loop: the how-manieth loop header of the text (`CarryPlan`)
    touched: set[str] = field(default_factory=set)   # names assigned or written in it
    established: dict[str, set[str]] = field(default_factory=dict)  # sides made valid in it
    relied: dict[str, set[str]] = field(default_factory=dict)  # sides used, valid at start
    breaks: list[dict[str, frozenset[str]]] = field(default_factory=list)


ON_HOST = frozenset({HOST})


@dataclass
class CarryPlan:
    """What the host function's text is written knowing in advance (the code is written in
    one pass, so a loop's header is written before its body shows which carries kernels
    update): the loop ``carries`` that go to the device before their loop (each with its
    loop: the how-manieth loop header of the text, counted from 0), and the checkpoint
    ``buffers`` made on the device (their rows written and read there). A pass finds them
    (`Residency.next_plan`), the next is written with them. Carries a pass showed their
    loop's body reading on the host are ``kept_on_host`` from then on (planned again, they
    would alternate: each pass that plans one shows it read on the host, each that does not
    shows it coming back at every step).

    >>> sorted(CarryPlan({(0, "c"), (2, "d"), (3, "c")}).names)
    ['c', 'd']
    """

    carries: set[tuple[int, str]] = field(default_factory=set)
    buffers: set[str] = field(default_factory=set)
    kept_on_host: set[tuple[int, str]] = field(default_factory=set)
    # host names of scalar values and their dtypes (`Residency.scalars`), known to each
    # pass from the first use of a name on (the same dict in every pass)
    scalars: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def names(self) -> set[str]:
        """The names of the planned carries (of any loop)."""
        return {name for _, name in self.carries}


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

    def __init__(self, lines: list[str], plan: CarryPlan | None = None) -> None:
        self.lines = lines
        self.plan = plan or CarryPlan()
        # what this pass shows the next should know (`next_plan`): carries that came back
        # at the end of each step of their loop, those of the plan its body read on the
        # host, rows written (buffer, value), buffers taking rows made on the device
        self.device_carries: set[tuple[int, str]] = set()  # (loop, name), as `CarryPlan`
        self.host_carries: set[tuple[int, str]] = set()
        self.loops = 0  # loop headers written so far
        self.row_writes: set[tuple[str, str]] = set()
        self.device_rows: set[str] = set()
        self.aliases: dict[str, str] = {}  # a = b written on the host: a -> b
        self.where: dict[str, frozenset[str]] = {}  # absent: valid on the host only
        self.shared: dict[str, set[str]] = {}  # name -> the names sharing its device memory
        self.defined: set[str] = set()         # names assigned so far
        self.outside: set[str] = set()         # names read, never assigned (the arguments)
        self.frames: list[_Frame] = []
        self.chain_head = -1  # the header line of the block last left
        # downloads at a block's exit of names first assigned in it: the host may never
        # read them (temporaries of a branch or loop body); `prune` drops those
        self.unless_read: set[str] = set()
        # the number of axes of each name known to be an array (0: a host integer index)
        self.ranks: dict[str, int] = {}
        # slices and reshapes: name -> (base, the view's text after the base's name, the
        # names that text reads), taken on a side when that side reads the name
        self.recipes: dict[str, tuple[str, str, frozenset[str]]] = {}
        # scalar values (name -> dtype): a kernel takes one by value where the host has it,
        # else its device variable, an array of one element (made by a reduction or a
        # one-thread kernel), which the kernel reads its element from
        self.scalars = self.plan.scalars
        # the module's constants (arguments the compiled function passes the same arrays
        # as at every call): uploaded once, kept on the device (`device.upload_constant`)
        self.constants: set[str] = set()

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

    def _invalidate(self, name: str, written: bool = False) -> None:
        """``name`` gets a new value (its rank is no longer known) or is ``written`` in
        place: views of it (and views whose index reads it) can no longer be taken again
        from their recipe."""
        if not written:
            self.ranks.pop(name, None)
            self.aliases.pop(name, None)
        self.recipes = {view: recipe for view, recipe in self.recipes.items()
                        if view != name and recipe[0] != name and name not in recipe[2]}

    def _old(self, name: str, frame: _Frame) -> bool:
        return name in frame.defined or name in self.outside

    def _transfer(self, name: str, side: str, hoist: bool = True) -> list[str]:
        """Make ``name`` valid on ``side`` too; return the statement to write here, or none
        where it went before the outermost enclosing block that has not changed ``name``."""
        if name in self.recipes and (side == DEVICE or self._reachable(name, HOST)):
            return self._view_on_device(name) if side == DEVICE else self._view_on_host(name)
        if not self.sides(name):  # a view on neither side: taken on the device, brought back
            return [*self._view_on_device(name), *self._transfer(name, HOST, hoist=False)]
        source = DEVICE if side == HOST else HOST
        text = _transfer_text(name, side, self.scalars.get(name))
        if side == DEVICE and name in self.constants:
            text = f"{device_name(name)} = rtc.upload_constant({name})"
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
    def allocated(self, name: str, rank: int | None = None) -> None:
        """``name`` is a new array on the device only (its host variable is unassigned), of
        ``rank`` axes where known."""
        self._invalidate(name)
        if rank is not None:
            self.ranks[name] = rank
        self._forget_memory(name)
        self.defined.add(name)
        self._made(name, frozenset({DEVICE}), touched=True)

    def view(self, view: str, base: str, rank: int | None = None) -> None:
        """``view``'s device array is a view of ``base``'s (they share memory)."""
        self._use(base, DEVICE)
        self.allocated(view, rank)
        self._join(view, base)

    def on_device(self, names: list[str]) -> tuple[list[str], list[str]]:
        """The statements putting each of ``names`` (a kernel's parameters) on the device,
        and the device names to pass."""
        moves, passed = [], []
        for name in names:
            if name not in self.defined:
                self.outside.add(name)
            if name in self.scalars:
                on_device = self.scalar_on_device(name)
                self._use(name, DEVICE if on_device else HOST)
                passed.append(device_name(name) if on_device else name)
                continue
            passed.append(device_name(name))
            if DEVICE in self.sides(name):
                self._use(name, DEVICE)
            else:
                moves += self._transfer(name, DEVICE)
        return moves, passed

    def scalar_on_device(self, name: str) -> bool:
        """Whether kernels take scalar ``name`` from its device variable (an array of one
        element): where the host does not have it, or where it is a loop carry kept on the
        device (its loop's kernels update it there: a host read would bring it back at
        every step)."""
        sides = self.sides(name)
        return name in self.scalars and DEVICE in sides and (
            HOST not in sides or not {name, self._root(name)}.isdisjoint(self.plan.names))

    def _view_on_device(self, name: str) -> list[str]:
        """The statements taking the view ``name`` on the device from its recipe: its base
        goes there first (an array before the loops that leave it be; a view from its own
        recipe)."""
        base, suffix, _ = self.recipes[name]
        moves = [] if DEVICE in self.sides(base) else self._transfer(base, DEVICE)
        self._use(base, DEVICE)
        self._join(name, base)
        self._made(name, self.sides(name) | {DEVICE}, touched=False)
        if suffix.startswith(".reshape("):  # made once per array and shape (`device.view`)
            return [*moves, f"{device_name(name)} = rtc.view({device_name(base)}, "
                            f"{suffix[len('.reshape('):-1]})"]
        return [*moves, f"{device_name(name)} = {device_name(base)}{suffix}"]

    def _reachable(self, name: str, side: str) -> bool:
        """Whether the view ``name`` can be taken on ``side`` without a transfer."""
        recipe = self.recipes.get(name)
        return recipe is not None and (side in self.sides(recipe[0])
                                       or self._reachable(recipe[0], side))

    def _view_on_host(self, name: str) -> list[str]:
        """The statements taking the view ``name`` on the host from its recipe (its base is
        there, or can be taken there)."""
        base, suffix, _ = self.recipes[name]
        moves = [] if HOST in self.sides(base) else self._view_on_host(base)
        self._use(base, HOST)
        self._made(name, self.sides(name) | {HOST}, touched=False)
        return [*moves, f"{name} = {base}{suffix}"]

    def _join(self, view: str, base: str) -> None:
        """``view``'s device array shares ``base``'s memory."""
        self._forget_memory(view)
        group = self.shared.setdefault(base, {base})
        group.add(view)
        self.shared[view] = group

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
        # views not yet taken whose base or index this statement changes are taken first
        changed = {*parsed.assigns, *parsed.writes}
        settled = self._settle([view for view, (base, _, reads) in self.recipes.items()
                                if base in changed or reads & changed], free=True)
        if not _moves_names(text):  # scalars it reads only on the device come back first
            for name in parsed.reads:  # (an index among them makes a slice a view)
                if name in self.scalars and HOST not in self.sides(name):
                    settled += self._transfer(name, HOST)
        if self._deferred_view(text):
            return settled
        written = self._device_write(text)
        if written is not None:
            return [*settled, *written]
        rewritten = self.rewrite(text)
        if rewritten is not None:
            return [*settled, *rewritten]
        stripped = text.strip()
        moves = settled
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
            self._invalidate(name, written=True)
            self._forget_memory(name)
            self._made(name, ON_HOST, touched=True)
        if not stripped.endswith(":"):
            self.assigned(parsed.assigns)
            self._note_host_view(stripped)
        return [*moves, text]

    def _root(self, name: str) -> str:
        """The array ``name`` is a view or host alias of (itself where none)."""
        seen = set()
        while (name in self.recipes or name in self.aliases) and name not in seen:
            seen.add(name)
            name = self.recipes[name][0] if name in self.recipes else self.aliases[name]
        return name

    def _device_write(self, text: str) -> list[str] | None:
        """``x[...] = v`` (basic indexing; a checkpoint's row) done on the device where
        ``x`` is only there and ``v`` is an array there or reachable there: a device-side
        copy into the view. Notes the buffers whose rows take device values, for the next
        pass (`CarryPlan`). None where it runs on the host."""
        node = _one_assignment(text)
        if not (node is not None and isinstance(node.targets[0], ast.Subscript)
                and isinstance(node.targets[0].value, ast.Name)
                and isinstance(node.value, ast.Name)):
            return None
        target, value = node.targets[0].value.id, node.value.id
        if not self.ranks.get(value) or self._dropped_axes(node.targets[0].slice) is None:
            return None
        buffer, source = self._root(target), self._root(value)
        self.row_writes.add((buffer, source))
        if source not in self.plan.names and (DEVICE in self.sides(value)
                                                or self._reachable(value, DEVICE)):
            self.device_rows.add(buffer)
        if self.sides(target) != {DEVICE}:
            return None
        if target in self.outside or target not in self.defined:
            return None
        moves, (device_value,) = self.on_device([value])
        self._invalidate(target, written=True)
        self.written(target)
        index = ast.unparse(node.targets[0])[len(target):]
        indent = text[:len(text) - len(text.lstrip())]
        return [*moves, f"{indent}{device_name(target)}{index} = {device_value}"]

    def next_plan(self) -> CarryPlan:
        """The plan the next pass is written with: the carries kernels update that its
        loop's body does not read on the host, and the buffers whose rows take them (or
        other values made on the device).

        >>> r = Residency([], CarryPlan({(0, "c")}, set()))
        >>> r.device_carries, r.row_writes = {(1, "d"), (1, "e")}, {("buf", "d")}
        >>> r.host_carries = {(1, "e")}
        >>> plan = r.next_plan()
        >>> sorted(plan.carries), plan.buffers, plan.kept_on_host
        ([(0, 'c'), (1, 'd')], {'buf'}, {(1, 'e')})
        """
        kept_on_host = self.plan.kept_on_host | self.host_carries
        carries = (self.plan.carries | self.device_carries) - kept_on_host
        plan = CarryPlan(carries, set(), kept_on_host, self.scalars)
        plan.buffers = self.device_rows | {buffer for buffer, value in self.row_writes
                                           if value in plan.names}
        return plan

    def _deferred_view(self, text: str) -> bool:
        """Whether host statement ``text`` is an array view (a basic slice or a reshape of
        a name of known rank), kept as a recipe: taken on a side only where that side
        reads it."""
        node = _single_assignment(text)
        if node is None or not isinstance(node.targets[0], ast.Name):
            return False
        view, rank = self._view_of(node.value), self.rank_of(node.value)
        if view is None or not rank:
            return False
        target = node.targets[0].id
        self._invalidate(target)
        self._forget_memory(target)
        self.defined.add(target)
        self._made(target, frozenset(), touched=True)
        self.ranks[target], self.recipes[target] = rank, view
        return True

    def _note_host_view(self, text: str) -> None:
        """After host statement ``text``: the rank of the names it assigns."""
        node = _single_assignment(text)
        if node is None:
            return
        if isinstance(node.targets[0], ast.Tuple):  # loop carries: a, b, = x, y,
            if isinstance(node.value, ast.Tuple):
                for target, value in zip(node.targets[0].elts, node.value.elts):
                    if isinstance(target, ast.Name) and isinstance(value, ast.Name) \
                            and value.id in self.ranks:
                        self.ranks[target.id] = self.ranks[value.id]
            return
        if isinstance(node.value, ast.Name):
            self.aliases[node.targets[0].id] = node.value.id
        rank = self.rank_of(node.value)
        if rank is not None:
            self.ranks[node.targets[0].id] = rank

    def assigned(self, names: list[str]) -> None:
        """``names`` were assigned on the host."""
        for name in names:
            self._invalidate(name)
            self._forget_memory(name)
            self.defined.add(name)
            self._made(name, ON_HOST, touched=True)

    def rewrite(self, text: str) -> list[str] | None:
        """``a = b``, ``a = b.copy()`` or loop carries ``a, c, = b, d,`` on the device,
        where ``b`` is there only; ``v = b[i, j]``, one element of a ``b`` only on the
        device, brought back alone. None for any other statement (it runs on the host)."""
        node = _single_assignment(text)
        if node is None:
            return None
        indent = text[:len(text) - len(text.lstrip())]
        if isinstance(node.targets[0], ast.Tuple):
            values = node.value.elts if isinstance(node.value, ast.Tuple) else []
            settled = self._settle([v.id for v in values if isinstance(v, ast.Name)])
            rewritten = self._rewrite_tuple(text, node.targets[0], node.value)
            if rewritten is None:
                return None if not settled else [*settled, text]
            return [*settled, *rewritten]
        target, value = node.targets[0].id, node.value
        view = self._view_of(value)
        if view is not None:  # one element (a view of axes would have been deferred)
            source, suffix, _ = view
            if self.rank_of(value) != 0 or not suffix.startswith("[") \
                    or HOST in self.sides(source) or self._reachable(source, HOST):
                return None
            moves = [] if DEVICE in self.sides(source) else self._transfer(source, DEVICE)
            self._use(source, DEVICE)
            self.assigned([target])
            self.ranks[target] = 0
            return [*moves,
                    f"{indent}{target} = rtc.element({device_name(source)}, {suffix[1:-1]})"]
        source, method = None, None
        if isinstance(value, ast.Name):
            source = value.id
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and isinstance(value.func.value, ast.Name) and value.func.attr == "copy" \
                and not value.args:
            source, method = value.func.value.id, value.func.attr
        if source is None:
            return None
        settled = self._settle([source])
        # a planned carry valid on both sides is taken on the device: its loop's kernels
        # read it there, and a host alias would bring it back at every step
        device_carry = method is None and DEVICE in self.sides(source) \
            and self._root(source) in self.plan.names
        if HOST in self.sides(source) and not device_carry:
            return None if not settled else [*settled, *self.statement(text)]
        new, old = device_name(target), device_name(source)
        rank = self.ranks.get(source)
        if method == "copy":
            self._use(source, DEVICE)
            self.allocated(target, rank)
            return [*settled, f"{indent}{new} = rtc.copy({old})"]
        self.view(target, source, rank)
        self.aliases[target] = source
        self._same_kind(target, source)
        return [*settled, f"{indent}{new} = {old}"]

    def _same_kind(self, target: str, source: str) -> None:
        """``target`` took ``source``'s value on the device: a scalar where it is one."""
        if source in self.scalars:
            self.scalars.setdefault(target, self.scalars[source])

    def _settle(self, names: list[str], free: bool = False) -> list[str]:
        """The statements taking each view among ``names`` that is on neither side on one:
        the host where its base is there, else the device. ``free``: on the device where
        its base is there (no transfer, and a loop body relies on no host copy for it),
        and dropped by `prune` where nothing reads it."""
        lines = []
        for name in names:
            if name not in self.recipes or self.sides(name):
                continue
            if free and self._reachable(name, DEVICE) or not self._reachable(name, HOST):
                taken = self._view_on_device(name)
            else:
                taken = self._view_on_host(name)
            if free:
                self.unless_read.update(line.strip() for line in taken)
            lines += taken
        return lines

    # ------------------------------------------------------------------ ranks and views
    def _integer(self, node: ast.AST) -> bool:
        """Whether ``node`` is a host integer expression (an index of basic indexing)."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int) and not isinstance(node.value, bool)
        if isinstance(node, ast.Name):
            return self.ranks.get(node.id) == 0 and HOST in self.sides(node.id)
        if isinstance(node, ast.BinOp):
            return isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)) \
                and self._integer(node.left) and self._integer(node.right)
        if isinstance(node, ast.UnaryOp):
            return isinstance(node.op, ast.USub) and self._integer(node.operand)
        return False

    def _dropped_axes(self, index: ast.AST) -> int | None:
        """How many axes basic index ``index`` drops (its integers); None for any other
        index."""
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        dropped = 0
        for part in parts:
            if isinstance(part, ast.Slice):
                if not all(p is None or self._integer(p)
                           for p in (part.lower, part.upper, part.step)):
                    return None
            elif self._integer(part):
                dropped += 1
            else:
                return None
        return dropped

    def _view_of(self, value: ast.AST) -> tuple[str, str, frozenset[str]] | None:
        """(base, the text after the base's name, the names that text reads) of a basic
        slice ``x[...]`` or reshape ``x.reshape(...)`` of a name of known rank; else None."""
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            base, rest = value.value.id, value.slice
            if self._dropped_axes(rest) is None:
                return None
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and isinstance(value.func.value, ast.Name) and value.func.attr == "reshape" \
                and not value.keywords and _shape_length(value.args) is not None \
                and all(self._integer(e) for a in value.args
                        for e in (a.elts if isinstance(a, ast.Tuple) else [a])):
            base, rest = value.func.value.id, value
        else:
            return None
        if base not in self.ranks and rest is not value:  # a slice needs the base's rank
            return None
        suffix = ast.unparse(value)[len(base):]
        reads = frozenset(n.id for n in ast.walk(rest) if isinstance(n, ast.Name)) - {base}
        return base, suffix, reads

    def rank_of(self, value: ast.AST) -> int | None:
        """The number of axes of the value of expression ``value``, where known (0: a host
        integer)."""
        if isinstance(value, ast.Name):
            return self.ranks.get(value.id)
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            rank, dropped = self.ranks.get(value.value.id), self._dropped_axes(value.slice)
            return None if rank is None or dropped is None or dropped > rank else rank - dropped
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and isinstance(value.func.value, ast.Name)):
            return None
        owner, method = value.func.value.id, value.func.attr
        if owner in ("rtc", "np") and method in ("empty", "full", "zeros") and value.args:
            return _shape_length(value.args[:1])
        if owner == "rtc" and method == "download" and isinstance(value.args[0], ast.Name):
            return self.ranks.get(value.args[0].id.removesuffix("_d"))
        if owner == "rt" and method == "start_index":
            return 0
        if method == "reshape":
            return _shape_length(value.args)
        if method == "copy":
            return self.ranks.get(owner)
        return None

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
        ranks = {target: self.ranks[source] for target, source in pairs if source in self.ranks}
        self.assigned([t for t, _ in on_host])
        for target, source in on_device:
            self.allocated(target)
            self._same_kind(target, source)
            group = groups[source] | {target}
            for name in group:
                self.shared[name] = group
        self.ranks.update(ranks)
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
        key = None
        if loop:  # carries kernels update go over before their loop, not back at each step
            key, self.loops = self.loops, self.loops + 1
            for name in sorted(n for k, n in self.plan.carries if k == key and n in self.defined):
                if DEVICE not in self.sides(name) and name not in self.recipes:
                    header_line = self.lines.pop()
                    indent = header_line[:len(header_line) - len(header_line.lstrip())]
                    self.lines += [indent + line for line in self._transfer(name, DEVICE)]
                    self.lines.append(header_line)
                    opened = len(self.lines) - 1
        self.frames.append(_Frame(loop, opened, depth, dict(self.where), set(self.defined),
                                  key))
        self.assigned(assigns)
        if header.startswith("for ") and " in range(" in header:
            self.ranks.update(dict.fromkeys(assigns, 0))  # integer indices

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
            assert sides or not frame.start.get(name, ON_HOST), name
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
                if frame.loop and now == {DEVICE}:
                    self.device_carries.add((frame.key, name))
            if (frame.key, name) in self.plan.carries and HOST in frame.relied.get(name, ()):
                self.host_carries.add((frame.key, name))
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


def _transfer_text(name: str, side: str, scalar_dtype: object = None) -> str:
    """The statement making ``name`` valid on ``side`` (the host, or the device) from the
    other; a scalar's device variable is an array of one element, filled on the device
    from the host's value (a kernel argument, no copy).

    >>> _transfer_text("x", HOST), _transfer_text("s", DEVICE, "float64")
    ('x = rtc.download(x_d)', 's_d = rtc.full((1,), s, np.float64)')
    """
    if scalar_dtype is None:
        return (f"{name} = rtc.download({device_name(name)})" if side == HOST else
                f"{device_name(name)} = rtc.upload({name})")
    if side == HOST:
        return f"{name} = rtc.download_scalar({device_name(name)})"
    return f"{device_name(name)} = rtc.full((1,), {name}, {dtype_name(scalar_dtype)})"


def _moves_names(text: str) -> bool:
    """Whether statement ``text`` only gives names the values of others: ``a = b`` or
    ``a, c, = b, d,`` (loop carries).

    >>> _moves_names("a, c, = b, d,"), _moves_names("a = b"), _moves_names("a = b[i]")
    (True, True, False)
    """
    node = _single_assignment(text)
    if node is None:
        return False
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        return all(isinstance(n, ast.Name) for n in (*target.elts, *value.elts))
    return isinstance(target, ast.Name) and isinstance(value, ast.Name)


def _one_assignment(text: str) -> ast.Assign | None:
    """Statement ``text`` as an assignment with one target; else None."""
    try:
        tree = ast.parse(text.strip())
    except SyntaxError:
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    return node if isinstance(node, ast.Assign) and len(node.targets) == 1 else None


def _single_assignment(text: str) -> ast.Assign | None:
    """Statement ``text`` as an assignment to one name or one tuple of names; else None."""
    node = _one_assignment(text)
    return node if node is not None and isinstance(node.targets[0], (ast.Name, ast.Tuple)) \
        else None


def _shape_length(args: list[ast.AST]) -> int | None:
    """The number of axes of the shape passed as ``args`` (``(2, 3,)``, ``2``, ``-1``, or
    integers one by one, as ``reshape`` takes them); None where it cannot be read."""
    if len(args) == 1 and isinstance(args[0], ast.Tuple):
        return len(args[0].elts)
    if args and not any(isinstance(a, (ast.Tuple, ast.List, ast.Starred)) for a in args):
        return len(args)
    return None
