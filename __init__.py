"""Extension entry point: Blender loads this package as ``bl_ext.<repo>.itasc_ik``.

It only hands register/unregister on to the add-on package. Outside Blender the
repository root is not a package (``import solver`` works with numpy alone), so
the relative import is skipped when this file is not loaded as a package.
"""

if __package__:
    from .itasc_addon import register, unregister  # noqa: F401
