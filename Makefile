# `make demo` and `make test` do all set-up on a fresh clone: a virtual environment in .venv with
# tilejit and its three backends installed editable, the test tools, and the system tools the
# backends call (ld.lld). Set-up runs again only when a pyproject.toml or this file changes.

PYTHON ?= python3
VENV := .venv
VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.tilejit-setup-stamp
SETUP_INPUTS := Makefile pyproject.toml $(wildcard backends/*/pyproject.toml)
TEST_DEPS := pytest "filecheck>=1.0,<2" pyelftools msgpack matplotlib "ruff>=0.17,<0.18" \
  "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14"
TORCH_SPEC ?= torch==2.13.0

.PHONY: all setup demo test lint system-tools clean

all: test

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	@test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV) || { \
	  echo "error: \`$(PYTHON) -m venv\` failed; install the venv module (Debian: apt-get install python3-venv)" >&2; exit 1; }
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check --upgrade pip "setuptools>=64" wheel
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation \
	  -e . -e backends/interpreter -e backends/nvidia -e backends/amd $(TEST_DEPS)
	@$(MAKE) --no-print-directory system-tools
	@# torch (CPU build) lets the suite also run kernels on torch CPU tensors, as Triton users do;
	@# without it those variants are skipped. Set TORCH_SPEC= to leave it out.
	@if [ -n "$(TORCH_SPEC)" ]; then $(VENV_PY) -m pip install --quiet --disable-pip-version-check "$(TORCH_SPEC)" || \
	  echo "warning: $(TORCH_SPEC) not installed; tests with torch tensors will be skipped" >&2; fi
	@touch $@

# ld.lld links AMD code objects (hsaco). LLVM 22 (llvmlite) writes code object v5, which needs LLD 15
# or newer; Debian 12's plain `lld` is 14, so the versioned `lld-19` is installed when the backend's
# own search (tilejit_amd.toolchain.find_lld, which skips old versions) finds nothing usable. Needs
# root and apt-get; a failure only warns, since everything except the hsaco stage works without it.
LLD_OK := $(VENV_PY) -c "import sys; from tilejit_amd.toolchain import find_lld, lld_version, MIN_LLD_MAJOR as M; p = find_lld(); v = p and lld_version(p); sys.exit(0 if v and v[0] >= M else 1)"

system-tools:
	@if $(LLD_OK) 2>/dev/null; then \
	  :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing lld-19 (ld.lld) with apt-get"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq lld-19 >/dev/null) || \
	    echo "warning: apt-get install lld-19 failed; AMD hsaco linking tests will be skipped" >&2; \
	else \
	  echo "warning: no ld.lld >= 15 found and cannot install one (need root and apt-get); install lld-19 or set TILEJIT_LLD" >&2; \
	fi

demo: $(STAMP)
	$(VENV)/bin/tilejit demo

# The lint step (ruff, configured in pyproject.toml) runs first: CI fails on a lint error as on a test.
lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: lint
	$(VENV_PY) -m pytest -q tests

clean:
	rm -rf $(VENV) build .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name "*.egg-info" -type d -prune -exec rm -rf {} +
