# meanfield: set-up-free entry points.  `make demo` and `make test` build .venv themselves.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
NP    ?= 2
# pytest-xdist workers of the serial pass (auto: one per core); worksteal: a worker that runs out of
# tests takes some from the other's queue, so that a few long tests do not end the pass on one core
WORKERS ?= auto
XDIST = -n $(WORKERS) --dist worksteal

# A Python >= 3.12 (3.12 preferred: the version dolfinx-solver-real is measured with here):
# python3.12/python3.13/python3 on PATH if they run and are new enough, else a pyenv 3.12,
# else a newer pyenv Python.  (pyenv shims exit non-zero when the version
# is not selected, so each candidate is run, not just looked up.)  A Python that already
# imports dolfinx (an activated conda-forge environment with fenics-dolfinx) gets a venv that
# sees its packages (--system-site-packages), and the PyPI wheel is then not installed.
find_python = $(shell \
  for c in python3.12 python3.13 python3; do \
    p=$$(command -v $$c 2>/dev/null) && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; exit 0; }; \
  done; \
  root=$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv); \
  for p in $$(ls -d $$root/versions/3.12*/bin/python 2>/dev/null | sort -rV) $$(ls -d $$root/versions/3.1[3-9]*/bin/python 2>/dev/null | sort -V); do \
    $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; exit 0; }; \
  done)

.PHONY: demo test test-quick test-serial test-exhaustive test-mpi test-kernel test-tools mpirun-check lint docs venv bench clean

# The packages are installed with uv (from PyPI; a fresh machine, no cache: 32 s where pip took 170 s),
# else, or in a venv that sees a conda environment's packages (whose mpi4py and dolfinx must be the
# ones imported), with pip.  uv compiles their bytecode as pip does (--compile-bytecode): where
# PYTHONDONTWRITEBYTECODE is set (this machine and its CI) nothing else but the test passes (below)
# writes it, and every process would compile each module it imports again (an mpirun job of the tests
# took 2.5x as long)
$(VENV)/.installed: pyproject.toml
	@base="$(find_python)"; \
	if [ -z "$$base" ]; then echo "error: no Python >= 3.12 found (PATH or pyenv)" >&2; exit 1; fi; \
	echo "building $(VENV) with $$base"; \
	if $$base -c 'import mpi4py.MPI, dolfinx' 2>/dev/null; then shared=--system-site-packages; fi; \
	[ -x $(PY) ] || $$base -m venv $$shared $(VENV); \
	if $(PY) -c 'import mpi4py.MPI, dolfinx' 2>/dev/null; then extra=test,docs; else extra=test,docs,fem; fi; \
	if [ -z "$$shared" ] && $(PY) -m pip install -q uv && $(VENV)/bin/uv pip install -q --python $(PY) --compile-bytecode -e ".[$$extra]"; \
	then :; else $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e ".[$$extra]"; fi
	@touch $@

venv: $(VENV)/.installed

demo: venv
	$(VENV)/bin/mpirun -n $(NP) $(VENV)/bin/meanfield run --overwrite

# test-tools (an apt-get install on a fresh machine: a minute of downloads and unpacking) runs beside
# the venv, lint and docs, which need the CPU; its output follows theirs.  lint (mypy, one core) and
# docs (the demos run one after another) run side by side, each one's output kept together (-O).
# Under `make test` the serial pass reads the site `make docs` has just built
# (tests/test_docs_site.py) instead of building its own; `make test-serial` alone builds one
test:
	@tools_log=$$(mktemp); $(MAKE) --no-print-directory test-tools >$$tools_log 2>&1 & tools=$$!; \
	$(MAKE) --no-print-directory venv mpirun-check && $(MAKE) --no-print-directory -j2 -O lint docs; rc=$$?; \
	wait $$tools; tools_rc=$$?; cat $$tools_log; rm -f $$tools_log; \
	[ $$rc -eq 0 ] && [ $$tools_rc -eq 0 ] || exit 1; \
	$(MAKE) --no-print-directory test-serial test-mpi test-kernel MEANFIELD_DOCS_SITE=$(DOCS_SITE)

# What the ParaView checks (tests/test_paraview.py) need: Debian's ParaView (pvbatch and its Python)
# and Xvfb (Debian's pvbatch draws through X only).  Installed when make runs as root where
# apt-get is (CI on a fresh machine: about a minute); elsewhere one line says how the checks run.
PARAVIEW_PACKAGES = paraview python3-paraview xvfb

