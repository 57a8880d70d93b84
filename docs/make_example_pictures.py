"""Draw one picture per example of runs/examples/ for the documentation's examples page.

    .venv/bin/python docs/make_example_pictures.py [--runs /tmp/meanfield-example-pictures] [--only NAME ...]

Each example runs shortened (a coarser mesh or an earlier ``t_final``, listed in
:data:`PICTURES`, so that the whole set takes minutes on a laptop), ``meanfield plot`` draws it,
and one of its pictures is shrunk into ``docs/_static/examples/<example>.png``.  The pictures
show what each example does, not its full-length result.  The run directories are left under
``--runs``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "runs" / "examples"
OUT = ROOT / "docs" / "_static" / "examples"
#: Width in pixels of the committed pictures.
WIDTH = 720

#: example -> (the --set overrides of its short run, the picture of `meanfield plot` to keep), or
#: None for an example that `meanfield plot` cannot draw yet (causal runs: a density per position)
PICTURES: dict[str, tuple[list[str], str] | None] = {
    "s1-clustering": (["mesh.resolution=512"], "spacetime.png"),
    "s1-clusters": (["mesh.resolution=512"], "spacetime.png"),
    "s1-feed-forward": (["mesh.resolution=256"], "spacetime.png"),
    "s1-long-time": (["mesh.resolution=256", "time.t_final=60", "time.outputs=120"], "spacetime.png"),
    "s1-transformer-validation": (["mesh.resolution=256"], "spacetime.png"),
    "s1-validation": (["mesh.resolution=256"], "spacetime.png"),
    "s2-clustering": ([], "density_final.png"),
    "s2-clusters": (["mesh.resolution=4"], "density_final.png"),
    "s2-long-time": (["time.t_final=16", "time.outputs=16"], "density_final.png"),
    "s2-rotation": (["mesh.resolution=4", "time.t_final=1.5707963267948966"], "density_final.png"),
    "s2-trained-looking": ([], "density_final.png"),
    "s2-transformer": ([], "density_final.png"),
    "s1-causal": None,
    "s2-causal": None,
}


def meanfield(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "meanfield.cli", *args], check=True, cwd=ROOT)


def shrink(source: Path, target: Path) -> None:
    """``source`` at :data:`WIDTH` pixels wide, as a palette PNG (small to commit)."""
    with Image.open(source) as image:
        image = image.convert("RGB")
        height = round(image.height * WIDTH / image.width)
        image = image.resize((WIDTH, height), Image.Resampling.LANCZOS)
        image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("/tmp/meanfield-example-pictures"),
                        help="where the short runs go")
    parser.add_argument("--only", nargs="*", help="examples to draw (default: all)")
    args = parser.parse_args()
    missing = sorted({p.stem for p in EXAMPLES.glob("*.toml")} - set(PICTURES))
    if missing:
        parser.error(f"no picture recipe for {missing}: add them to PICTURES")
    OUT.mkdir(parents=True, exist_ok=True)
    for name in args.only or sorted(PICTURES):
        recipe = PICTURES[name]
        if recipe is None:
            print(f"{name}: no picture yet (meanfield plot does not draw it)", flush=True)
            continue
        overrides, picture = recipe
        run_dir = args.runs / name
        sets = [x for o in overrides for x in ("--set", o)]
        meanfield("run", str(EXAMPLES / f"{name}.toml"), "--out", str(run_dir), "--overwrite", "--quiet", *sets)
        meanfield("plot", str(run_dir), "--no-movie")
        shrink(run_dir / "plots" / picture, OUT / f"{name}.png")
        print(f"wrote {OUT / name}.png", flush=True)


if __name__ == "__main__":
    main()
