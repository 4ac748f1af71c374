"""A package's modules registered in order (each with its own `register` / `unregister`) and
unregistered in reverse, as `bpy.utils.register_classes_factory` does for classes."""


def modules_factory(modules):
    """(register, unregister) for `modules`."""

    def register():
        for module in modules:
            module.register()

    def unregister():
        for module in reversed(modules):
            module.unregister()

    return register, unregister