test-tools:
	@if command -v pvbatch >/dev/null && command -v Xvfb >/dev/null; then exit 0; fi; \
	why="not root with apt-get"; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing what the ParaView checks need: apt-get install $(PARAVIEW_PACKAGES)"; \
	  start=$$SECONDS; \
	  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PARAVIEW_PACKAGES) >/dev/null; \
	  then echo "installed in $$((SECONDS - start)) s"; exit 0; fi; \
	  why="apt-get failed"; \
	fi; \
	echo "no ParaView pvbatch or Xvfb ($$why): the ParaView checks use VTK's readers (the vtk wheel) and skip the rest"

# the quick loop while developing: no slow studies, no MPI pass
test-quick: venv
	$(PYTEST) -q $(XDIST) -m "not slow" tests; $(PYTEST_OK)

# the documentation site, warnings as errors (docs/_build/html/index.html); -E: always read
# every page again, since pages are written from the code (config schema, CLI, imports).  It
# executes the demos (demos/*.py, sphinx-gallery: pages in docs/demos); one that fails fails it
DOCS_SITE = docs/_build/html
docs: venv
	$(PY) -m sphinx -E -W --keep-going -q -b html docs $(DOCS_SITE)

lint: venv
	$(VENV)/bin/ruff check meanfield tests benchmarks meshes demos
	$(VENV)/bin/mypy

# The test passes run with PYTHONDONTWRITEBYTECODE unset: under it every process of a pass compiled
# the package's modules again, and pytest rewrote all ~100 test modules for its assertion messages
# again (about 5 CPU-s a process); unset, the first process to import one writes its bytecode
PYTEST = PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

# pytest exits 5 when it collects no test; that is not a failure of the suite's code
PYTEST_OK = rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 5 ] || exit $$rc

test-serial: venv
	MEANFIELD_DOCS_SITE=$(MEANFIELD_DOCS_SITE) $(PYTEST) $(XDIST) -m "not exhaustive" tests; $(PYTEST_OK)

# the combinations `make test` leaves out (tests marked exhaustive: more rank pairs of the resume
# matrix, more kinds of job interrupted by SIGTERM to mpirun)
test-exhaustive: venv
	$(PYTEST) $(XDIST) -m exhaustive tests; $(PYTEST_OK)

# the mpirun of the MPI tests, found as tests/helpers/mpi.py says (MEANFIELD_MPIRUN, the bin
# folder of the venv's Python, PATH); where there is none, one line says how to get one
FIND_MPIRUN = $(PY) tests/helpers/mpi.py

mpirun-check: venv
	@$(FIND_MPIRUN) >/dev/null

# each rank gets its own pytest temporary folder (rank-0 paths are broadcast where shared)
test-mpi: venv
	mpirun=$$($(FIND_MPIRUN)) && PYTHONDONTWRITEBYTECODE= timeout 1200 $$mpirun -n $(NP) sh -c 'exec $(PY) -m pytest -m "mpi and not exhaustive" -p no:cacheprovider -q \
	  --basetemp=$${TMPDIR:-/tmp}/meanfield-pytest-rank$${PMI_RANK:-$${OMPI_COMM_WORLD_RANK:-0}} tests'; $(PYTEST_OK)

# the serial pass's tests that are not slow, again under another OpenBLAS kernel: it rounds
# differently, so a test that passes only with one machine's round-off fails here.  (Not Haswell
# or Zen: OpenBLAS 0.3.34's dgemm kernels for those crash on AMD CPUs with AVX-512.)
KERNEL ?= Sandybridge
# Narrowed to the tests whose numbers depend on round-off: the modules below check files (run.nc,
# ParaView's files and view of them, outputs read back), the command line, refusals, locks, thread
# counts, imports, sizing, job control, plots and pictures, or compare a run with itself resumed
# (one code path, on any ranks), whose outcome no BLAS kernel changes, and are left out.
KERNEL_SKIP = atoms_log atoms_outputs bad_input causal_analysis check cli_documented collect command_server \
              controller conventions damaged_runs expression_depth longtime_study memory_guard mpi_jobs \
              own_observables paraview particle_outputs picture_labels plot_focus plotting private_access \
              problem_once refusals resume_atom_keys resume_matrix rundir run run_pictures runfile run_threads \
              sweep watching

test-kernel: venv
	OPENBLAS_CORETYPE=$(KERNEL) $(PYTEST) $(XDIST) -q -m "not slow and not exhaustive" \
	  $(foreach m,$(KERNEL_SKIP),--ignore=tests/test_$(m).py) tests; $(PYTEST_OK)

bench: venv
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(PY) $$f; done

clean:
	rm -rf $(VENV) .pytest_cache
