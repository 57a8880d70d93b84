"""Freed memory kept for reuse (``meanfield.threads.retain_freed_memory``, called at run start):
page faults of allocating and freeing the same large array again, with glibc's defaults and
after the call, each in a fresh process.

Large arrays are mapped and unmapped by glibc by default, so every new one faults its pages in
again; after the call they come from the heap and freed ones are kept.  Printed: minor page
faults over ``--repeats`` cycles of a ``--mb`` MB array (after one warm-up cycle), and their ratio.

    python benchmarks/bench_memory_reuse.py [--mb 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys

import numpy as np
from common import run_json, table


def faults(mb: int, repeats: int, retain: bool) -> dict:
    """Minor page faults of ``repeats`` allocate-and-free cycles (this process)."""
    from meanfield.threads import retain_freed_memory

    kept = retain_freed_memory() if retain else False
    n = mb * (1 << 20) // 8
    a = np.ones(n)  # the first cycle may fault in any case
    del a
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(repeats):
        a = np.ones(n)
        del a
    return {"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, "retained": kept}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", choices=["default", "retain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(faults(args.mb, args.repeats, args.worker == "retain")))
        return
    rows = {w: run_json([__file__, "--worker", w, "--mb", str(args.mb), "--repeats", str(args.repeats)])
            for w in ("default", "retain")}
    pages = args.repeats * args.mb * (1 << 20) // 4096
    print(table(["malloc", "minor faults", "per page allocated", "retained"],
                [[w, r["faults"], r["faults"] / pages, str(r["retained"])] for w, r in rows.items()]))
    print(f"ratio retain / default: {rows['retain']['faults'] / max(rows['default']['faults'], 1):.3g}")


if __name__ == "__main__":
    sys.exit(main())
