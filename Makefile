# tf_privpy: `make demo` and `make test` work on a fresh clone.
# They create .venv, install the pinned dependencies (requirements/), build the
# op library with setup.py, then run. Every pip call applies the constraints.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
CONSTRAINTS := -c requirements/constraints.txt
# Compiler processes at a time (setup.py reads TF_PRIVPY_BUILD_JOBS; cc-tests: make -j).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
export TF_PRIVPY_BUILD_JOBS ?= $(JOBS)
# Quiet TensorFlow's C++ start-up logging.
export TF_CPP_MIN_LOG_LEVEL ?= 2
export PYTHONPATH := $(CURDIR)

OPS_SRCS := $(shell find ops -name '*.cc' -o -name '*.h')
LIB := tf_privpy/_tf_privpy_ops.so
# The share service's gRPC stubs: build outputs, never committed.
PROTO := tf_privpy/deploy/service/share_service.proto
PROTO_STUBS := tf_privpy/deploy/service/share_service_pb2.py tf_privpy/deploy/service/share_service_pb2_grpc.py

.PHONY: all setup build demo test test-fast cc-tests cc-bench-aead wheel zoo bench bench-quick bench-report bench-venv bench-peers bench-venv-peers bench-venv-crypten bench-venv-mpyc bench-venv-spu bench-venv-tfe docs bazel clean distclean

all: build

$(VENV)/.installed: requirements/constraints.txt requirements/base.txt requirements/tff.txt requirements/tff-deps.txt requirements/dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install $(CONSTRAINTS) -r requirements/base.txt
	$(PIP) install $(CONSTRAINTS) -r requirements/tff-deps.txt
	$(PIP) install $(CONSTRAINTS) --no-deps -r requirements/tff.txt
	$(PIP) install $(CONSTRAINTS) -r requirements/dev.txt
	touch $@

setup: $(VENV)/.installed

$(LIB): $(VENV)/.installed $(OPS_SRCS) setup.py
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) setup.py -q build_ext --inplace

$(PROTO_STUBS) &: $(VENV)/.installed $(PROTO) tf_privpy/deploy/service/protogen.py
	$(PY) tf_privpy/deploy/service/protogen.py

build: $(LIB) $(PROTO_STUBS)

# TF 2.14's pip wheel logs three harmless "Unable to register cuDNN/cuFFT/cuBLAS
# factory" errors at import; programs people read run with C++ logging off.
demo: build
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) examples/lenet5_private_inference.py

# `make test`: the builds the suite checks run first as make steps of their
# own, each rebuilt only when its inputs changed (make's dependencies), then
# pytest; tools/timed.sh writes each step's seconds to build/test-phases.txt,
# printed at the end with the setup steps apart from pytest. A step that fails
# does not stop the others: its tests fail saying so (a failed C++ build shows
# its compiler errors in the test that runs that program; a failed Bazel or
# wheel build removes its output, and the test names the step). Steps:
#   cc-tests  the standalone C++ test programs of ops/*/Makefile.standalone,
#             into build/cc-tests/<family>/ (tests/test_cc_programs.py and the
#             kernels' tests run them from there), and benchmarks/aead_gcm.py's
#             program into build/cc-bench/aead (its smoke test runs it);
#   bazel     the Bazel build of the op library (tests/test_bazel_build.py
#             loads it: TF_PRIVPY_TEST_BAZEL_LIB);
#   wheel     `pip wheel` of a copy of the sources, installed into
#             build/wheel/site (tests/test_packaging.py: TF_PRIVPY_TEST_WHEEL_DIR);
#   zoo       the zoo models the suite checks (tp.models: LeNet-5s, networks
#             A-D, FFNN, logistic regression, the ViT; about 3 CPU-minutes),
#             trained from scratch into build/zoo-models by tests/zoo.py
#             whenever the code or data that trains them changed; the tests
#             load them from there (TF_PRIVPY_TEST_ZOO_DIR; without the
#             step's .built they train into their run's own folder);
#   chromium  Debian's chromium for tests/test_tensorboard_page.py, installed
#             with apt-get when missing and this user may (root or passwordless
#             sudo); otherwise a message says what to install and that test fails.
# pytest: three workers on two cores, a test file each at a time (module
# fixtures stay per worker). The suite is CPU-bound, but its tests also wait
# (server processes starting, subprocesses' TF imports, timeouts checked by
# waiting, a file alone at the end): with two workers those waits left a
# core idle. Measured on a 2-core AMD EPYC, same tree: two workers 995-1,082 s
# (three CI runs); three 954 and 1,002 s, against a floor of 942-960 s (the
# CPU seconds the run used over 2 cores: build/test-durations.txt's first
# line), so three workers leave 1-4 % of the cores idle and a fourth has
# nothing to fill. The long runs (pytest.ini's `long` marker: 1,000 training
# steps, 10^6 comparisons, the ViT on 1,000 digits; the length is what they
# check) run in the same session: their files go first (tests/conftest.py
# orders the files, --no-loadscope-reorder keeps that order) and the short
# files fill the workers' ends. `make test-fast` skips them (and the slow
# tests). TEST_ARGS="-n 0" runs it in one process. Every test's
# setup/call/teardown seconds and CPU seconds go to build/test-durations.json
# and build/test-durations.txt (slowest first; the long tests' sums on their
# own line).
TEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder
TEST_ENV = TF_PRIVPY_TEST_BAZEL_LIB=$(CURDIR)/$(BAZEL_LIB) \
           TF_PRIVPY_TEST_WHEEL_DIR=$(CURDIR)/$(WHEEL_DIR) \
           TF_PRIVPY_TEST_ZOO_DIR=$(CURDIR)/$(ZOO_DIR)
