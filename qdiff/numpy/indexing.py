"""NumPy indexing on traced arrays: ``x[...]`` and functional updates ``x.at[...].set(v)``.

Basic indexing (ints, slices, None, Ellipsis) becomes `slice`/`rev`/`reshape`; a traced
scalar index becomes `dynamic_slice`; integer-array ("advanced") indices become one `gather`
on a flattened view, with NumPy's placement of the broadcast index dimensions. Updates
through ``.at`` reuse the same index logic: a box of ints and unit-step slices becomes
`dynamic_update_slice`; anything else scatters (``set``) or reduces by index (``add``,
``multiply``, ``min``, ``max``) at the flat positions the index selects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..classical import soacs
from ..ir.errors import QdiffError, TypeCheckError
from ..ir.tracer import Tracer, as_operand
from ._core import apply, broadcast_shapes, broadcast_to_shape, shape_of
from .elementwise import add, less, maximum, minimum, multiply, where
from .shape import reshape, transpose


def _is_int_array(entry: Any) -> bool:
    if isinstance(entry, Tracer):
        return entry.dtype.kind in "iu" and entry.ndim > 0
    return isinstance(entry, (np.ndarray, list)) and np.asarray(entry).dtype.kind in "iu"


def _expand(index: Any, ndim: int) -> list[Any]:
    """The index as one entry per axis (plus None entries for new axes)."""
    entries = list(index) if isinstance(index, tuple) else [index]
    expanded: list[Any] = []
    for entry in entries:
        if isinstance(entry, Tracer) and entry.dtype == np.bool_:
            raise QdiffError(
                "indexing with a traced boolean mask gives a data-dependent shape; use "
                "qdiff.numpy.where(mask, x, 0) instead")
        if isinstance(entry, (np.ndarray, list)) and np.asarray(entry).dtype == np.bool_:
            expanded.extend(np.nonzero(np.asarray(entry)))
        elif isinstance(entry, list):
            expanded.append(np.asarray(entry))
        else:
            expanded.append(entry)
    used = sum(1 for e in expanded if e is not None and e is not Ellipsis)
    ellipses = [k for k, e in enumerate(expanded) if e is Ellipsis]
    if len(ellipses) > 1:
        raise QdiffError("an index can only have a single ellipsis ('...')")
    if used > ndim:
        raise QdiffError(f"too many indices: {used} for an array of {ndim} dimensions")
    fill = [slice(None)] * (ndim - used)
    if ellipses:
        at = ellipses[0]
        return expanded[:at] + fill + expanded[at + 1:]
    return expanded + fill


def _static_int(entry: Any) -> bool:
    return isinstance(entry, (int, np.integer)) and not isinstance(entry, bool)


def _check_entry(entry: Any) -> None:
    if entry is None or isinstance(entry, slice) or _static_int(entry) or _is_int_array(entry):
        return
    if isinstance(entry, Tracer) and entry.ndim == 0 and entry.dtype.kind in "iu":
        return
    raise QdiffError(f"unsupported index {entry!r}: use ints, slices, None, ... or int arrays")


def getitem(x: Any, index: Any) -> Any:
    """``x[index]`` with NumPy semantics.

    >>> import qdiff.numpy as qnp
    >>> x = np.arange(12.0).reshape(3, 4)
    >>> qnp.getitem(x, (slice(None, None, -1), [0, 3])).tolist()
    [[8.0, 11.0], [4.0, 7.0], [0.0, 3.0]]
    """
    x = as_operand(x)
    shape = shape_of(x)
    entries = _expand(index, len(shape))
    for entry in entries:
        _check_entry(entry)
    advanced = any(_is_int_array(e) for e in entries)
    if advanced and any(e is None for e in entries):
        raise QdiffError("combining None (newaxis) with array indices is not supported")
    axis_entries = [e for e in entries if e is not None]
    x = _apply_slices(x, axis_entries)
    if advanced:
        return _advanced(x, axis_entries)
    # basic: traced scalar indices, then drop int axes and insert new ones
    for axis, entry in enumerate(axis_entries):
        if isinstance(entry, Tracer):
            x = _dynamic_take(x, axis, entry)
    out_shape = []
    axis = 0
    for entry in entries:
        if entry is None:
            out_shape.append(1)
            continue
        if isinstance(entry, slice):
            out_shape.append(shape_of(x)[axis])
        axis += 1
    return reshape(x, tuple(out_shape))


def _apply_slices(x: Any, entries: list[Any]) -> Any:
    """Apply static slices and static int indices (as length-1 slices); others stay whole."""
    shape = shape_of(x)
    start, limit, strides, flip = [], [], [], []
    for axis, (entry, dim) in enumerate(zip(entries, shape)):
        lo, hi, step = 0, dim, 1
        if isinstance(entry, slice):
            lo, hi, step = entry.indices(dim)
            if step < 0:  # walk the reversed axis forwards
                flip.append(axis)
                lo, hi, step = dim - 1 - lo, dim - 1 - hi, -step
            hi = max(hi, lo)
        elif _static_int(entry):
            if not -dim <= entry < dim:
                raise QdiffError(
                    f"index {entry} is out of bounds for axis {axis} with size {dim}")
            lo = int(entry) % dim
            hi = lo + 1
        start.append(lo)
        limit.append(hi)
        strides.append(step)
    if flip:
        x = apply("rev", x, axes=tuple(flip))
    if (start, limit, strides) != ([0] * len(shape), list(shape), [1] * len(shape)):
        x = apply("slice", x, start=tuple(start), limit=tuple(limit), strides=tuple(strides))
    return x


def _dynamic_take(x: Any, axis: int, index: Tracer) -> Any:
    shape = shape_of(x)
    starts = [np.asarray(0, np.int64)] * len(shape)
    starts[axis] = as_operand(index, np.int64)
    sizes = tuple(1 if a == axis else d for a, d in enumerate(shape))
    return apply("dynamic_slice", x, *starts, sizes=sizes)


def _advanced(x: Any, entries: list[Any]) -> Any:
    """Integer-array indexing on ``x`` whose static slices are already applied."""
    shape = shape_of(x)
    adv_axes = [a for a, e in enumerate(entries) if not isinstance(e, slice)]
    rest_axes = [a for a in range(len(shape)) if a not in adv_axes]
    # ints take part in advanced indexing (they broadcast as 0-d index arrays); static ints
    # were already sliced to length 1, so they index position 0 now
    indices = [np.asarray(0) if _static_int(entries[a]) else entries[a] for a in adv_axes]
    index_shape = broadcast_shapes("indexing", *indices)
    flat = None
    stride = 1
    for axis, idx in reversed(list(zip(adv_axes, indices))):
        dim = shape[axis]
        idx = broadcast_to_shape(as_operand(idx, np.int64), index_shape)
        idx = where(less(idx, 0), add(idx, dim), idx)  # negative indices count from the end
        term = multiply(idx, stride) if stride != 1 else idx
        flat = term if flat is None else add(flat, term)
        stride *= dim
    view = transpose(x, adv_axes + rest_axes)
    view = reshape(view, (stride, *(shape[a] for a in rest_axes)))
    result = apply("gather", view, as_operand(flat, np.int64), axis=0)
    consecutive = adv_axes == list(range(adv_axes[0], adv_axes[-1] + 1))
    if consecutive and adv_axes[0] > 0:  # NumPy keeps the index dims where the indices were
        k, p = len(index_shape), adv_axes[0]
        n = len(shape_of(result))
        order = list(range(k, k + p)) + list(range(k)) + list(range(k + p, n))
        result = transpose(result, order)
    return result


class IndexUpdateHelper:
    """``x.at[index]``: functional updates returning a new array (the JAX idiom).

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.trace(lambda x: x.at[np.array([0, 0, 2])].add(1.0), np.zeros(3))
    >>> f(np.zeros(3)).tolist()
    [2.0, 0.0, 1.0]
    """

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> _IndexRef:
        return _IndexRef(self.array, index)


class _IndexRef:
    def __init__(self, array: Any, index: Any):
        self.array = as_operand(array)
        self.index = index

    def get(self) -> Any:
        """``x[index]``."""
        return getitem(self.array, self.index)

    def set(self, values: Any) -> Any:
        """A copy of x with ``x[index] = values``."""
        return self._update(values, None)

    def add(self, values: Any) -> Any:
        """A copy of x with ``x[index] += values``; repeated indices accumulate."""
        return self._update(values, "add")

    def multiply(self, values: Any) -> Any:
        """A copy of x with ``x[index] *= values``; repeated indices accumulate."""
        return self._update(values, "mul")

    mul = multiply

    def min(self, values: Any) -> Any:
        """A copy of x with ``x[index] = minimum(x[index], values)``."""
        return self._update(values, "min")

    def max(self, values: Any) -> Any:
        """A copy of x with ``x[index] = maximum(x[index], values)``."""
        return self._update(values, "max")

    def _update(self, values: Any, op: str | None) -> Any:
        x = self.array
        dtype = x.dtype
        values = as_operand(values, dtype)
        box = _box(x, self.index)
        if box is not None:
            starts, sizes, kept = box
            region_shape = tuple(s for s, keep in zip(sizes, kept) if keep)
            update = reshape(broadcast_to_shape(values, region_shape), sizes)
            if op is not None:
                region = apply("dynamic_slice", x, *starts, sizes=sizes)
                update = _combine(op, region, update)
            return apply("dynamic_update_slice", x, update, *starts)
        size = int(np.prod(shape_of(x), dtype=np.int64))
        positions = getitem(np.arange(size).reshape(shape_of(x)), self.index)
        flat_values = reshape(broadcast_to_shape(values, shape_of(positions)), (-1,))
        flat_positions = reshape(positions, (-1,))
        flat_x = reshape(x, (-1,))
        if op is None:
            updated = soacs.scatter(flat_x, flat_positions, flat_values)
        else:
            updated = soacs.hist(flat_x, op, _NEUTRAL[op](dtype), flat_positions, flat_values)
        return reshape(updated, shape_of(x))


_NEUTRAL = {
    "add": lambda dtype: np.zeros((), dtype),
    "mul": lambda dtype: np.ones((), dtype),
    "min": lambda dtype: np.asarray(np.inf if dtype.kind == "f" else np.iinfo(dtype).max, dtype),
    "max": lambda dtype: np.asarray(-np.inf if dtype.kind == "f" else np.iinfo(dtype).min, dtype),
}


_COMBINE = {"add": add, "mul": multiply, "min": minimum, "max": maximum}


def _combine(op: str, region: Any, update: Any) -> Any:
    return _COMBINE[op](region, update)


def _box(x: Any, index: Any) -> tuple[list[Any], tuple[int, ...], list[bool]] | None:
    """Start indices, sizes and kept axes when ``index`` selects one box, else None."""
    shape = shape_of(x)
    entries = _expand(index, len(shape))
    if any(e is None for e in entries):
        return None
    starts, sizes, kept = [], [], []
    for axis, (entry, dim) in enumerate(zip(entries, shape)):
        if isinstance(entry, slice):
            lo, hi, step = entry.indices(dim)
            if step != 1:
                return None
            starts.append(np.asarray(lo, np.int64))
            sizes.append(max(hi - lo, 0))
            kept.append(True)
        elif _static_int(entry):
            if not -dim <= entry < dim:
                raise QdiffError(f"index {entry} is out of bounds for axis {axis} with size {dim}")
            starts.append(np.asarray(int(entry) % dim, np.int64))
            sizes.append(1)
            kept.append(False)
        elif isinstance(entry, Tracer) and entry.ndim == 0 and entry.dtype.kind in "iu":
            starts.append(as_operand(entry, np.int64))
            sizes.append(1)
            kept.append(False)
        else:
            return None
    return starts, tuple(sizes), kept


def take(x: Any, indices: Any, axis: int | None = None) -> Any:
    """Elements of ``x`` at ``indices`` along ``axis`` (NumPy's take, without wrap modes).

    As in NumPy, ``axis=None`` (the default) takes from the flattened array.

    >>> import qdiff.numpy as qnp
    >>> qnp.take(np.arange(12).reshape(4, 3), [1, 3]).tolist()
    [1, 3]
    """
    x = as_operand(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    ndim = len(shape_of(x))
    if not -ndim <= axis < ndim:
        raise TypeCheckError(f"take: axis {axis} is out of range for {ndim} dimensions")
    index = [slice(None)] * ndim
    index[axis % ndim] = as_operand(indices, np.int64)
    return getitem(x, tuple(index))
