"""Bad input: one line on stderr naming the field, exit 2, before anything is written.

Every case the fault-tolerance issue lists, through the CLI in-process (the same ``main`` the
console script calls); the MPI behaviour of the same path is covered in test_mpi_jobs.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.cli import S1, S2, refused
from mpi4py import MPI

import meanfield
from meanfield.cli import main
from meanfield.mesh import circle, icosphere, write_mesh_file


@pytest.mark.parametrize("text, field", [
    (S2.replace("[time]", "[time]\ndt = 1e-300"), "time.dt: 1e-300 would take"),
    (S2 + "[particles]\ndt = 1e-300\n", "particles.dt: 1e-300 would take"),
    (S2.replace("[time]\nt_final = 0.2\noutputs = 1", "[time]\nt_final = 1.0\noutputs = 1000000000"),
     "time.outputs: must be"),
    (S2 + "[model]\nbeta = 1e308\n", "model.beta: beta * ||Q^T K||_2 = 1e+308 exceeds"),
    (S2 + '[model]\nvelocity = "rotation"\nrotation_axis = [0, 0, 0]\n', "model.rotation_axis: must be a non-zero"),
    (S2 + "[[model.heads]]\nweight = -1e300\n", "model: the initial velocity limits the step"),
    (S2.replace('name = "x"', 'name = "../x"'), "name: must be a plain name"),
    (S2.replace('name = "x"', 'name = "/etc/x"'), "name: must be a plain name"),
    (S2 + "[model]\nbetta = 2\n", "model.betta: unknown key (did you mean 'beta'?)"),
], ids=["dt", "particles-dt", "outputs", "beta", "axis", "weight", "name-dots", "name-absolute", "typo"])
def test_config_cases(tmp_path, capsys, text, field):
    refused(tmp_path, capsys, text, field)


@pytest.mark.parametrize("expression", ["1/0", "e**1000", "9**9**9**9", "log(0*x)", "maximum(x)", "sqrt(x, y)"])
def test_expressions_that_cannot_be_a_density(tmp_path, capsys, expression):
    text = S2 + f'[initial]\nkind = "expression"\nexpression = "{expression}"\n'
    field = "initial.expression" if expression in ("maximum(x)", "sqrt(x, y)") else "initial: density is"
    refused(tmp_path, capsys, text, field)


def test_a_huge_constant_density_is_just_uniform(tmp_path):
    """"1e308" overflowed the mass to inf; it is a uniform density like any other."""
    text = S2 + '[initial]\nkind = "expression"\nexpression = "1e308"\n[output]\nxdmf = false\n'
    (tmp_path / "c.toml").write_text(text)
    run = meanfield.run(tmp_path / "c.toml", out=tmp_path / "o", comm=MPI.COMM_SELF, quiet=True)
    assert np.allclose(run.densities[0], 1.0 / (run.areas.sum()), rtol=1e-14)


def _mesh_case(tmp_path: Path, name: str, points: np.ndarray, cells: np.ndarray) -> str:
    from meanfield.mesh import RawMesh

    write_mesh_file(tmp_path / name, RawMesh(points, cells))
    return f'name = "x"\n[mesh]\nfile = "{name}"\n[time]\nt_final = 0.2\noutputs = 1\n'


def _hemisphere(m):
    return m.cells[m.points[m.cells].mean(axis=1)[:, 2] > 0]


@pytest.mark.parametrize("case", ["degenerate", "twice", "hole", "hemisphere", "single", "non-manifold",
                                  "double cover"])
def test_meshes_that_are_not_one_closed_sphere(tmp_path, capsys, case):
    m = icosphere(2)
    far = int(np.argmin(m.points @ m.points[m.cells[0, 0]]))  # the vertex opposite the first cell
    points, cells = m.points, {
        "degenerate": np.vstack([m.cells, [[0, 0, 1]]]),
        "twice": np.vstack([m.cells, m.cells]),
        "hole": m.cells[1:],
        "hemisphere": _hemisphere(m),
        "single": m.cells[:1],
        "non-manifold": np.vstack([m.cells, [[m.cells[0, 0], m.cells[0, 1], far]]]),
        "double cover": np.vstack([m.cells, m.cells + len(m.points)]),
    }[case]
    if case == "double cover":  # a second copy of every vertex: two whole spheres on top of each other
        points = np.vstack([m.points, m.points])
    refused(tmp_path, capsys, _mesh_case(tmp_path, "bad.vtu", points, cells), "mesh.file")


@pytest.mark.parametrize("suffix, content", [
    (".msh", "this is text\n"), (".vtu", "junk"), (".vtk", "junk"), (".off", "OFF\nx\n"),
    (".ply", "junk"), (".mesh", "junk"), (".obj", "v 1 2\n"), (".xdmf", "<Xdmf>"),
])
def test_files_that_are_not_meshes(tmp_path, capsys, suffix, content):
    (tmp_path / f"bad{suffix}").write_text(content)
    text = f'name = "x"\n[mesh]\nfile = "bad{suffix}"\n[time]\nt_final = 0.2\noutputs = 1\n'
    refused(tmp_path, capsys, text, "mesh.file")


def test_validate_against_a_pde_run_of_another_problem(tmp_path, capsys):
    pde = tmp_path / "pde"
    (tmp_path / "a.toml").write_text(S1)
    assert main(["run", str(tmp_path / "a.toml"), "--out", str(pde), "--quiet"]) == 0
    capsys.readouterr()
    for change, what in [("[model]\nbeta = 9.0\n", "the model"),
                         ('[initial]\nkind = "uniform"\n', "the initial density"),
                         (None, "mesh.sphere")]:
        text = S2 if change is None else S1 + change
        refused(tmp_path, capsys, text, f"--pde {pde}: the run differs from the config in {what}", "--n", "10,20",
                 "--seeds", "1", "--pde", str(pde), command="validate")
    (tmp_path / "case.toml").write_text(S1 + "[model]\nbeta = 9.0\n")
    assert main(["validate", str(tmp_path / "case.toml"), "--n", "10,20", "--seeds", "1", "--pde", str(pde),
                 "--force", "--out", str(tmp_path / "forced"), "--quiet"]) == 0


def test_error_messages_name_the_mesh_problem():
    from meanfield.mesh import MeshError, check_sphere_mesh

    m = icosphere(2)
    with pytest.raises(MeshError, match="repeats a vertex"):
        check_sphere_mesh(m.points, np.vstack([m.cells, [[0, 0, 1]]]), "m")
    with pytest.raises(MeshError, match="appears more than once"):
        check_sphere_mesh(m.points, np.vstack([m.cells, m.cells]), "m")
    with pytest.raises(MeshError, match="belongs to 1 triangles"):
        check_sphere_mesh(m.points, _hemisphere(m), "m")
    with pytest.raises(MeshError, match="cover 2 times"):
        check_sphere_mesh(np.vstack([m.points, m.points]), np.vstack([m.cells, m.cells + len(m.points)]), "m")
    c = circle(12)
    with pytest.raises(MeshError, match="belongs to 1 segments"):
        check_sphere_mesh(c.points, c.cells[1:], "m")
    check_sphere_mesh(c.points, c.cells, "m")
    check_sphere_mesh(m.points, m.cells, "m")
