"""Motion-capture retargeting in Blender: a source armature's motion (what Blender's BVH or FBX
importer makes) onto a target rig, by the engine's batched solve (`solver.retarget`) with foot
contacts held exactly, keys written as a bake writes them and measured by Blender.

Modules by role, lowest first: `bone_maps` (roles -> bone names, presets, JSON), `source`
(Blender's evaluation of an armature's bones into arrays), `target` (the bones a solve moves as
the engine's Target; bases that give bones chosen world matrices), `copy_rotations` (the
copy-rotation retarget, for contrast), `writing` (keys), `rigify_controls` (keys on a generated Rigify rig's
animator controls), `posed_keys` (keys that pose the solved bones, either way; the keypoint fit
writes through it too), `job` (one retarget in steps, measured); above them the UI: `properties`, `operators`, `panels`.
"""

from ..registration import modules_factory
from . import operators, panels, properties

register, unregister = modules_factory((properties, operators, panels))
