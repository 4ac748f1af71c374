"""Body of test_addon_panels: what each sidebar panel draws in each state, and the operators' polls."""

import bpy

from . import addon
from .scenes import api, chain_rig, clear_scene

panels_module = addon("panels")


class Layout:
    """Records what a panel draws; stands in for the UI layout, which only exists while Blender
    draws a region."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False
        self.alignment = "EXPAND"

    def row(self, **kw):
        return Layout(self.log)

    column = row

    def label(self, text="", icon="NONE"):
        self.log.append(("label", text))

    def prop(self, data, name, **kw):
        getattr(data, name)                       # the property exists
        self.log.append(("prop", name))

    def operator(self, idname, **kw):
        module, name = idname.split(".")
        getattr(getattr(bpy.ops, module), name).get_rna_type()   # the operator exists
        self.log.append(("operator", idname))
        return type("Props", (), {})()


def draw_all():
    """{panel class name: what it drew, or None where its poll refused}."""
    out = {}
    for cls in panels_module.classes:
        if hasattr(cls, "poll") and not cls.poll(bpy.context):
            out[cls.__name__] = None
            continue
        log = []
        panel = type("PanelSelf", (), {"layout": Layout(log)})()  # draw() only uses self.layout
        cls.draw(panel, bpy.context)
        out[cls.__name__] = log
    return out


def draw_in(obj):
    with bpy.context.temp_override(object=obj, active_object=obj):
        return draw_all()


def draw_states():
    """Every panel drawn with nothing, an empty, a plain armature, a rig, the rig baked and the rig
    in simulation mode active; the operators' polls on an empty, and bake's message on the plain
    armature."""
    clear_scene()
    states = {}
    states["nothing"] = draw_in(None)
    empty = bpy.data.objects.new("empty", None)
    bpy.context.scene.collection.objects.link(empty)
    states["empty"] = draw_in(empty)
    arm = bpy.data.armatures.new("plain")
    plain = bpy.data.objects.new("plain", arm)
    bpy.context.scene.collection.objects.link(plain)
    states["no constraints"] = draw_in(plain)
    scene, rig, target = chain_rig(4, 10)
    states["rig"] = draw_in(rig)
    api.bake(rig, 1, 10)
    states["baked"] = draw_in(rig)
    rig.itasc.mode = "SIMULATION"
    rig.itasc.method = "PINV"
    states["simulation"] = draw_in(rig)
    polls = {}
    with bpy.context.temp_override(object=empty, active_object=empty):
        for name in ("solve_frame", "bake", "clear_bake", "live_preview"):
            polls[name] = getattr(bpy.ops.itasc, name).poll()
    with bpy.context.temp_override(object=plain, active_object=plain):
        try:
            bpy.ops.itasc.bake()
            polls["message"] = None
        except RuntimeError as err:
            polls["message"] = str(err)
    return {"states": states, "polls": polls}
