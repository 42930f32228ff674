"""STAND-IN `neuron-profile` (tests only): `view --output-format summary-json -n NEFF -s NTFF`.

Prints the summary JSON in the real tool's shape, {"<neff name>": {"total_time": s, ...}},
from the stand-in's JSON NTFF. The tests write an executable wrapper for it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="neuron-profile")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("view")
    v.add_argument("--output-format", required=True)
    v.add_argument("-n", dest="neff", required=True)
    v.add_argument("-s", dest="ntff", required=True)
    args = p.parse_args(argv)
    if args.output_format != "summary-json":
        print(f"stand-in neuron-profile: unsupported format {args.output_format}", file=sys.stderr)
        return 2
    try:
        neff = json.loads(Path(args.neff).read_text())
        ntff = json.loads(Path(args.ntff).read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"stand-in neuron-profile: {e}", file=sys.stderr)
        return 1
    if not (neff.get("standin") and ntff.get("standin")):
        print("stand-in neuron-profile: not a stand-in NEFF/NTFF", file=sys.stderr)
        return 1
    print("INFO: stand-in neuron-profile summarizing", Path(args.ntff).name, file=sys.stderr)
    print(json.dumps({Path(args.neff).stem: {"total_time": ntff["total_time"], **ntff["counters"]}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
