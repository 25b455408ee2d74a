# tf_privpy: `make demo` and `make test` work on a fresh clone.
# They create .venv, install the pinned dependencies (requirements/), build the
# op library with setup.py, then run. Every pip call applies the constraints.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
CONSTRAINTS := -c requirements/constraints.txt
# Quiet TensorFlow's C++ start-up logging.
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONPATH := $(CURDIR)

OPS_SRCS := $(shell find ops -name '*.cc' -o -name '*.h')
LIB := tf_privpy/_tf_privpy_ops.so
# The share service's gRPC stubs: build outputs, never committed.
PROTO := tf_privpy/service/share_service.proto
PROTO_STUBS := tf_privpy/service/share_service_pb2.py tf_privpy/service/share_service_pb2_grpc.py

.PHONY: all setup build demo test test-fast bench bench-quick bench-report bench-venv docs bazel clean distclean

all: build

$(VENV)/.installed: requirements/constraints.txt requirements/base.txt requirements/tff.txt requirements/tff-deps.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install $(CONSTRAINTS) -r requirements/base.txt
	$(PIP) install $(CONSTRAINTS) -r requirements/tff-deps.txt
	$(PIP) install $(CONSTRAINTS) --no-deps -r requirements/tff.txt
	touch $@

setup: $(VENV)/.installed

$(LIB): $(VENV)/.installed $(OPS_SRCS) setup.py
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) setup.py -q build_ext --inplace --parallel 2

$(PROTO_STUBS) &: $(VENV)/.installed $(PROTO) tf_privpy/service/protogen.py
	$(PY) tf_privpy/service/protogen.py

build: $(LIB) $(PROTO_STUBS)

# TF 2.14's pip wheel logs three harmless "Unable to register cuDNN/cuFFT/cuBLAS
# factory" errors at import; programs people read run with C++ logging off.
demo: build
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) examples/lenet5_private_inference.py

test: build
	$(PY) -m pytest -q --durations=25

test-fast: build
	$(PY) -m pytest -q -m "not slow"

# Every benchmark program in turn ("[3/11] benchmarks/functions.py ..."), going on
# past a failing one, then one report: benchmarks/REPORT.md and benchmarks/report/*.png
# (benchmarks/run_all.py). `make bench BENCH_ARGS=--quick` (or `make bench-quick`):
# reduced sizes; BENCH_ARGS also takes --only=micro,compare and --note="...".
BENCH_ARGS ?=
bench: build
	-$(MAKE) --no-print-directory bench-venv
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) benchmarks/run_all.py $(BENCH_ARGS)

bench-quick:
	$(MAKE) --no-print-directory bench BENCH_ARGS="--quick $(BENCH_ARGS)"

# The report alone, from the results already in benchmarks/results/.
bench-report:
	$(PY) benchmarks/report.py

# python-paillier with gmpy2 for benchmarks/he.py's baseline (phe at its best), in a
# venv of its own: tf_privpy never depends on it. Optional: `bench` goes on without it.
BENCH_VENV := .venv-bench
$(BENCH_VENV)/.installed: requirements/bench-phe.txt
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip --disable-pip-version-check -q install $(CONSTRAINTS) -r requirements/bench-phe.txt
	touch $@

bench-venv: $(BENCH_VENV)/.installed

# Reference docs generated from the code (docs/numerics.md: measured on privpy;
# docs/supported_ops.md and the README table: from the op registry).
docs: build
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) tools/gen_numerics_doc.py
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) tools/gen_supported_ops.py

bazel: setup
	PYTHON=$(CURDIR)/$(PY) bash tools/bazel_build.sh build/bazel/_tf_privpy_ops.so

clean:
	rm -rf build $(LIB) tf_privpy/_build_info.json .pytest_cache $(PROTO_STUBS)

distclean: clean
	rm -rf $(VENV) $(BENCH_VENV)
