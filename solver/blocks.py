"""The independent blocks of a scene's system: groups of output rows and coordinates such that
every row depends only on the coordinates of its own group (A is block diagonal up to a
permutation). Four limbs with a target each are four blocks; a chain whose tip and middle both
have targets is one.

A task's rows depend on the coordinates of every segment from its endpoints' segments up to
their roots, and on the coordinates it names itself (`Task.coordinates`). Rows and coordinates
linked that way, directly or through other tasks, form one block (a union-find over both).
Coordinates that no task moves belong to no block; rows that no coordinate moves (a target on
an object for a segment that cannot move) to none either.

SDLS (pseudoinverse.py) solves each block on its own. Its per-direction clamps depend on the
singular vectors themselves, not only on the subspaces they span, and two independent limbs with
(nearly) equal singular values have singular vectors that mix both limbs in whatever proportion
the rounding of A picks: the same frame evaluated twice with different rounding (one frame alone,
or in a batch) then took steps that differed far beyond the rounding. Within one block the
singular values of different limbs no longer meet, and each limb is damped by its own
singularity only, as Blender's iTaSC solves each IK tree on its own.

For a stack of F systems the blocks are gathered into one array (F, B, m, n) padded with zero
rows and columns, m and n the largest block's: zero rows and columns add only zero singular values,
which the pseudo-inverses drop, so the padded blocks' steps are their blocks' own.
"""

from __future__ import annotations

import numpy as np


class Blocks:
    """Row and column indices of B blocks, padded to the largest block: rows (B, m), columns
    (B, n), and masks of the real entries."""

    def __init__(self, row_groups, column_groups, n_columns: int):
        B = len(row_groups)
        m = max((len(r) for r in row_groups), default=0)
        n = max((len(c) for c in column_groups), default=0)
        self.count, self.shape = B, (m, n)
        self.n_columns = n_columns
        self.rows = np.zeros((B, m), dtype=int)
        self.columns = np.zeros((B, n), dtype=int)
        self.row_mask = np.zeros((B, m))
        self.column_mask = np.zeros((B, n), dtype=bool)
        for k, (r, c) in enumerate(zip(row_groups, column_groups)):
            self.rows[k, :len(r)], self.row_mask[k, :len(r)] = r, 1.0
            self.columns[k, :len(c)], self.column_mask[k, :len(c)] = c, True
        self.mask = self.row_mask[:, :, None] * self.column_mask[:, None, :]      # (B, m, n)
        self.flat = self.rows[:, :, None] * n_columns + self.columns[:, None, :]  # into A (M, n_columns) flattened
        self.scattered = self.columns[self.column_mask]                           # where block entries go in x
        self.sizes = np.array([min(len(r), len(c)) for r, c in zip(row_groups, column_groups)], dtype=int)

    def gather(self, A: np.ndarray, b: np.ndarray):
        """A (..., M, n), b (..., M) as blocks (..., B, m, n_block) and (..., B, m), zero-padded."""
        blocks = np.take(A.reshape(A.shape[:-2] + (-1,)), self.flat, axis=-1) * self.mask
        return blocks, np.take(b, self.rows, axis=-1) * self.row_mask

    def columns_of(self, values: np.ndarray) -> np.ndarray:
        """Per-column values (..., n) as the blocks' (..., B, n_block), zero-padded."""
        return np.take(values, self.columns, axis=-1) * self.column_mask

    def scatter(self, x_blocks: np.ndarray) -> np.ndarray:
        """Block steps (..., B, n_block) as one step (..., n): coordinates of no block stay 0."""
        x = np.zeros(x_blocks.shape[:-2] + (self.n_columns,))
        x[..., self.scattered] = x_blocks[..., self.column_mask]
        return x

    def smallest(self, s: np.ndarray) -> np.ndarray:
        """The smallest singular value of each system from its blocks' s (..., B, k): each block's
        own last one (its padding adds zeros past it), the least over the blocks."""
        return s[..., np.arange(self.count), np.maximum(self.sizes - 1, 0)].min(axis=-1, initial=np.inf)


def independent_blocks(scene) -> Blocks | None:
    """The scene's independent blocks (module docstring), or None where there are fewer than two
    (the system is solved whole) or a coupling maps the coordinates (every coordinate may then
    move every joint)."""
    if scene.coupling is not None:
        return None
    model, n = scene.model, scene.n_coordinates
    parent = list(range(n + scene.n_outputs))          # union-find: coordinates, then rows

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for k, task in enumerate(scene.constraints):
        moved = np.zeros(n, dtype=bool)
        for end in task.endpoints():
            if end.segment >= 0:
                moved |= model.segment_ancestors[end.segment, model.coordinate_segment]
        moved[list(task.coordinates())] = True
        members = [n + r for r in range(scene.rows[k], scene.rows[k + 1])] + np.flatnonzero(moved).tolist()
        for other in members[1:]:
            parent[root(other)] = root(members[0])
    groups: dict = {}
    for i in range(n + scene.n_outputs):
        groups.setdefault(root(i), []).append(i)
    row_groups, column_groups = [], []
    for members in groups.values():
        columns = [i for i in members if i < n]
        rows = [i - n for i in members if i >= n]
        if columns and rows:
            row_groups.append(rows)
            column_groups.append(columns)
    if len(row_groups) < 2:
        return None
    return Blocks(row_groups, column_groups, n)
