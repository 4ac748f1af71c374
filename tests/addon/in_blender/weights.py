"""Body of test_addon_weights: weighted IK constraints, Blender's iTaSC against our bake."""

import bpy

from .scenes import api, clear_scene


def weighted_pair(ratio):
    """Two IK constraints on the tip of three unit bones, weights 1 and `ratio`, aimed at targets
    1 apart that it cannot both reach: Blender's iTaSC (animation mode, run to convergence)
    first, then our bake; both tails as Blender evaluates them."""
    clear_scene()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 2
    rig = bpy.data.objects.new("pair", bpy.data.armatures.new("pair"))
    scene.collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    parent = None
    for i in range(3):
        b = rig.data.edit_bones.new(f"b{i}")
        b.head, b.tail, b.parent, b.use_connect = (0, 0, i), (0, 0, i + 1), parent, parent is not None
        parent = b
    bpy.ops.object.mode_set(mode="OBJECT")
    rig.pose.ik_solver = "ITASC"
    p = rig.pose.ik_param
    p.mode, p.precision, p.iterations, p.solver = "ANIMATION", 1e-9, 20000, "SDLS"
    for k, (where, weight) in enumerate((((1.0, 0.0, 2.0), 1.0), ((1.0, 1.0, 2.0), ratio))):
        goal = bpy.data.objects.new(f"goal{k}", None)
        goal.location = where
        scene.collection.objects.link(goal)
        con = rig.pose.bones["b2"].constraints.new("IK")
        con.target, con.chain_count, con.weight, con.use_rotation = goal, 3, weight, False

    def tail(frame):
        scene.frame_set(frame)
        ev = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        return list(ev.matrix_world @ ev.pose.bones["b2"].tail)

    theirs = tail(1)
    api.bake(rig, 1, 2)
    return {"theirs": theirs, "ours": tail(1)}
