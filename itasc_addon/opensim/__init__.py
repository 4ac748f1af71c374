"""OpenSim marker IK in Blender: `importing` (.osim as an armature, .trc as marker empties),
`scaling` (OpenSim's Scale tool on an imported model), `solve` (bind, solve, bake, files), `properties` (what is kept on objects), `operators` and
`panels` (the UI). `register` / `unregister` register the three that hold Blender classes."""

from ..registration import modules_factory
from . import operators, panels, properties

register, unregister = modules_factory((properties, operators, panels))
