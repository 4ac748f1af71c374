"""Sequential (staged) inverse kinematics: grow the chain proximal to distal, one stage at a time.

Each stage k names the coordinates Q_k it solves and one keypoint: a point r_k fixed to segment
s_k, to be brought onto its measured world position m_k(f) in every frame f. Stage k solves

    min over q[Q_k]   || W_{s_k}(q) [r_k; 1] - m_k(f) ||^2      (per frame f)

with every coordinate outside Q_k held where it is: the earlier stages' values stay as solved,
later stages' coordinates keep their starting values (in the fly preset they do not move the
stage's keypoint at all). So the proximal keypoints are matched first and the distal joints
cannot trade their error away, unlike one solve of the whole chain against the last keypoint.

    stages.py   a stage (Stage) and the engine scene it is posed as (stage_problem)
    solve.py    solving a stage over all frames, warm-started (solve_stage), and all stages in
                order (sequential_ik)
"""

from .solve import WARM_STARTS, SequentialResult, sequential_ik, solve_stage
from .stages import Stage, StageProblem, stage_problem

__all__ = ["WARM_STARTS", "SequentialResult", "sequential_ik", "solve_stage", "Stage", "StageProblem",
           "stage_problem"]
