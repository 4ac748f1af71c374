"""`python -m solver batch {ik,scale,subjects,fly,retarget} ...`: the command line of the batch runner."""

from __future__ import annotations

import sys


def add_parser(commands) -> None:
    batch = commands.add_parser(
        "batch", help="solve many trials on Dask: a LocalCluster, or a cluster with --scheduler",
        fromfile_prefix_chars="@",
        description="Solve every trial with one setup, in parallel on Dask distributed. Trials are files or "
                    "folders (searched recursively); @FILE reads more arguments, one per line, from FILE.")
    kinds = batch.add_subparsers(dest="kind", required=True)
    ik = kinds.add_parser("ik", help="marker IK: an InverseKinematicsTool setup as template, .trc/.c3d trials",
                          fromfile_prefix_chars="@")
    ik.add_argument("setup", help="the template setup .xml (its model, tasks and accuracy serve every trial)")
    ik.add_argument("trials", nargs="+", help=".trc/.c3d files or folders")
    ik.add_argument("--setup-time-range", action="store_true",
                    help="solve the template's time_range of every trial (default: each whole trial)")
    ik.add_argument("--warm-start", choices=("previous", "none"), default="previous")
    scale = kinds.add_parser("scale", help="OpenSim's Scale tool: ScaleTool setups, one per subject",
                             fromfile_prefix_chars="@")
    scale.add_argument("trials", nargs="+", help="ScaleTool setup .xml files or folders (other .xml files in "
                                                 "folders are passed over)")
    subjects = kinds.add_parser("subjects", help="scale then marker IK per subject folder",
                                fromfile_prefix_chars="@",
                                description="Each folder holding a ScaleTool setup is a subject: its setup is run, "
                                            "then every other .trc/.c3d of the folder is solved by marker IK on the "
                                            "subject's marker-placed model.")
    subjects.add_argument("trials", nargs="+", help="subject folders, or folders of them")
    subjects.add_argument("--ik-setup", help="the IK setup template for subjects whose folder has none (its tasks "
                                             "and accuracy; its model is replaced by the subject's)")
    subjects.add_argument("--warm-start", choices=("previous", "none"), default="previous")
    fly = kinds.add_parser("fly", help="the fly's leg pipeline on keypoint pickles", fromfile_prefix_chars="@")
    fly.add_argument("trials", nargs="+", help=".pkl keypoint files or folders")
    fly.add_argument("--rate", type=float, default=100.0, help="frame rate of the keypoints (Hz), for the time column")
    fly.add_argument("--method", default="sequential", choices=("sequential", "sequential-iterative", "whole_chain"))
    retarget = kinds.add_parser("retarget", help="BVH clips retargeted onto one rig in Blender (bpy)",
                                fromfile_prefix_chars="@",
                                description="Each clip is imported by Blender's BVH importer into a copy of the rig's "
                                            ".blend and retargeted onto the rig (the add-on's api.retarget) by the "
                                            "Blender each worker keeps; the .blend and a JSON report per clip.")
    retarget.add_argument("rig_file", metavar="RIG.blend", help="the .blend holding the target rig")
    retarget.add_argument("trials", nargs="+", help=".bvh clips or folders")
    retarget.add_argument("--rig", help="the rig's object name (default: the file's only armature)")
    retarget.add_argument("--scale", type=float, default=1.0, help="the BVH importer's scale: scene units per "
                                                                   "BVH unit (default 1)")
    retarget.add_argument("--calibration-frame", type=int, help="the frame whose source pose the rig's rest pose "
                                                                "matches (default: the first)")
    retarget.add_argument("--bone-map", help="a bone map JSON file (the panel's Save; default: mapped from the "
                                             "skeletons)")
    retarget.add_argument("--blender-python", help="a Python with bpy (default: this one)")
    for p in (ik, scale, subjects, fly, retarget):
        p.add_argument("-o", "--output-dir", required=True, help="where every trial's outputs and the summary go")
        p.add_argument("--pattern", action="append", help="file pattern to take from folders (repeatable; "
                                                          "default *.trc and *.c3d (ik, subjects' trials), *.xml "
                                                          "(scale), *.pkl (fly), *.bvh (retarget))")
        p.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://host:8786); "
                                           "default: a LocalCluster on this machine")
        p.add_argument("--workers", type=int, help="LocalCluster workers (default: one per core)")
        p.add_argument("--resume", action="store_true",
                       help="skip trials whose outputs are newer than the trial, the setup and the model")
        p.add_argument("--only-failed", action="store_true", help="solve only the trials whose last run failed")
        p.add_argument("--time-limit", type=float, help="seconds one trial may take before it is stopped as failed")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress line")


def run(args, out=None) -> int:
    """Exit status: 0 all done, 1 some trial failed (or bad arguments), 130 interrupted."""
    out = out or sys.stdout
    from .plan import find_trials, fly_specs, ik_specs, retarget_specs, scale_specs
    from .runner import run_batch, start_fork_server
    if args.scheduler is None and args.kind != "retarget":      # retarget's workers are threads
        start_fork_server()                               # its imports run while the trials are planned
    options = dict(scheduler=args.scheduler, workers=args.workers, resume=args.resume, only_failed=args.only_failed,
                   time_limit=args.time_limit, progress=not args.quiet)
    try:
        if args.kind == "subjects":
            from .subjects import find_subjects
            subjects = find_subjects(args.trials, args.ik_setup, args.pattern)
            if not subjects:
                print("error: no ScaleTool setup found: no subject", file=sys.stderr)
                return 1
        else:
            trials = find_trials(args.kind, args.trials, args.pattern)
            if not trials:
                print("error: no trial files found", file=sys.stderr)
                return 1
            if args.kind == "ik":
                specs = ik_specs(args.setup, trials, keep_time_range=args.setup_time_range, warm_start=args.warm_start)
            elif args.kind == "scale":
                specs = scale_specs(trials)
            elif args.kind == "retarget":
                specs = retarget_specs(args.rig_file, trials, python=args.blender_python, rig=args.rig, scale=args.scale,
                                       calibration_frame=args.calibration_frame, bone_map=args.bone_map)
            else:
                specs = fly_specs(trials, rate=args.rate, method=args.method)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        return 1
    if args.kind == "subjects":
        from .subjects import run_subjects
        scaled, solved, skipped = run_subjects(subjects, args.output_dir, warm_start=args.warm_start, **options)
        report(out, f"{len(subjects)} subjects scaled", scaled)
        report(out, f"{solved.trials} trials of the subjects scaled", solved)
        for name, why in skipped.items():
            print(f"not run: the trials of {name} ({why})", file=out)
        interrupted = scaled.interrupted or solved.interrupted
        return 130 if interrupted else (1 if scaled.failed or solved.failed or skipped else 0)
    result = run_batch(specs, args.output_dir, **options)
    report(out, f"{len(specs)} trials", result)
    return 130 if result.interrupted else (1 if result.failed else 0)


def report(out, what: str, result) -> None:
    print(f"{what}: {len(result.solved)} solved, {len(result.failed)} failed, "
          f"{len(result.skipped)} skipped, in {result.seconds:.1f} s on {result.workers} workers"
          + (" (interrupted)" if result.interrupted else ""), file=out)
    for name, message in result.failed.items():
        print(f"failed {name}: {message}", file=out)
    if result.summary is not None:
        print(f"summary: {result.summary}", file=out)
