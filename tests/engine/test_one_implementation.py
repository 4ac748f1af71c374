"""Each piece of the engine's math has one implementation: a walk over solver/ that fails where a
second forward kinematics, limit-locking update step or pseudo-inverse appears.

What counts (read from each module's syntax tree, so that comments and docstrings do not):

    forward kinematics   turning joint values into transforms (a call of a joint kind's `motion`,
                         the one source of joint transforms: joints.KINDS), or composing a
                         model's segments (reading its `rest` or `post` offsets, its FK `layout`,
                         `joint_groups` or `fixed_columns`)
    point Jacobians      building Jacobians from the coordinates' world directions and pivots
                         (a function that reads both `direction` and `pivot`, attributes or
                         arguments, and computes with them: w x (p - o), by operators
                         (also in place) or np.cross / np.multiply / np.subtract)
    the update step      a loop that clamps a step onto the joint limits and solves again
                         (`.limit(...)` and a `...solve...(...)` called inside one `for` / `while`):
                         the lock-and-solve-again of update.py
    a pseudo-inverse     a singular value decomposition with its vectors (np.linalg.svd without
                         compute_uv=False, or pseudoinverse.svd_by_gram)

The one place of each is named below; so is every copy still waiting to be folded into it (issue
#32), with what it is. The test fails on a copy not listed, and on a listed copy that is gone (so
that the list only shrinks, and says what is left)."""

import ast
from pathlib import Path

SOLVER = Path(__file__).resolve().parents[2] / "solver"
FK_ATTRIBUTES = {"layout", "joint_groups", "fixed_columns"}
MODEL_OFFSETS = {"rest", "post"}

FORWARD_KINEMATICS = {"kinematics.py", "joints.py"}     # the composition, and the kinds (JointKind.transform)
FORWARD_KINEMATICS_COPIES = {
    "restarts/chain.py": "the racing serial chain: its own product of the revolute kind's folded joints",
}
JACOBIAN = {"kinematics.py:coordinate_twists"}
JACOBIAN_COPIES: dict = {}
UPDATE_STEP = {"update.py:limited_step"}
UPDATE_STEP_COPIES: dict = {}
PSEUDO_INVERSE = {"pseudoinverse.py:solve", "pseudoinverse.py:_sdls"}
PSEUDO_INVERSE_COPIES = {"geometry.py:kabsch": "not an A#: the rotation of a rigid fit (Kabsch)"}


def _modules():
    for path in sorted(SOLVER.rglob("*.py")):
        yield path.relative_to(SOLVER).as_posix(), ast.parse(path.read_text(), str(path))


def _names_model(node) -> bool:
    """Whether an expression is a model object by its name (model, m, self.model, scene.model)."""
    if isinstance(node, ast.Name):
        return node.id in ("model", "m")
    return isinstance(node, ast.Attribute) and node.attr == "model"


def _composes(tree) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "motion":
            return True
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and (node.attr in FK_ATTRIBUTES
                                                or node.attr in MODEL_OFFSETS and _names_model(node.value)):
            return True
    return False


def _functions(tree):
    """(qualified name, function node) of every function, methods as Class.method."""
    methods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods.add(item)
                    yield f"{node.name}.{item.name}", item
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node not in methods:
            yield node.name, node


def _calls(node, predicate) -> bool:
    return any(isinstance(n, ast.Call) and predicate(n) for n in ast.walk(node))


