"""Random kinematic trees with every joint kind, for the engine tests."""

from __future__ import annotations

import numpy as np

from solver.model import Model, Segment, prismatic, revolute, sphere, swing
from solver.rotations import exp_map


def random_transform(rng, scale=1.0):
    T = np.eye(4)
    T[:3, :3] = exp_map(rng.normal(size=3))
    T[:3, 3] = rng.normal(size=3) * scale
    return T


def random_joint(rng, name):
    kind = rng.integers(6)
    if kind == 0:
        return revolute(rng.normal(size=3), name=name)
    if kind == 1:
        return revolute(["X", "Y", "Z"][rng.integers(3)], name=name)
    if kind == 2:
        return prismatic(rng.normal(size=3), name=name)
    if kind == 3:
        return swing(name=name)
    if kind == 4:
        return sphere(name=name)
    return revolute("Y", name=name)


def random_tree(rng, n_segments=8, n_armatures=1, with_post=True) -> Model:
    """A random tree: each segment hangs from a random earlier segment of its armature (or is a
    root), with a random rest offset, 0-3 random joints and, sometimes, a random post transform."""
    segments = []
    per_armature = [[] for _ in range(n_armatures)]
    for i in range(n_segments):
        a = i % n_armatures
        choices = per_armature[a]
        parent = -1 if not choices or rng.random() < 0.15 else int(rng.choice(choices))
        joints = tuple(random_joint(rng, f"s{i}j{k}") for k in range(rng.integers(0, 4)))
        post = random_transform(rng, 0.3) if with_post and rng.random() < 0.3 else None
        segments.append(Segment(f"s{i}", parent, random_transform(rng), joints, float(rng.uniform(0.2, 1.5)),
                                post=post, armature=a))
        choices.append(i)
    return Model(segments)
