"""Point tiles: a row contraction inside a loop nest computed for a tile of points at once,
as one BLAS matrix product.

A nest over (components, points, row) whose body contracts each point's values with a
matrix that does not depend on the point (GMM's Q_k (x_i − μ_k) inside the loop over k)
computes that product one point at a time, a d×d matrix-vector product at a few GFLOP/s.
Split the level of the points into tiles of `TILE_ROWS`: for each tile, the point operand's
values are written into a scratch tile ``A`` (tile rows × summed index, members of the nest
recomputed as before), ``R = A @ W`` is one ``np.dot`` (BLAS gemm in Numba), and the rest of
the nest's body runs point by point as before, reading its row of ``R``. Scratch tiles are
allocated once per call (`Scope.allocate`, before any enclosing sequential loop).

The products are then summed in BLAS's order rather than one at a time from zero, so
results agree with the row-at-a-time form to rounding, not bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .lowering import Scope

# rows of one tile: A (tile × summed) and R (tile × row) stay in cache next to the matrix
# (32 KB at d = 64), and each gemm is large enough for BLAS to run at full speed
TILE_ROWS = 128


@dataclass
class RowTile:
    """One row contraction of a nest that may be tiled."""

    fill: list[str]        # statements writing one point's summed values into A[tile, :]
    weights: str           # the point-independent matrix for the current outer indices
    levels: set[int]       # the nest levels the matrix depends on (the tiled one must not be)
    points: str            # scratch tile of the point operand (TILE_ROWS × summed)
    rows: str              # scratch tile of the results (TILE_ROWS × row)
    summed: int            # length of the summed index
    row: int               # length of the row
    dtype: np.dtype


@dataclass
class PointProductTile:
    """One point product of a nest (`fusion.point_product`): the nest's body writes each
    point's rows of both operands into the tiles ``left`` and ``right``; after a tile,
    ``target[kept] += left[:n].T @ right[:n]`` (through the scratch ``product``)."""

    left: str              # scratch tile of the operand giving the result's rows
    right: str             # and of the one giving its columns
    product: str           # one tile's product (rows × columns)
    target: str            # the result
    kept: list[str]        # index expressions of the result's leading axes
    levels: set[int]       # the nest levels summed over (the tiled one must be all of them)
    rows: int
    columns: int
    dtype: np.dtype

    def accumulate(self, count: str) -> list[str]:
        """Statements adding the product of the tiles' first ``count`` rows into the
        result (``count`` "1": the one row of the untiled form, an outer product).

        >>> gram = PointProductTile("l", "r", "s", "out", ["k"], {1}, 8, 8, np.float64)
        >>> print("\\n".join(gram.accumulate("n")))
        np.dot(l[:n].T, r[:n], s)
        for u_s in range(8):
            for v_s in range(8):
                out[k, u_s, v_s] = out[k, u_s, v_s] + s[u_s, v_s]
        """
        u, v = "u_" + self.product, "v_" + self.product
        cell = f"{self.target}[{', '.join([*self.kept, u, v])}]"
        if count == "1":
            term = f"{self.left}[0, {u}] * {self.right}[0, {v}]"
            lines = []
        else:
            term = f"{self.product}[{u}, {v}]"
            lines = [f"np.dot({self.left}[:{count}].T, {self.right}[:{count}], {self.product})"]
        return [*lines, f"for {u} in range({self.rows}):",
                f"    for {v} in range({self.columns}):",
                f"        {cell} = {cell} + {term}"]


def tiles_level(tiles: list[RowTile | PointProductTile], level: int) -> bool:
    """Whether the loop over ``level`` can be split into tiles for every one of ``tiles``:
    no row contraction's matrix depends on it, every point product sums over it alone,
    and BLAS has products to compute.

    >>> gram = PointProductTile("l", "r", "s", "out", ["k"], {1}, 8, 8, np.dtype("float64"))
    >>> tiles_level([gram], 1), tiles_level([gram], 0)
    (True, False)
    """
    return bool(tiles) and all(
        level not in t.levels and t.summed > 0 and t.row > 0 if isinstance(t, RowTile)
        else t.levels == {level} for t in tiles)


def allocate_tiles(scope: Scope, tiles: list[RowTile | PointProductTile], rows: int) -> None:
    """The scratch tiles of ``rows`` rows, once per call (`Scope.allocate`: before any
    sequential loop around the nest).

    >>> from qdiff.compiler.lowering import Options, Scope
    >>> from qdiff.compiler.source import Source
    >>> import qdiff
    >>> scope = Scope(Source(), Options(), qdiff.trace(lambda x: x, 1.0), ["a0"])
    >>> allocate_tiles(scope, [PointProductTile("l", "r", "s", "o", [], {0}, 3, 2,
    ...                                         np.dtype("float64"))], 128)
    >>> [line.strip() for line in scope.src.lines]
    ['l = np.empty((128, 3,), np.float64)', 'r = np.empty((128, 2,), np.float64)', \
's = np.empty((3, 2,), np.float64)']
    """
    for tile in tiles:
        if isinstance(tile, RowTile):
            scope.allocate(tile.points, None, (rows, tile.summed), tile.dtype)
            scope.allocate(tile.rows, None, (rows, tile.row), tile.dtype)
        else:
            scope.allocate(tile.left, None, (rows, tile.rows), tile.dtype)
            scope.allocate(tile.right, None, (rows, tile.columns), tile.dtype)
            scope.allocate(tile.product, None, (tile.rows, tile.columns), tile.dtype)


def tile_rows(points: int) -> int:
    """Rows of a tile over a loop of ``points`` (at most `TILE_ROWS`).

    >>> tile_rows(10000), tile_rows(37), tile_rows(0)
    (128, 37, 1)
    """
    return max(1, min(TILE_ROWS, points))


def write_tiled_loop(scope: Scope, tiles: list[RowTile | PointProductTile], index: str,
                     points: int, tile_index: str, body: Callable[[], None]) -> None:
    """The loop of ``index`` over ``points`` as tiles: fill each row contraction's scratch
    tile, one ``np.dot`` per contraction, then ``body()`` (the nest's levels inside) once
    per point of the tile, with ``index`` and ``tile_index`` (its row in the tiles) set,
    then one ``np.dot`` per point product.

    >>> from qdiff.compiler.lowering import Options, Scope
    >>> from qdiff.compiler.source import Source
    >>> import qdiff
    >>> scope = Scope(Source(), Options(), qdiff.trace(lambda x: x, 1.0), ["a0"])
    >>> tile = RowTile(["A[t, 0] = x[i]"], "W", set(), "A", "R", 1, 2, np.dtype("float64"))
    >>> write_tiled_loop(scope, [tile], "i", 300, "t", lambda: scope.line("y[i] = R[t, 0]"))
    >>> print("\\n".join(line[4:] for line in scope.src.lines))
    for p1 in range(0, 300, 128):
        n2 = min(128, 300 - p1)
        for t in range(n2):
            i = p1 + t
            A[t, 0] = x[i]
        np.dot(A[:n2], W, R[:n2])
        for t in range(n2):
            i = p1 + t
            y[i] = R[t, 0]
    """
    rows = tile_rows(points)
    row_tiles = [t for t in tiles if isinstance(t, RowTile)]
    start, count = scope.fresh("p"), scope.fresh("n")
    with scope.src.block(f"for {start} in range(0, {points}, {rows})"):
        scope.line(f"{count} = min({rows}, {points} - {start})")
        if row_tiles:
            with scope.src.block(f"for {tile_index} in range({count})"):
                scope.line(f"{index} = {start} + {tile_index}")
                for tile in row_tiles:
                    for line in tile.fill:
                        scope.line(line)
        for tile in row_tiles:
            scope.line(f"np.dot({tile.points}[:{count}], {tile.weights}, {tile.rows}[:{count}])")
        with scope.src.block(f"for {tile_index} in range({count})"):
            scope.line(f"{index} = {start} + {tile_index}")
            body()
        for tile in tiles:
            if isinstance(tile, PointProductTile):
                for line in tile.accumulate(count):
                    scope.line(line)
