"""Live preview: frame changes and target moves pose the rig in simulation mode, without keys,
and it stands aside during a bake."""

import pytest

from tests.addon.test_addon_scenes import SCENES
from tools.blender_session import run_in_blender

pytestmark = pytest.mark.blender

LIVE = r'''
clear_scene()
scene, rig, target = chain_rig(6, 48)
with bpy.context.temp_override(object=rig, active_object=rig):
    started = bpy.ops.itasc.live_preview()
on = rig.itasc.live_preview
muted = rig.pose.bones[-1].constraints[0].mute
def tip_error(goal=None):
    dg = bpy.context.evaluated_depsgraph_get()
    re = rig.evaluated_get(dg)
    pb = re.pose.bones[-1]
    tail = re.matrix_world @ pb.matrix @ Vector((0.0, pb.bone.length, 0.0))
    return (tail - (goal or target.evaluated_get(dg).matrix_world.translation)).length


errors = []
for f in range(1, 49):
    scene.frame_set(f)                         # frame_change_post advances the simulation one step
    errors.append(tip_error())
keys_after_scrub = len(keys_module.Channels(rig).all())
# Move the (unanimated) target by hand at a fixed frame: depsgraph updates re-solve.
target.constraints[0].mute = True
for frac in (0.2, 0.4, 0.6, 0.8, 1.0):
    target.location = (1.5 * frac, 1.0, 3.5)
    bpy.context.view_layer.update()
after_move = tip_error(Vector((1.5, 1.0, 3.5)))
with bpy.context.temp_override(object=rig, active_object=rig):
    stopped = bpy.ops.itasc.live_preview()
result = {"started": list(started), "on": on, "muted": muted, "errors": errors, "keys": keys_after_scrub,
          "after_move": after_move, "stopped": list(stopped), "off": rig.itasc.live_preview}
'''


def test_live_preview_tracks_the_target_while_scrubbing_and_when_it_moves(extension_zip):
    r = run_in_blender(SCENES + LIVE, extension_zip=extension_zip)
    assert r["started"] == ["FINISHED"] and r["on"] and r["muted"]
    assert r["keys"] == 0                              # live preview poses, it does not key
    errors = r["errors"]
    print(f"\nlive preview (simulation) while scrubbing 48 frames: max tip error {max(errors):.3g}, "
          f"median {sorted(errors)[24]:.3g}; after moving the target by hand: {r['after_move']:.3g}")
    assert max(errors) < 0.1                           # simulation follows with a small lag (~1% of reach)
    assert r["after_move"] < 1e-5                    # a hand move within a frame converges
    assert r["stopped"] == ["FINISHED"] and not r["off"]
