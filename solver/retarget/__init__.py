"""Motion-capture retargeting by IK: a source motion (per role: world rotations and head positions,
e.g. from Blender's BVH or FBX import) onto a target rig of other proportions and rest pose, with
each foot contact held exactly on one world point for its whole span.

    roles.py        the role vocabulary (ROLES, ROLE_PARENT) both sides' bone maps share
    skeletons.py    Source, Target, ContactPoint; the Model a retarget moves (target_model)
    contacts.py     Span, detect_contacts (speed and height with hysteresis, ends trimmed where the
                    point rises), estimate_floor, Floor and fit_floor (the plane the contacts rest on)
    structure.py    structural_map: a bone map from the skeleton's hierarchy and rest pose
    calibration.py  per-role offsets that align the target's bones with the source's at one frame
    solve.py        the batched prioritized least-squares solve (hard tasks exact, soft ones in their null space)
    retarget.py     retarget(): the whole problem, RetargetResult

    result = retarget(Source(rotations, heads, fps), Target(bones, {"hips": "pelvis", ...}))
"""

from .roles import EFFECTOR_ROLES, LEG_ROLES, REQUIRED_ROLES, ROLE_PARENT, ROLES
from .contacts import ContactDetection, Floor, Span, detect_contacts, estimate_floor, fit_floor
from .skeletons import ContactPoint, Source, Target, TargetModel, default_contact_points, leg_length, target_model
from .structure import StructureMap, structural_map
from .calibration import Calibration, calibrate
from .retarget import RetargetResult, RetargetSettings, Weights, retarget

__all__ = [
    "ROLES", "ROLE_PARENT", "LEG_ROLES", "REQUIRED_ROLES", "EFFECTOR_ROLES",
    "Span", "ContactDetection", "detect_contacts", "estimate_floor", "Floor", "fit_floor",
    "Source", "Target", "ContactPoint", "TargetModel", "default_contact_points", "target_model", "leg_length",
    "StructureMap", "structural_map",
    "Calibration", "calibrate",
    "RetargetResult", "RetargetSettings", "Weights", "retarget",
]
