"""Test bodies that run inside Blender (bpy as a module), called by name from the host side with
`tools.blender_session.call_in_blender("module:function", **kwargs)`. They reach the extension as
a user's script does, through `bl_ext.user_default.itasc_ik`; what they return goes back as JSON."""
