"""The sidebar panels draw in every state, and the operators say why they cannot run."""

import pytest

from tests.addon.test_addon_scenes import SCENES
from tools.blender_session import run_in_blender

pytestmark = pytest.mark.blender

DRAW = r'''
panels_module = importlib.import_module("bl_ext.user_default.itasc_ik.itasc_addon.panels")


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


def draw_all(state):
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
        return draw_all(None)


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
result = {"states": states, "polls": polls}
'''


def test_panels_draw_for_every_state_and_operators_explain_their_poll(extension_zip):
    r = run_in_blender(SCENES + DRAW, extension_zip=extension_zip)
    s = r["states"]
    labels = lambda log: " ".join(text for kind, text in log if kind == "label")  # noqa: E731
    for state in ("nothing", "empty"):
        assert "Select an armature" in labels(s[state]["ITASC_PT_main"])
        assert s[state]["ITASC_PT_bake"] is None
    assert "No IK constraints" in labels(s["no constraints"]["ITASC_PT_main"])
    rig = s["rig"]
    assert ["operator", "itasc.bake"] in rig["ITASC_PT_bake"]
    assert ["operator", "itasc.solve_frame"] in rig["ITASC_PT_main"]
    assert "bone03 / IK" in labels(rig["ITASC_PT_constraints"])
    assert "Nothing solved yet" in labels(rig["ITASC_PT_result"])
    baked = labels(s["baked"]["ITASC_PT_result"])
    assert "Bake: 10 frame(s)" in baked and "Not converged: 0" in baked and "Max position error" in baked
    assert ["prop", "feedback"] in s["simulation"]["ITASC_PT_settings"]
    assert ["prop", "damping_max"] not in s["simulation"]["ITASC_PT_settings"]
    assert not any(r["polls"][n] for n in ("solve_frame", "bake", "clear_bake", "live_preview"))
    assert "no IK constraint" in r["polls"]["message"]
