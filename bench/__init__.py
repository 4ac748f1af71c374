"""Side-by-side benchmarks of our engine against Blender's own IK solvers and IKPy: `python -m bench`."""
