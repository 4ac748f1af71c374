"""OpenSim marker IK in Blender: `importing` (.osim as an armature, .trc as marker empties),
`scaling` (OpenSim's Scale tool on an imported model), `solve` (bind, solve, bake, files), `properties` (what is kept on objects), `operators` and
`panels` (the UI). `register` / `unregister` register the three that hold Blender classes."""

from . import operators, panels, properties

_modules = (properties, operators, panels)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