def _is_limit(call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "limit"


def _reads_columns(function) -> bool:
    """Reads a pose's per-coordinate `direction` and `pivot` and computes with them."""
    names = {a.arg for a in function.args.args}
    names |= {n.attr for n in ast.walk(function) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}
    computes = any(isinstance(n, (ast.BinOp, ast.AugAssign)) and isinstance(n.op, (ast.Mult, ast.MatMult, ast.Sub))
                   or isinstance(n, ast.Call) and getattr(n.func, "attr", None) in ("cross", "multiply", "subtract")
                   for n in ast.walk(function))
    return {"direction", "pivot"} <= names and computes


def _is_solve(call) -> bool:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return "solve" in name


def _locks_limits(function) -> bool:
    """A loop that clamps onto the limits and solves again."""
    loops = [n for n in ast.walk(function) if isinstance(n, (ast.For, ast.While))]
    return any(_calls(loop, _is_limit) and _calls(loop, _is_solve) for loop in loops)


def _is_svd(call) -> bool:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name == "svd_by_gram":
        return True
    if name != "svd":
        return False
    return not any(k.arg == "compute_uv" and isinstance(k.value, ast.Constant) and k.value.value is False
                   for k in call.keywords)


def _found(check):
    found = set()
    for module, tree in _modules():
        for name, function in _functions(tree):
            if check(function):
                found.add(f"{module}:{name}")
    return found


def _innermost(found: set) -> set:
    """Drop a function whose nested function is found too (the nested one is the implementation)."""
    return {f for f in found if not any(g != f and g.startswith(f.split(":")[0] + ":") and
                                        g.split(":")[1].startswith(f.split(":")[1] + ".") for g in found)}


def test_one_forward_kinematics():
    found = {module for module, tree in _modules() if _composes(tree)}
    assert found - FORWARD_KINEMATICS - set(FORWARD_KINEMATICS_COPIES) == set(), \
        "a second forward kinematics: compose frames in kinematics.py, joint transforms in joints.KINDS"
    assert set(FORWARD_KINEMATICS_COPIES) - found == set(), "a listed copy is gone: take it off the list"
    assert FORWARD_KINEMATICS <= found


def test_one_point_jacobian():
    found = _innermost(_found(_reads_columns))
    assert found - JACOBIAN - set(JACOBIAN_COPIES) == set(), \
        "a second point Jacobian: use kinematics.point_jacobian (or coordinate_twists) on the pose"
    assert set(JACOBIAN_COPIES) - found == set(), "a listed copy is gone: take it off the list"
    assert JACOBIAN <= found


def test_one_update_step():
    found = _found(_locks_limits)
    assert found - UPDATE_STEP - set(UPDATE_STEP_COPIES) == set(), "a second update step: call update.limited_step"
    assert set(UPDATE_STEP_COPIES) - found == set(), "a listed copy is gone: take it off the list"
    assert UPDATE_STEP <= found


def test_one_pseudo_inverse():
    found = _found(lambda f: _calls(f, _is_svd))
    assert found - PSEUDO_INVERSE - set(PSEUDO_INVERSE_COPIES) == set(), \
        "a second pseudo-inverse: call pseudoinverse.solve"
    assert set(PSEUDO_INVERSE_COPIES) - found == set(), "a listed copy is gone: take it off the list"
    assert PSEUDO_INVERSE <= found


def test_the_criteria_see_a_copy():
    """The checks above would catch a copy: a module with a Rodrigues-built forward pass, an update
    with its own limit loop and an SVD of its own."""
    source = '''
def jacobian(pose, points):
    return pose.direction * (points - pose.pivot)

def crossed(pose, points):
    return np.cross(pose.direction, points) + np.cross(pose.pivot, pose.direction)

def in_place(direction, pivot, points):
    out = np.array(points)
    out -= pivot
    return out, direction

def fk(model, q, kind, prepared):
    R = kind.motion(q, prepared)[0]
    return model.rest @ R

def step(scene, q, A, b):
    for _ in range(3):
        q = scene.limit(q + solve(A, b))
    return q

def solve(A, b):
    import numpy as np
    U, s, Vt = np.linalg.svd(A)
    return Vt.T @ ((U.T @ b) / s)
'''
    tree = ast.parse(source)
    assert _composes(tree)
    functions = dict(_functions(tree))
    assert _reads_columns(functions["jacobian"]) and not _reads_columns(functions["fk"])
    assert _reads_columns(functions["crossed"]) and _reads_columns(functions["in_place"])
    assert _locks_limits(functions["step"]) and not _locks_limits(functions["solve"])
    assert _calls(functions["solve"], _is_svd) and not _calls(functions["step"], _is_svd)
    assert not _calls(ast.parse("np.linalg.svd(A, compute_uv=False)"), _is_svd)
