"""Command line: `python -m solver demo` (see solver.examples.demo) and `python -m solver ik SETUP.xml`
(marker IK from an OpenSim InverseKinematicsTool setup, .trc or .c3d markers, see solver.opensim.ik),
`python -m solver scale SETUP.xml` (OpenSim's ScaleTool: model scaler and marker placer, see
solver.opensim.scale_tool) and
`python -m solver batch {ik,fly} ...` (many trials on Dask, see solver.batch)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solver", description="iTaSC IK engine")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a chain following a moving target, both solver modes")
    demo.add_argument("--bones", type=int, default=6)
    demo.add_argument("--frames", type=int, default=240)
    ik = commands.add_parser("ik", help="run an OpenSim InverseKinematicsTool setup file (marker IK): "
                                        "writes the .mot and the error reports it names")
    ik.add_argument("setup", help="the setup .xml (InverseKinematicsTool)")
    ik.add_argument("--output-dir", help="write every output here instead of where the setup says")
    ik.add_argument("--warm-start", choices=("previous", "none"), default="previous",
                    help="start frame f from frame f-1's solution as OpenSim does (default), or every frame "
                         "from the default pose")
    ik.add_argument("--cutoff", type=float, metavar="HZ",
                    help="refine all frames together with an acceleration penalty smoothing the coordinates to "
                         "about this cutoff (as the keypoint fit's; default: none, every frame alone as OpenSim)")
    ik.add_argument("--contacts", choices=("auto", "none"), default="none",
                    help="auto: hold the foot markers (on calcn/toes bodies) where they stand still and keep them "
                         "above the floor (default: none)")
    ik.add_argument("--floor", type=float, metavar="METRES", help="the floor's height along +Y for --contacts auto "
                                                                  "(default: estimated from the feet)")
    ik.add_argument("-v", "--verbose", action="store_true", help="one line per frame")
    scale = commands.add_parser("scale", help="run an OpenSim ScaleTool setup file: scales the model, places "
                                              "its markers, writes the files the setup names")
    scale.add_argument("setup", help="the setup .xml (ScaleTool)")
    scale.add_argument("--output-dir", help="write every output here instead of where the setup says")
    from .batch.cli import add_parser as add_batch_parser
    add_batch_parser(commands)
    args = parser.parse_args(argv)
    from . import keep_freed_memory
    keep_freed_memory()
    if args.command == "demo":
        from .examples.demo import run
        run(args.bones, args.frames)
    elif args.command == "ik":
        from .opensim.ik import cli
        return cli(args.setup, args.output_dir, args.warm_start, args.verbose, cutoff=args.cutoff,
                   contacts=None if args.contacts == "none" else args.contacts, floor=args.floor)
    elif args.command == "scale":
        from .opensim.scale_tool import cli as scale_cli
        return scale_cli(args.setup, args.output_dir)
    elif args.command == "batch":
        from .batch.cli import run as run_batch
        return run_batch(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
