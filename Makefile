# Two commands on a fresh machine:
#   make demo   install what is missing, then run gpu_check() and train a digits CNN
#   make test   install what is missing, then pytest, testthat and R CMD check
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

APT_PACKAGES := r-base-core r-cran-reticulate r-cran-testthat r-cran-roxygen2 r-cran-knitr \
	r-cran-rmarkdown r-cran-devtools r-cran-withr r-cran-callr pandoc python3 python3-venv
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ENVNAME ?= r-gpukeras
RSCRIPT := Rscript --no-save --no-restore
ENV_PYTHON = $(shell $(RSCRIPT) -e 'cat(reticulate::virtualenv_python("$(ENVNAME)"))')
VERSION := $(shell sed -n 's/^Version: //p' DESCRIPTION)
# keras3 and tfdatasets are optional (Suggests) and not installable from Debian.
export _R_CHECK_FORCE_SUGGESTS_ := false

.PHONY: demo test deps install python-env dev-env pytest rcheck lint bench

demo: python-env
	$(RSCRIPT) inst/scripts/demo.R

test: dev-env lint pytest rcheck

deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi

install: deps
	R CMD INSTALL --no-multiarch . > install.log 2>&1 || { cat install.log; exit 1; }
	@echo "gpukeras $(VERSION) installed"

python-env: install
	$(RSCRIPT) -e 'gpukeras::install_gpukeras("$(ENVNAME)")'

dev-env: python-env
	"$(ENV_PYTHON)" -m pip install -q --disable-pip-version-check -r python/requirements-dev.txt

lint:
	cd python && "$(ENV_PYTHON)" -m ruff check . ../inst/python ../bench && "$(ENV_PYTHON)" -m ruff format --check . ../inst/python ../bench

pytest:
	cd python && "$(ENV_PYTHON)" -m pytest -p pytest_cov --cov=gpukeras --cov-report=term

# R CMD check runs the testthat suite, the examples and the vignettes against the built tarball.
rcheck:
	rm -rf gpukeras.Rcheck gpukeras_$(VERSION).tar.gz
	R CMD build . >/dev/null
	R CMD check --no-manual gpukeras_$(VERSION).tar.gz || { tail -n 60 gpukeras.Rcheck/tests/testthat.Rout* 2>/dev/null; exit 1; }
	@grep -E "^\[ FAIL" gpukeras.Rcheck/tests/testthat.Rout
	@! grep -q "^Status:.*WARNING" gpukeras.Rcheck/00check.log || { echo "R CMD check gave a WARNING"; exit 1; }

bench:
	$(RSCRIPT) bench/check_time.R
