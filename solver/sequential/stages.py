"""A stage of sequential IK (solver.sequential) posed to the engine.

How a stage is solved. The stage's problem is posed to the engine as it stands: a Scene whose
model is the chain from the root to s_k (the ancestors of s_k: the chain grows stage by stage,
exactly as in the seed) with weight 0 on every coordinate outside Q_k, one CopyPose position task
from r_k to an object placed at m_k(f), and solve_animation over all frames at once. Weight 0 is
the engine's own way to freeze a coordinate (Wq = 0 removes its column from the update), so the
earlier stages' values pass through untouched and no reduced Jacobian is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import Model, Scene, Segment
from ..tasks import CopyPose, on_object, on_segment


@dataclass(frozen=True)
class Stage:
    """One stage: solve `coordinates` (indices or names from Model.coordinate_names) so that the
    `point` fixed to `segment` (index or name; point in the segment's frame) follows measured
    keypoint number `keypoint` (a column of the keypoints array, shape (F, K, 3))."""

    coordinates: tuple
    segment: int | str
    keypoint: int
    point: tuple = (0.0, 0.0, 0.0)
    name: str = ""


@dataclass
class StageProblem:
    """A stage posed to the engine: the chain up to the keypoint's segment (`columns`: which of
    the full model's coordinates it holds, in order) with everything but the stage frozen."""

    stage: Stage
    scene: Scene
    columns: np.ndarray          # sub-model coordinate i is full coordinate columns[i]
    solved: np.ndarray           # full indices of the stage's coordinates
    armature: int                # the full model's armature the chain belongs to


def _coordinate_index(model: Model, c) -> int:
    if isinstance(c, str):
        try:
            return model.coordinate_names.index(c)
        except ValueError:
            raise KeyError(f"no coordinate called '{c}'") from None
    c = int(c)
    if not 0 <= c < model.n_coordinates:
        raise IndexError(f"coordinate {c} is not in the model ({model.n_coordinates} coordinates)")
    return c


def stage_problem(model: Model, stage: Stage) -> StageProblem:
    """Build the engine scene of one stage (see the module docstring)."""
    seg = model.index(stage.segment) if isinstance(stage.segment, str) else int(stage.segment)
    solved = np.array(sorted({_coordinate_index(model, c) for c in stage.coordinates}), dtype=int)
    if solved.size == 0:
        raise ValueError(f"stage '{stage.name}' solves no coordinate")
    keep = np.flatnonzero(model.segment_ancestors[seg])                 # root .. seg, in tree order
    moving = model.moves[solved, seg]
    if not np.all(moving):
        names = [model.coordinate_names[c] for c in solved[~moving]]
        raise ValueError(f"stage '{stage.name}': coordinates {names} do not move segment "
                         f"'{model.names[seg]}', so this stage cannot solve them")
    new_index = {int(old): new for new, old in enumerate(keep)}
    segments, columns = [], []
    for old in keep:
        s = model.segments[old]
        joints = []
        for joint, first in zip(s.joints, model.joint_first[model.joint_segment == old]):
            cols = first + np.arange(joint.n_coordinates)
            columns.extend(cols.tolist())
            weight = tuple(float(w) if c in solved else 0.0 for c, w in zip(cols, joint.weight))
            joints.append(replace(joint, weight=weight))
        parent = new_index[s.parent] if s.parent >= 0 else -1
        segments.append(Segment(s.name, parent, s.rest, tuple(joints), s.length, s.post, armature=0))
    sub = Model(segments)
    task = CopyPose(on_segment(new_index[seg], stage.point), on_object(0), name=stage.name or "keypoint")
    return StageProblem(stage=stage, scene=Scene(sub, [task], n_objects=1), columns=np.array(columns, int),
                        solved=solved, armature=int(model.armature[seg]))