TIMED := bash tools/timed.sh
test: build
	@mkdir -p build && rm -f build/test-phases.txt
	-$(TIMED) cc-tests $(MAKE) --no-print-directory -j$(JOBS) cc-tests
	$(TIMED) bazel $(MAKE) --no-print-directory bazel || rm -f $(BAZEL_LIB)
	$(TIMED) wheel $(MAKE) --no-print-directory wheel || rm -f $(WHEEL_DIR)/.built
	$(TIMED) zoo $(MAKE) --no-print-directory zoo || rm -f $(ZOO_DIR)/.built
	$(TIMED) chromium bash tools/ensure_chromium.sh
	$(TEST_ENV) $(TIMED) pytest $(PY) -m pytest -q $(TEST_ARGS) --durations=25 \
	  --durations-file=build/test-durations.json; status=$$?; \
	  echo "make test: seconds per step (build/test-phases.txt;" \
	       "every test's: build/test-durations.txt):"; \
	  cat build/test-phases.txt; exit $$status

test-fast: build cc-tests
	$(PY) -m pytest -q $(TEST_ARGS) -m "not slow and not long" --durations-file=build/test-durations.json

# Standalone C++ test programs (no TensorFlow), one sub-make per family so that
# `make -j2 cc-tests` builds two at a time; each Makefile.standalone knows its
# sources and headers, so a program is rebuilt only when one of them changed.
CC_TESTS_DIR := build/cc-tests
CC_FAMILIES := ring prg aead kex gc bitwise batchcrypt paillier
cc_test_bins = $(patsubst ops/$(1)/%.cc,$(CURDIR)/$(CC_TESTS_DIR)/$(1)/%,\
                 $(wildcard ops/$(1)/*_test.cc))
# paillier's bench has built-in checks that tests/test_paillier_kernels.py runs
CC_EXTRA_paillier := $(CURDIR)/$(CC_TESTS_DIR)/paillier/paillier_bench
cc-tests: $(addprefix cc-tests-,$(CC_FAMILIES)) cc-bench-aead
# benchmarks/aead_gcm.py's program, linked against TF's BoringSSL (the EVP the
# op library binds to), into build/cc-bench/aead: the smoke test runs it from there
cc-bench-aead: $(VENV)/.installed
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) benchmarks/aead_gcm.py --build_only
cc-tests-%:
	$(MAKE) --no-print-directory -s -f ops/$*/Makefile.standalone OUT=$(CURDIR)/$(CC_TESTS_DIR)/$* \
	  $(call cc_test_bins,$*) $(CC_EXTRA_$*)

# The wheel's inputs: every file git lists (tracked or new), minus what is
# never packaged.
WHEEL_DIR := build/wheel
WHEEL_SRCS = $(filter-out .venv% tests/% docs/% benchmarks/% examples/% .ci/%,\
  $(wildcard $(shell git ls-files --cached --others --exclude-standard 2>/dev/null)))
$(WHEEL_DIR)/.built: $(VENV)/.installed $(WHEEL_SRCS)
	$(PY) tools/build_test_wheel.py $(WHEEL_DIR)

wheel: $(WHEEL_DIR)/.built

# The zoo models the suite checks, trained from scratch into an emptied
# folder when what trains them changed (tests/zoo.py says how the tests use it).
ZOO_DIR := build/zoo-models
$(ZOO_DIR)/.built: $(VENV)/.installed tf_privpy/models.py tf_privpy/datasets.py tests/zoo.py | build
	rm -rf $(ZOO_DIR)
	TF_CPP_MIN_LOG_LEVEL=3 PYTHONPATH=$(CURDIR) $(PY) tests/zoo.py $(ZOO_DIR)

zoo: $(ZOO_DIR)/.built

# Every benchmark program in turn ("[3/11] benchmarks/functions.py ..."), going on
# past a failing one, then one report: benchmarks/REPORT.md and benchmarks/report/*.png
# (benchmarks/run_all.py). `make bench BENCH_ARGS=--quick` (or `make bench-quick`):
# reduced sizes; BENCH_ARGS also takes --only=micro,compare and --note="...".
BENCH_ARGS ?=
bench: build
	-$(MAKE) --no-print-directory bench-venv
	-$(MAKE) --no-print-directory bench-venv-peers
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

# Peers run beside tf_privpy by benchmarks/peers_run.py (benchmarks/peers/), each in a venv of
# its own (their pins clash: jax needs scipy >= 1.10, tf2onnx protobuf 3.20, CrypTen a CPU torch).
# TF-Encrypted's custom ops are rebuilt against our TF from a checkout of its source
# (`make bench-venv-tfe TFE_SRC=DIR`; the PyPI sdist has no C++; needs libsodium-dev): without
# it, tfe_run.py records TF-Encrypted as not runnable (its ABY3 cannot share without them).
# All optional: a venv that fails to build leaves its log in .venv-NAME.log (no .installed), and
# peers_run.py records that peer as "not installed" with the log's last line as the reason.
PEER_PIP = -m pip --disable-pip-version-check -q install
define peer_venv
	rm -f $(1)/.installed
	( test -x $(1)/bin/python || $(PYTHON) -m venv $(1) ) > $(1).log 2>&1
	( $(2) ) >> $(1).log 2>&1 || { grep -v '^WARNING: Location' $(1).log | tail -n 3; exit 1; }
	touch $(1)/.installed
endef
.venv-crypten/.installed: requirements/bench-crypten.txt requirements/bench-crypten-nodeps.txt requirements/constraints-crypten.txt
	$(call peer_venv,.venv-crypten,.venv-crypten/bin/python $(PEER_PIP) -c requirements/constraints-crypten.txt -r requirements/bench-crypten.txt && .venv-crypten/bin/python $(PEER_PIP) -c requirements/constraints-crypten.txt --no-deps -r requirements/bench-crypten-nodeps.txt)
.venv-mpyc/.installed: requirements/bench-mpyc.txt requirements/constraints.txt
	$(call peer_venv,.venv-mpyc,.venv-mpyc/bin/python $(PEER_PIP) $(CONSTRAINTS) -r requirements/bench-mpyc.txt)
.venv-spu/.installed: requirements/bench-spu.txt requirements/constraints-spu.txt
	$(call peer_venv,.venv-spu,.venv-spu/bin/python $(PEER_PIP) -c requirements/constraints-spu.txt -r requirements/bench-spu.txt)
.venv-tfe/.installed: requirements/bench-tfe.txt requirements/constraints-tfe.txt
	$(call peer_venv,.venv-tfe,.venv-tfe/bin/python $(PEER_PIP) -c requirements/constraints-tfe.txt -r requirements/bench-tfe.txt && .venv-tfe/bin/python benchmarks/peers/tfe_build_ops.py $(if $(TFE_SRC),--src=$(TFE_SRC)))

bench-venv-crypten: .venv-crypten/.installed
bench-venv-mpyc: .venv-mpyc/.installed
bench-venv-spu: .venv-spu/.installed
bench-venv-tfe: .venv-tfe/.installed
# every peer venv that builds; -k: one that fails does not stop the others
bench-venv-peers:
	-$(MAKE) --no-print-directory -k bench-venv-crypten bench-venv-mpyc bench-venv-spu bench-venv-tfe

bench-peers: build
	-$(MAKE) --no-print-directory bench-venv-peers
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) benchmarks/peers_run.py

# Reference docs generated from the code (docs/numerics.md: measured on privpy;
# docs/supported_ops.md and the README table: from the op registry).
docs: build
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) tools/gen_numerics_doc.py
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) tools/gen_supported_ops.py

# The Bazel build of the op library (rebuilt when ops/ or the Bazel files change;
# Bazel's own cache in ~/.cache/bazel makes a rebuild incremental).
BAZEL_LIB := build/bazel/_tf_privpy_ops.so
$(BAZEL_LIB): $(VENV)/.installed $(OPS_SRCS) BUILD WORKSPACE build_defs.bzl .bazelrc configure.sh \
              tools/bazel_build.sh
	PYTHON=$(CURDIR)/$(PY) bash tools/bazel_build.sh $@

bazel: $(BAZEL_LIB)

clean:
	rm -rf build $(LIB) tf_privpy/_build_info.json .pytest_cache $(PROTO_STUBS)

distclean: clean
	rm -rf $(VENV) $(BENCH_VENV) .venv-crypten .venv-mpyc .venv-spu .venv-tfe .venv-*.log
