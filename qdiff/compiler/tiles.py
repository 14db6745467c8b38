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


def tiles_level(tiles: list[RowTile], level: int) -> bool:
    """Whether the loop over ``level`` can be split into tiles for every one of ``tiles``:
    no matrix depends on it and BLAS has products to compute."""
    return bool(tiles) and all(level not in t.levels and t.summed > 0 and t.row > 0
                               for t in tiles)


def allocate_tiles(scope: Scope, tiles: list[RowTile], points: int) -> None:
    """The scratch tiles, once per call (at most `TILE_ROWS` rows, fewer for a short loop)."""
    rows = max(1, min(TILE_ROWS, points))
    for tile in tiles:
        scope.allocate(tile.points, None, (rows, tile.summed), tile.dtype)
        scope.allocate(tile.rows, None, (rows, tile.row), tile.dtype)


def write_tiled_loop(scope: Scope, tiles: list[RowTile], index: str, points: int,
                     tile_index: str, body: callable) -> None:
    """The loop of ``index`` over ``points`` as tiles: fill each scratch tile, one ``np.dot``
    per contraction, then ``body()`` (the nest's levels inside) once per point of the tile,
    with ``index`` and ``tile_index`` (its row in the tiles) set."""
    rows = max(1, min(TILE_ROWS, points))
    start, count = scope.fresh("p"), scope.fresh("n")
    with scope.src.block(f"for {start} in range(0, {points}, {rows})"):
        scope.line(f"{count} = min({rows}, {points} - {start})")
        with scope.src.block(f"for {tile_index} in range({count})"):
            scope.line(f"{index} = {start} + {tile_index}")
            for tile in tiles:
                for line in tile.fill:
                    scope.line(line)
        for tile in tiles:
            scope.line(f"np.dot({tile.points}[:{count}], {tile.weights}, {tile.rows}[:{count}])")
        with scope.src.block(f"for {tile_index} in range({count})"):
            scope.line(f"{index} = {start} + {tile_index}")
            body()
