"""Batches of trials on Dask `distributed`: `python -m solver batch ik SETUP.xml TRIALS...` (marker
IK, every .trc/.c3d trial solved with one setup as template), `python -m solver batch scale
SETUPS...` (OpenSim's Scale tool, one ScaleTool setup per subject), `python -m solver batch
subjects FOLDERS...` (per subject folder: scale, then marker IK on its trials with the scaled
model) `python -m solver batch fly KEYPOINTS...` (the fly's leg pipeline on every keypoint
file) and `python -m solver batch retarget RIG.blend CLIPS...` (BVH clips retargeted onto one
rig in Blender, a Blender process per worker), on a LocalCluster or an existing cluster (`--scheduler`).

    kinds.py       a trial of each kind: TrialSpec, solve_trial (outputs as bytes, failures as outcomes)
    groups.py      which trials share a task (short trials grouped)
    plan.py        finding trials, their names and per-trial setups, what is up to date (resume)
    runner.py      the Dask side: submit, collect, write outputs whole, summary CSV
    progress.py    the progress line (done / failed / left, time left)
    time_limit.py  the per-trial time limit inside a worker thread
    blender.py     the Python with bpy, and the Blender process a worker retargets clips in
    subjects.py    scale then IK per subject folder (two waves on one cluster)
    cli.py         the command line

Dask is imported only when a batch runs: `import solver` needs numpy alone.
"""

from .groups import group_specs
from .kinds import KINDS, Outcome, TrialSpec, output_names, solve_trial
from .plan import find_trials, fly_specs, ik_specs, retarget_specs, scale_specs, select, trial_setup_xml, up_to_date
from .runner import SUMMARY, BatchResult, local_cluster, run_batch

__all__ = ["group_specs", "KINDS", "Outcome", "TrialSpec", "output_names", "solve_trial", "find_trials", "fly_specs",
           "ik_specs", "retarget_specs", "scale_specs", "select", "trial_setup_xml", "up_to_date", "SUMMARY", "BatchResult", "local_cluster", "run_batch"]
