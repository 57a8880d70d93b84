"""Draw the documentation's pictures: one per example of runs/examples/, and the features'.

    .venv/bin/python docs/make_example_pictures.py [--runs /tmp/meanfield-example-pictures] [--only NAME ...]

Each example runs shortened (a coarser mesh or an earlier ``t_final``, listed in
:data:`PICTURES`, so that the whole set takes minutes on a laptop), ``meanfield plot`` draws it,
and one of its pictures is shrunk into ``docs/_static/examples/<example>.png``.  The retrieval
examples (:data:`RETRIEVALS`) run in full as the study their header states (``meanfield
response --retrieval``), and their ``retrieval.png`` is shrunk the same way; so do the studies of
:data:`STUDIES` (``meanfield phase``: ``phase.png``); the fit examples (:data:`FITS`) run
``meanfield fit`` in full and keep a pair's picture.  The pictures
show what each example does, not its full-length result.  The features' pictures
(:data:`FEATURES`: a hybrid run's observables, the plots' focus, particle clusters, a causal
run's attention, a validation study's errors, ParaView)
go to ``docs/_static/features/<name>.png``; the ParaView one is the run's own
``view-in-paraview.py`` under ``xvfb-run pvbatch`` (skipped, with a line, without ParaView).
The run directories are left under ``--runs``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "runs" / "examples"
OUT = ROOT / "docs" / "_static" / "examples"
FEATURES_OUT = ROOT / "docs" / "_static" / "features"
#: Width in pixels of the committed pictures.
WIDTH = 720

#: example -> (the --set overrides of its short run, the picture of `meanfield plot` to keep), or
PICTURES: dict[str, tuple[list[str], str]] = {
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
    "s2-random-init": ([], "density_final.png"),
    "s1-causal": ([], "positions.png"),
    "s2-causal": ([], "position_clusters.png"),
}


#: example -> the options of ``meanfield response EXAMPLE --retrieval`` that draw its picture
#: (retrieval.png; each under a minute of CPU time).
RETRIEVALS: dict[str, list[str]] = {
    "s1-lost-in-the-middle": ["--at", "0.5,1,2", "--modes", "1,2", "--codewords", "8"],
    "s1-clustered-prompt-retrieval": ["--at", "0.5,1,2", "--modes", "1,2,3"],
}

#: example -> (the study that draws its picture, without --out; the picture in the study directory)
STUDIES: dict[str, tuple[list[str], str]] = {
    "phase-diagram": (["phase", "runs/examples/phase-diagram.toml", "--betas", "0.5:8:16", "--at", "0:20:21",
                       "--d", "8,32,128", "--prompts", "32"], "phase.png"),
}


#: feature -> (the meanfield command that makes its run, without --out; its picture in the run directory)
FEATURES: dict[str, tuple[list[str], str]] = {
    "hybrid-observables": (["run", "runs/examples/s1-long-time.toml", "--set", "mesh.resolution=256",
                            "--set", "time.t_final=200", "--set", "time.outputs=100"], "plots/observables.png"),
    "focus": (["run", "runs/examples/s2-clusters.toml", "--set", "mesh.resolution=4", "--set", "atoms.capture=true",
               "--set", "output.xdmf=true"], "plots/density_final.png"),
    "particle-clusters": (["particles", "runs/examples/s2-clustering.toml", "--n", "10000"], "inner_products.png"),
    "causal-attention": (["run", "runs/examples/s1-causal.toml"], "plots/attention.png"),
    "causal-attending": (["run", "runs/examples/s1-causal.toml"], "plots/attending.png"),
    "validation-errors": (["validate", "runs/examples/s1-validation.toml", "--n", "500,2000,8000", "--seeds", "2",
                           "--set", "mesh.resolution=256"], "errors.png"),
}
#: The feature run that ParaView draws (docs/_static/features/paraview.png).
PARAVIEW_RUN = "focus"


#: example -> the picture of ``meanfield fit EXAMPLE`` (its [fit] table) to keep.
FITS: dict[str, str] = {
    "s1-fit-transport": "pair-1.png",
    "s1-fit-two-pairs": "pair-2.png",
    "s1-fit-turnpike": "controls.png",
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


def paraview(run_dir: Path) -> None:
    """The run's last output as its ``view-in-paraview.py`` draws it, into features/paraview.png."""
    if shutil.which("pvbatch") is None or shutil.which("xvfb-run") is None:
        print("no ParaView picture: pvbatch or xvfb-run is not installed (apt-get install paraview xvfb)")
        return
    picture = run_dir / "paraview.png"
    subprocess.run(["xvfb-run", "-a", "pvbatch", str(run_dir / "view-in-paraview.py"), str(picture)], check=True)
    shrink(picture, FEATURES_OUT / "paraview.png")
    print(f"wrote {FEATURES_OUT / 'paraview.png'}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("/tmp/meanfield-example-pictures"),
                        help="where the short runs go")
    parser.add_argument("--only", nargs="*", help="examples and features to draw (default: all)")
    args = parser.parse_args()
    recipes = (set(PICTURES), set(RETRIEVALS), set(STUDIES), set(FITS))
    missing = sorted({p.stem for p in EXAMPLES.glob("*.toml")}.difference(*recipes))
    if missing:
        parser.error(f"no picture recipe for {missing}: add them to PICTURES, RETRIEVALS, STUDIES or FITS")
    OUT.mkdir(parents=True, exist_ok=True)
    FEATURES_OUT.mkdir(parents=True, exist_ok=True)
    wanted = args.only or [*sorted(PICTURES), *sorted(RETRIEVALS), *sorted(STUDIES), *sorted(FITS), *FEATURES]
    for name in (n for n in wanted if n in FITS):
        run_dir = args.runs / name
        meanfield("fit", str(EXAMPLES / f"{name}.toml"), "--out", str(run_dir), "--overwrite", "--quiet")
        shrink(run_dir / FITS[name], OUT / f"{name}.png")
        print(f"wrote {OUT / name}.png", flush=True)
    for name in (n for n in wanted if n in RETRIEVALS):
        run_dir = args.runs / name
        meanfield("response", str(EXAMPLES / f"{name}.toml"), "--retrieval", *RETRIEVALS[name], "--out", str(run_dir),
                  "--overwrite", "--quiet")
        shrink(run_dir / "retrieval.png", OUT / f"{name}.png")
        print(f"wrote {OUT / name}.png", flush=True)
    for name in (n for n in wanted if n in STUDIES):
        command, picture = STUDIES[name]
        meanfield(*command, "--out", str(args.runs / name), "--overwrite", "--quiet")
        shrink(args.runs / name / picture, OUT / f"{name}.png")
        print(f"wrote {OUT / name}.png", flush=True)
    for name in (n for n in wanted if n in FEATURES):
        command, picture = FEATURES[name]
        run_dir = args.runs / name
        meanfield(*command, "--out", str(run_dir), "--overwrite", "--quiet")
        if picture.startswith("plots/"):  # a picture of `meanfield plot` (a study draws its own)
            meanfield("plot", str(run_dir), "--no-movie", "--overwrite")
        shrink(run_dir / picture, FEATURES_OUT / f"{name}.png")
        print(f"wrote {FEATURES_OUT / name}.png", flush=True)
        if name == PARAVIEW_RUN:
            paraview(run_dir)
    for name in (n for n in wanted if n not in FEATURES and n not in RETRIEVALS and n not in STUDIES
                 and n not in FITS):
        overrides, picture = PICTURES[name]
        run_dir = args.runs / name
        sets = [x for o in overrides for x in ("--set", o)]
        meanfield("run", str(EXAMPLES / f"{name}.toml"), "--out", str(run_dir), "--overwrite", "--quiet", *sets)
        meanfield("plot", str(run_dir), "--no-movie", "--overwrite")
        shrink(run_dir / "plots" / picture, OUT / f"{name}.png")
        print(f"wrote {OUT / name}.png", flush=True)


if __name__ == "__main__":
    main()
