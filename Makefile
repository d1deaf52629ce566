# The few commands a newcomer needs. `make demo` and `make test` do all the set-up themselves.
VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# torch first, CPU build: a wheel on local disk where one exists, else the package index.
TORCH   ?= torch==2.13.0
TORCH_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
PYTEST_ARGS ?=
# The main run in two pytest workers (pytest-xdist), each test file whole in one of them: about
# half of the suite's time is spent waiting on Ray, MLflow servers and subprocesses, not on a
# core. PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2

.PHONY: install demo test lint bench gpu-check ref-venv clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_LINKS) "$(TORCH)"
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/adapterfleet demo

# Two fault tests find their Ray actors and nodes through Ray's global state, which the tests
# before them leave behind in the same process: they run in processes of their own.
ISOLATED := tests/faults/test_fault_trial_worker_killed.py tests/faults/test_fault_worker_node_lost.py \
            tests/faults/test_fault_workers_killed.py

# ref-venv first: the interoperability tests compare against the real reference in it.
test: $(STAMP) ref-venv
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS) $(foreach t,$(ISOLATED),--deselect $(t))
	for t in $(ISOLATED); do $(PY) -m pytest $(PYTEST_ARGS) $$t || exit 1; done

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

bench: $(STAMP)
	$(PY) -m benchmarks.run

# On a CUDA machine: the CUDA tests, a pipeline, predict, trials packed on one GPU, DDP on two.
# Without a GPU it says why nothing ran.
gpu-check: $(STAMP)
	$(PY) -m benchmarks.gpu_check

# The reference implementation (AdapterHub adapters 1.3.0, transformers 4.57) in a virtualenv of
# its own, .bench/ref-venv: the benchmarks and tests/interop need it (those tests skip without it).
ref-venv: $(STAMP)
	$(PY) -c 'from benchmarks.refenv import ensure_ref_venv; ensure_ref_venv()'

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
