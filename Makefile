# Two commands on a fresh machine:
#   make demo   install what is missing, then run gpu_check() and train a digits CNN
#   make test   install what is missing, then pytest, testthat and R CMD check
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

APT_PACKAGES := r-base-core r-cran-reticulate r-cran-testthat r-cran-roxygen2 r-cran-knitr \
	r-cran-rmarkdown r-cran-devtools r-cran-withr r-cran-callr pandoc qpdf python3 python3-venv
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ENVNAME ?= r-gpukeras
RSCRIPT := Rscript --no-save --no-restore
ENV_PYTHON = $(shell $(RSCRIPT) -e 'cat(reticulate::virtualenv_python("$(ENVNAME)"))')
VERSION := $(shell sed -n 's/^Version: //p' DESCRIPTION)

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

# Whether CRAN answers: the CRAN-incoming checks that need the Internet (URLs in the docs,
# CRAN's index) run only then, since offline they fail for want of a network, not of the package.
CRAN_ONLINE = $(shell $(RSCRIPT) -e 'cat(!inherits(try(curlGetHeaders("https://cloud.r-project.org", timeout = 10), silent = TRUE), "try-error"))')

# R CMD check --as-cran runs the testthat suite, the examples and the vignettes against the
# built tarball. --no-manual: the PDF manual needs LaTeX, which is not installed here (the Rd
# files are still checked). _R_CHECK_SYSTEM_CLOCK_=false: the clock check asks a web time
# service (worldtimeapi.org, often down) about this machine's clock, not about the package.
rcheck:
	rm -rf gpukeras.Rcheck gpukeras_$(VERSION).tar.gz
	R CMD build . >/dev/null
	_R_CHECK_CRAN_INCOMING_REMOTE_=$(CRAN_ONLINE) _R_CHECK_SYSTEM_CLOCK_=false \
	  R CMD check --as-cran --no-manual gpukeras_$(VERSION).tar.gz || { tail -n 60 gpukeras.Rcheck/tests/testthat.Rout* 2>/dev/null; exit 1; }
	@grep -E "^\[ FAIL" gpukeras.Rcheck/tests/testthat.Rout
	@! grep -q "^Status:.*WARNING" gpukeras.Rcheck/00check.log || { echo "R CMD check gave a WARNING"; exit 1; }

bench:
	$(RSCRIPT) bench/check_time.R
