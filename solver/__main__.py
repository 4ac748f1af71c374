"""Command line: `python -m solver demo` (see solver.demo)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solver", description="iTaSC IK engine")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="a chain following a moving target, both solver modes")
    demo.add_argument("--bones", type=int, default=6)
    demo.add_argument("--frames", type=int, default=240)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run
        run(args.bones, args.frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
