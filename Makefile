# One-step set-up on a fresh machine, then the job. Used by the README and by .ci/run.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: setup run test test-all lint protos clean

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[all,dev]'
	touch $(STAMP)

setup: $(STAMP)

## The embedded default job: the reference solutions of every problem on a local agent.
run: $(STAMP)
	$(VENV)/bin/kgb run

## The whole test suite (GPU tests skip cleanly without a GPU), then lint and types. Test files
## run in TEST_WORKERS processes (pytest-xdist), each file's tests in one process, so a file's
## module fixtures (agents, Ray) start once; most tests wait on agents and Ray, not the CPU.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
	$(MAKE) --no-print-directory lint

## Also the slow tests.
test-all: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --run-slow

lint: $(STAMP)
	$(VENV)/bin/ruff check device_agent coordinator generators protos operators tests
	$(VENV)/bin/mypy device_agent coordinator generators protos operators

## Regenerate gRPC code after editing protos/**/*.proto.
protos: $(STAMP)
	$(PY) -m protos.generate

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
