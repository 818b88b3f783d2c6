# Two commands on a fresh machine:
#   make demo   install what is missing, then show the product on a digits CNN (setup, check, tune, fit)
#   make test   install what is missing, then pytest, testthat and R CMD check
#   make site   the pkgdown site in docs/, checked in headless Chromium
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

APT_PACKAGES := r-base-core r-cran-reticulate r-cran-testthat r-cran-roxygen2 r-cran-knitr \
	r-cran-rmarkdown r-cran-devtools r-cran-withr r-cran-callr r-cran-rlang r-cran-cli r-cran-commonmark r-cran-globals r-cran-r6 \
	pandoc qpdf python3 python3-venv iproute2
# What only the tests need: rsample's resamplings for gpu_cv(), a PostgreSQL server that
# test-search-postgres.R starts on 127.0.0.1 (as the postgres user) and stops after, and
# plumber, which gpu_serve() serves with (a Suggests: the demo needs none of it), with curl
# for test-serve.R's and bench/serve.R's clients.
TEST_APT_PACKAGES := r-cran-rsample postgresql r-cran-plumber r-cran-curl r-cran-lintr
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ENVNAME ?= r-gpukeras
RSCRIPT := Rscript --no-save --no-restore
ENV_PYTHON = $(shell $(RSCRIPT) -e 'cat(reticulate::virtualenv_python("$(ENVNAME)"))')
VERSION := $(shell sed -n 's/^Version: //p' DESCRIPTION)

.PHONY: demo test deps install python-env dev-env mlflow-server pytest pytest-cpu pytest-simulated coverage rcheck lint lint-python lint-r lint-and-pytest bench bench-smoke \
	newer-stack-env newer-stack-test r-tests site site-config test-envs

# The demo installs only what is missing or out of date (the package when a source is newer
# than the installed copy, the Python environment when it cannot import Keras), then runs.
INSTALLED_DESCRIPTION = $(shell $(RSCRIPT) -e 'cat(system.file("DESCRIPTION", package = "gpukeras"))')
demo: deps
	@if [ -z "$(INSTALLED_DESCRIPTION)" ] || [ -n "$$(find DESCRIPTION NAMESPACE R inst -newer "$(INSTALLED_DESCRIPTION)" -print -quit)" ]; then \
	  $(MAKE) --no-print-directory install; fi
	@"$(ENV_PYTHON)" -c "import keras" 2>/dev/null || $(MAKE) --no-print-directory python-env
	$(RSCRIPT) inst/scripts/demo.R

# rcheck tests the stack Debian bookworm has (reticulate 1.28, NumPy 1.26), newer-stack-test
# the newer one (reticulate >= 1.41, NumPy 2), both at once (r-tests); newer-stack-env comes
# first (test-envs) so that rcheck can also check what reticulate 1.28 says about an
# environment with NumPy 2. What test-envs made is not made again (-o). Last, the tests'
# time and CPU (timed): make test keeps both cores busy, so its time follows its CPU,
# and the same tests took 3,134 CPU-seconds in one hour of this 2-core machine and
# 5,244-5,927 in others (bench/results/ci-time-cpu-2026-12-01-census.md): the figure tells
# a slow machine from tests that cost more.
test: test-envs
	@$(call timed,make test,$(MAKE) --no-print-directory \
	  $(addprefix -o ,install python-env dev-env newer-stack-env) lint-and-pytest bench-smoke r-tests)

# What make test needs installed: every Debian package in one apt run (two at once would
# wait on dpkg's lock), then the newer stack's environment (newer-stack-env: trixie's
# reticulate built from source, a second Python environment) beside the test environment,
# the tests' MLflow server and pkgdown's configuration check. Each install is mostly one
# process (apt, pip, a compiler): one after the other on a fresh machine, they left one of
# the two cores idle for most of their time (bench/results/make-test-time-cpu-2026-11-27.md).
test-envs: install
	@$(call apt_install,$(TEST_APT_PACKAGES) $(NEWER_APT_PACKAGES) r-cran-pkgdown)
	$(call beside,-o install dev-env mlflow-server site-config,newer-stack-env,-o install)

# Install the Debian packages among $(1) that are missing.
define apt_install
missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
if [ -n "$$missing" ]; then \
  echo "Installing Debian packages:" $$missing; \
  $(SUDO) apt-get update -qq; \
  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
fi
endef

deps:
	@$(call apt_install,$(APT_PACKAGES))

# R CMD build knits the vignettes (their code runs, with the Python environment when there is
# one), so that the installed package lists them: vignette(package = "gpukeras"). make test
# knits and checks them in rcheck, so its own install skips them (a target-specific value is
# in force for the target's prerequisites too). The tarball is built outside the tree.
BUILD_FLAGS :=
test: BUILD_FLAGS := --no-build-vignettes
install: deps
	build=$$(mktemp -d); trap 'rm -rf "$$build"' EXIT; \
	  (cd "$$build" && R CMD build $(BUILD_FLAGS) "$(CURDIR)") > install.log 2>&1 && \
	  R CMD INSTALL --no-multiarch "$$build"/gpukeras_$(VERSION).tar.gz >> install.log 2>&1 || { cat install.log; exit 1; }
	@echo "gpukeras $(VERSION) installed"

python-env: install
	$(RSCRIPT) -e 'gpukeras::install_gpukeras("$(ENVNAME)")'

dev-env: python-env
	@$(call apt_install,$(TEST_APT_PACKAGES))
	@# The environment's NumPy stays (install_gpukeras() chose it for this reticulate): a test
	@# tool's newer NumPy would otherwise reach reticulate 1.28, which cannot convert NumPy 2.
	"$(ENV_PYTHON)" -m pip install -q --disable-pip-version-check -r python/requirements-dev.txt \
	  "numpy==$$("$(ENV_PYTHON)" -c 'import numpy; print(numpy.__version__)')"
	"$(ENV_PYTHON)" -m pip install -q --disable-pip-version-check --no-deps -r python/requirements-hub-nodeps.txt

# The tracking tests' MLflow server (`mlflow server`, with its basic authentication), in an
# environment of its own, as a team's server runs apart from its clients. In gpukeras' own
# environment the full mlflow brought scikit-learn, matplotlib and pandas, which Keras imports
# whenever they are installed (its scikit-learn wrapper, its image plots): 1.5 s more CPU for
# every fresh Python that imports Keras (4.6 s against 3.0 s, TensorFlow backend; 175 of
# them in pytest alone). That environment keeps the client users get (mlflow-skinny). uv
# (python/requirements-dev.txt) makes it: 10 s, where pip took 2 minutes of CPU. The tests
# find the server's command in GPUKERAS_MLFLOW_SERVER. It lives outside the tree: R CMD
# build (R 4.2) copies the whole tree before it drops what .Rbuildignore names, and its
# 23,500 files cost 18 s of system CPU a copy (rcheck's build, bench/gpu_r_bundle.sh's).
MLFLOW_SERVER_ENV ?= $(HOME)/.cache/gpukeras/mlflow-server
MLFLOW_SERVER := $(MLFLOW_SERVER_ENV)/bin/mlflow
export GPUKERAS_MLFLOW_SERVER := $(MLFLOW_SERVER)
mlflow-server: $(MLFLOW_SERVER)
$(MLFLOW_SERVER): python/requirements-mlflow-server.txt | dev-env
	rm -rf "$(MLFLOW_SERVER_ENV)"
	"$(dir $(ENV_PYTHON))uv" venv -q -p "$(ENV_PYTHON)" "$(MLFLOW_SERVER_ENV)"
	"$(dir $(ENV_PYTHON))uv" pip install -q --compile-bytecode --python "$(MLFLOW_SERVER_ENV)/bin/python" \
	  -r python/requirements-mlflow-server.txt

# The core's types (mypy, configured in python/pyproject.toml) and the R code (lintr, as .lintr
# says) side by side: each keeps one core busy, mypy 17 s and lintr 46 s in CI, one after the
# other (2026-11-27). load_all(helpers = TRUE) and testthat attached: the object_usage linter
# then knows this tree's functions, the tests' helpers and expectations.
lint:
	$(call beside,lint-r,lint-python)

lint-python:
	cd python && "$(ENV_PYTHON)" -m ruff check . ../inst/python ../bench && "$(ENV_PYTHON)" -m ruff format --check . ../inst/python ../bench
	cd python && "$(ENV_PYTHON)" -m mypy

lint-r:
	$(RSCRIPT) -e 'library(testthat); pkgload::load_all(helpers = TRUE, quiet = TRUE); lints <- lintr::lint_package(); print(lints); quit(status = length(lints) > 0)'

# Two test processes (pytest-xdist): most tests wait on child processes, so the two cores of
# CI stay busy (measured: 8.9 min against 11.5 in one process). A third gains nothing: the
# suite keeps both cores busy (-n 3: 503 s against 510 s, 15.3 min of user CPU; a fresh
# child on TensorFlow spends 3.6 s of it importing keras). --durations=30: every run
# lists its 30 slowest tests, where the suite's time goes. Coverage is `make coverage`:
# measured in every child Python too, it made this run 25 % longer (563 s against 448 s
# on 2 cores), and no test depends on it.
# --dist worksteal: each process takes a contiguous half of the tests and steals from the
# other's end when it runs dry, so a module's tests mostly share one process and its module
# fixtures are built once (the default `load` deals the first quarter out one test at a time,
# and both processes built them: 57 s of CPU against 66 s for test_scope, test_quantize,
# test_remat and test_weights on a quiet machine, 2026-11-29).
PYTEST = cd python && "$(ENV_PYTHON)" -m pytest -n 2 --dist worksteal --durations=30
# What a GPU user runs by default (the core's fit, predict, predict-to-file, search and its
# workers, export, background jobs) runs under a simulated GPU (GPUKERAS_SIMULATE_GPU,
# ?gpu_setup): gpu_setup()'s "auto" then chooses mixed_bfloat16 and the workers' GPU slots,
# as on a GPU, while the work runs on the CPU; on a CPU "auto" chooses float32, the path
# every other module and rcheck's R tests of the same verbs take (and test_simulated both).
SIMULATED_PYTEST := tests/test_fit.py tests/test_predict.py tests/test_predict_file.py \
	tests/test_search.py tests/test_export.py tests/test_job.py
SIMULATED_WORKERS := 2
pytest: pytest-cpu pytest-simulated
pytest-cpu:
	$(PYTEST) $(addprefix --ignore=,$(SIMULATED_PYTEST))
pytest-simulated:
	cd python && GPUKERAS_SIMULATE_GPU=true "$(ENV_PYTHON)" -m pytest -n $(SIMULATED_WORKERS) --dist worksteal --durations=10 $(SIMULATED_PYTEST)

# The same run, with the core's coverage (its fresh processes included: python/pyproject.toml).
coverage: dev-env
	$(PYTEST) -p pytest_cov --cov=gpukeras --cov-report=term

# Whether CRAN answers: the CRAN-incoming checks that need the Internet (URLs in the docs,
# CRAN's index) run only then, since offline they fail for want of a network, not of the package.
CRAN_ONLINE = $(shell $(RSCRIPT) -e 'cat(!inherits(try(curlGetHeaders("https://cloud.r-project.org", timeout = 10), silent = TRUE), "try-error"))')

# R CMD check --as-cran runs the testthat suite and the examples against the built tarball
# and checks its vignettes (whose code ran in R CMD build, see below). NOT_CRAN=true: the expect_snapshot() tests of error messages run (testthat
# skips them on CRAN), and fail where a snapshot is missing or differs (CI sets CI=true). --no-manual: the PDF manual needs LaTeX, which is not installed here (the Rd
# files are still checked). --no-vignettes: R CMD build has just knitted every vignette (their
# code ran, with Python, and an error in it fails the build), so check does not run their
# code again (measured: 75 s of CPU in one process, the eight vignettes' tangled code) nor
# rebuild what was just built; it still checks the vignette files and the built ones in
# inst/doc (a tarball built without them: 2 WARNINGs, files in 'vignettes' but none in
# 'inst/doc', and a NOTE, a VignetteBuilder field but no prebuilt vignette index; make test
# knits them nowhere else, 80-90 s of CPU). _R_CHECK_SYSTEM_CLOCK_=false: the clock check
# asks a web time service (worldtimeapi.org, often down) about this machine's clock, not
# about the package.
# TESTTHAT_PARALLEL=true: the test files in two R processes, the slow ones first
# (Config/testthat/start-first); measured: 4.8-5.2 min against 7.5 in one. Only here, on
# the check's copy of tests/: testthat 3.1.6 (bookworm's) deletes the snapshot files
# after a parallel run, which in a working tree would take them from the developer.
# GPUKERAS_TESTS_ELSEWHERE: the files the newer stack's simulated-GPU run tests alone
# (SIMULATED_ONLY, see there) are left out here.
# _R_CHECK_DONTTEST_EXAMPLES_=false: --as-cran runs the examples twice, without their
# \donttest parts (timed: over 5 s is a NOTE), then all of them again with those parts (R 4.2:
# "checking examples with --run-donttest", untimed): 29-37 s and 35-39 s of CPU (2026-11-29).
# Here the check runs them once, timed as CRAN times them (its log then says "found \donttest
# examples", no NOTE), and the six examples with a \donttest part run after it, whole
# (example(run.donttest = TRUE)), in one R process on the check's copy of the package
# (DONTTEST_EXAMPLES; log: gpukeras.Rcheck/gpukeras-Ex-donttest.Rout): 10-16 s of CPU.
# (--run-donttest would time the \donttest parts too: gpu_runs()' example alone takes 4.6 s
# of CPU, over 5 s elapsed beside the newer stack's tests, a NOTE.)
rcheck:
	rm -rf gpukeras.Rcheck gpukeras_$(VERSION).tar.gz
	R CMD build . >/dev/null
	NOT_CRAN=true TESTTHAT_PARALLEL=true _R_CHECK_CRAN_INCOMING_REMOTE_=$(CRAN_ONLINE) _R_CHECK_SYSTEM_CLOCK_=false GPUKERAS_NUMPY2_PYTHON="$(NP2_PYTHON)" \
	  GPUKERAS_TESTS_ELSEWHERE='$(SIMULATED_ONLY)' \
	  _R_CHECK_DONTTEST_EXAMPLES_=false \
	  R CMD check --as-cran --no-manual --no-vignettes gpukeras_$(VERSION).tar.gz || { tail -n 60 gpukeras.Rcheck/tests/testthat.Rout* 2>/dev/null; exit 1; }
	$(DONTTEST_EXAMPLES)
	@# the summary, and the files run again because they had not reported (tests/testthat.R)
	@grep -E "^\[ FAIL|^No results came from" gpukeras.Rcheck/tests/testthat.Rout
	@! grep -q "^Status:.*WARNING" gpukeras.Rcheck/00check.log || { echo "R CMD check gave a WARNING"; exit 1; }

# The examples with a \donttest part, whole, in the order R CMD check runs examples (one
# example may use what an earlier one made), in gpukeras.Rcheck against the check's copy of
# the package: a topic has such a part where its example code differs with \donttest run.
define DONTTEST_EXAMPLES
cd gpukeras.Rcheck && R_LIBS="$(CURDIR)/gpukeras.Rcheck" LANGUAGE=en $(RSCRIPT) \
  -e 'code <- function(rd, donttest) { out <- tempfile(); tools::Rd2ex(rd, out, commentDonttest = !donttest); if (file.exists(out)) readLines(out) else character() }' \
  -e 'for (rd in tools::Rd_db("gpukeras", lib.loc = ".")) {' \
  -e '  full <- code(rd, TRUE)' \
  -e '  if (!identical(full, code(rd, FALSE))) example(sub("^### Name: ", "", full[1]), "gpukeras", character.only = TRUE, run.donttest = TRUE, ask = FALSE)' \
  -e '}' \
  > gpukeras-Ex-donttest.Rout 2>&1 || { tail -n 60 gpukeras-Ex-donttest.Rout; echo "an example's \donttest part failed"; exit 1; }
endef

bench:
	$(RSCRIPT) bench/check_time.R

# Every benchmark (bench/*.R, bench/*.py) in its smoke mode: tiny sizes, one round,
# results in a temporary folder (bench/lib/smoke.sh). A change that breaks one fails here.
bench-smoke: dev-env
	@$(call timed,bench-smoke,PYTHON="$(ENV_PYTHON)" bash bench/lib/smoke.sh)

# The newer stack R users have: reticulate >= 1.41 (py_require(), NumPy 2 support) with NumPy 2.
# Debian trixie's reticulate is built from its source package against this R into a library
# of its own (trixie's binary needs a newer libc than bookworm's); its R dependencies come
# from bookworm. install_gpukeras(), run under it, makes the second Python environment and
# must choose NumPy 2 by itself.
NEWER := $(CURDIR)/.newer-stack
NEWER_LIB := $(NEWER)/library
NEWER_APT_PACKAGES := g++ make r-cran-rcpp r-cran-rcpptoml r-cran-here r-cran-png r-cran-rappdirs \
	r-cran-jsonlite r-cran-withr r-cran-rlang r-cran-matrix
# apt reading trixie's source index only, kept with its lists and cache under $(NEWER): the
# system's apt sources, lists and cache stay as they are (no root needed).
TRIXIE_APT := -o Dir::Etc::sourcelist=$(NEWER)/apt/sources.list -o Dir::Etc::sourceparts=- \
	-o Dir::State::Lists=$(NEWER)/apt/lists -o Dir::Cache=$(NEWER)/apt/cache
NP2_ENVNAME := r-gpukeras-np2
NP2_PYTHON = $(shell $(RSCRIPT) -e 'cat(reticulate::virtualenv_python("$(NP2_ENVNAME)"))')
# uv, which reticulate >= 1.41 runs to make the environment it manages: one test asks for it.
UV_VERSION := $(shell sed -n 's/^uv==//p' python/requirements-dev.txt)

$(NEWER_LIB)/reticulate/DESCRIPTION: | deps
	@$(call apt_install,$(NEWER_APT_PACKAGES))
	rm -rf $(NEWER)/apt $(NEWER)/src
	mkdir -p $(NEWER)/apt/lists/partial $(NEWER)/apt/cache/archives/partial $(NEWER)/src $(NEWER_LIB)
	echo "deb-src http://deb.debian.org/debian trixie main" > $(NEWER)/apt/sources.list
	apt-get $(TRIXIE_APT) update -qq
	@# Only the upstream tarball is needed (apt checks it against trixie's signed index); the
	@# Debian part can be missing from the mirror, and then apt exits non-zero after fetching it.
	cd $(NEWER)/src && { apt-get $(TRIXIE_APT) source --download-only r-cran-reticulate > apt-source.log 2>&1 || true; }
	tarball=$$(ls $(NEWER)/src/r-cran-reticulate_*.orig.tar.* 2>/dev/null | head -n 1); \
	  if [ -z "$$tarball" ]; then cat $(NEWER)/src/apt-source.log; exit 1; fi; \
	  tar -xf "$$tarball" -C $(NEWER)/src
	R CMD INSTALL --no-multiarch -l $(NEWER_LIB) $(NEWER)/src/reticulate > $(NEWER)/reticulate-install.log 2>&1 || \
	  { tail -n 30 $(NEWER)/reticulate-install.log; exit 1; }
	R_LIBS=$(NEWER_LIB) $(RSCRIPT) -e 'cat("reticulate", format(packageVersion("reticulate")), "built in $(NEWER_LIB)\n")'

# gpu = FALSE: this environment is for the R/NumPy boundary, not the GPU (no CUDA wheels).
newer-stack-env: install $(NEWER_LIB)/reticulate/DESCRIPTION
	R_LIBS=$(NEWER_LIB) $(RSCRIPT) -e 'gpukeras::install_gpukeras("$(NP2_ENVNAME)", gpu = FALSE)'
	"$(NP2_PYTHON)" -c 'import numpy, sys; print("NumPy", numpy.__version__); sys.exit(not numpy.__version__.startswith("2."))' || \
	  { echo "install_gpukeras() under reticulate >= 1.41 did not install NumPy 2"; exit 1; }
	"$(NP2_PYTHON)" -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	@# JAX, as on the GPU machines (their stack is this one): on it gpu_cv() and gpu_search()
	@# train populations by default, which the simulated GPU's R tests then take (python/requirements-dev.txt's pins).
	"$(NP2_PYTHON)" -m pip install -q --disable-pip-version-check $$(grep -E '^jax(lib)?==' python/requirements-dev.txt)

# The testthat files about what the newer stack changes, on it: R data into NumPy 2 and
# back (convert, dataset, predict, fit's results), which Python reticulate >= 1.41
# chooses and installs (python, install, check), keras3/tfdatasets objects (guests).
# rcheck runs them on the base stack, with every file but the simulated GPU's (below); the
# others cross the same boundary through these functions, so running them here too ran the
# suite twice for nothing. NEWER_TESTS, a regular expression testthat::test_dir() matches
# file names against (e.g. 'convert|dataset'), runs other files instead, slow ones too
# (mark_slow()).
NEWER_BOUNDARY := ^(convert|dataset|dataset-files|factors|python|install|bad-input-install|bad-input-data|check|check-fix|errors|guests)$$
NEWER_TESTS :=
# ... and, on the stack the GPU machines have (reticulate >= 1.41, NumPy 2), what a GPU user
# runs by default, under a simulated GPU (GPUKERAS_SIMULATE_GPU, ?gpu_setup: the "auto"
# choices of a GPU of compute capability 9.0 with 80 GB, mixed_bfloat16 among them, while the
# work runs on the CPU): fit, predict, evaluate, predict-to-file, cv and search (with their
# populations on JAX), serve, export and background jobs, slow ones too. These files run
# here alone (SIMULATED_ONLY): rcheck leaves them out (GPUKERAS_TESTS_ELSEWHERE,
# tests/testthat.R). Run in both, on the CPU's choices there, they cost 650-700 CPU-seconds
# more of a CPU-bound make test (bench/results/ci-r-files-2026-12-01.md); the CPU's choices
# of the same verbs are the ones every other file's fits take, as in pytest's modules but
# the simulated ones. But for export: its ONNX cases need tf2onnx, which only the base
# stack's environment has (python/requirements-dev.txt), so rcheck runs it too.
SIMULATED_GPU_TESTS := ^(fit|predict|predict-file|cv|cv-population|search|search-population|serve|export|job)$$
SIMULATED_ONLY := $(subst |export|,|,$(SIMULATED_GPU_TESTS))

# The files in two R processes (TESTTHAT_PARALLEL), as rcheck runs them: one process kept one
# core busy (measured: 287 s wall, 296 s CPU; two: 151 s); NEWER_CPUS processes (r-tests: one,
# see there). In a copy of tests/testthat, since
# bookworm's testthat deletes the snapshot files after a parallel run (see rcheck). A file
# that gave no result runs again alone (tests/testthat/reported.R, as in rcheck).
NEWER_CPUS := 2
newer-stack-test: newer-stack-env
	tests=$$(mktemp -d); trap 'rm -rf "$$tests"' EXIT; cp -r tests/testthat "$$tests"; \
	cd "$$tests/testthat" && TESTTHAT_PARALLEL=true TESTTHAT_CPUS=$(NEWER_CPUS) NOT_CRAN=true GPUKERAS_SKIP_SLOW=$(if $(NEWER_TESTS),false,true) R_LIBS=$(NEWER_LIB) GPUKERAS_PYTHON="$(NP2_PYTHON)" GPUKERAS_NUMPY2_PYTHON="$(NP2_PYTHON)" \
	  RETICULATE_UV="$(dir $(NP2_PYTHON))uv" $(RSCRIPT) -e 'stopifnot(packageVersion("reticulate") >= "1.41")' \
	  -e 'source("reported.R")' -e 'only <- "$(or $(NEWER_TESTS),$(NEWER_BOUNDARY))"' \
	  -e 'tested <- function(only) rerun_silent(testthat::test_dir(".", filter = only, package = "gpukeras", load_package = "installed", reporter = "check"), ".", only)' \
	  -e 'tested(only)' \
	  $(if $(NEWER_TESTS),,-e 'Sys.setenv(GPUKERAS_SIMULATE_GPU = "true", GPUKERAS_SKIP_SLOW = "false")' \
	  -e 'tested("$(SIMULATED_GPU_TESTS)")') \
	  2>&1 | tee $(NEWER)/testthat.log
	@! grep -E "^\[ FAIL [1-9]" $(NEWER)/testthat.log
	@# the check reporter gives each run's summary twice: both runs said FAIL 0
	@test "$$(grep -cE '^\[ FAIL 0 ' $(NEWER)/testthat.log)" -ge $(if $(NEWER_TESTS),1,3)

# Runs shell command $(2) in a subshell of its own, then, whether it failed or not, says "==
# $(1): N s and M CPU-seconds" and exits with its status: its time, and the CPU (user +
# system) of the processes it ran and waited for, from bash's `times` (written to a file
# first: in a pipe or a command substitution it runs in a new process, which has waited for
# none). A subshell of its own, since bash reaps a job run beside once it ends and a
# shell's `times` would then count that job's CPU too.
define timed
( began=$$SECONDS; cpu=$$(mktemp); trap 'rm -f "$$cpu"' EXIT; status=0; $(2) || status=$$?; times > "$$cpu"; \
  awk -v said="== $(1): $$((SECONDS - began)) s and " 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($$i, t, /[ms]/); n += 60 * t[1] + t[2] }; printf "%s%.0f CPU-seconds\n", said, n }' "$$cpu"; \
  exit $$status )
endef

# Make target $(2) (with make's arguments $(3)) beside target $(1): $(2)'s output waits in a
# file and follows $(1)'s, so that each reads in one piece; fails when either failed. Each
# says how long it took and its CPU (timed; where CI's time goes: bench/results/ci-time-*.md).
define beside
log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
  $(call timed,$(2),$(MAKE) --no-print-directory $(3) $(2)) > "$$log" 2>&1 & beside=$$!; \
  status=0; $(call timed,$(1),$(MAKE) --no-print-directory $(1)) || status=$$?; \
  beside_status=0; wait $$beside || beside_status=$$?; \
  echo "== $(2) (run beside $(1))"; cat "$$log"; \
  [ $$status -eq 0 ] && [ $$beside_status -eq 0 ]
endef

# lint, then the simulated GPU's modules in one test process, beside the CPU's modules:
# pytest's two workers leave gaps where a test waits on a child's timeout or heartbeat
# (make test on 2 cores is CPU-bound everywhere else), which lintr and mypy (about one core
# for 40 s) and the second run fill; one after the other, the first run's last minute and
# the second's start left a core idle. The benchmarks' smoke runs in that lane too were
# tried: the cores were idle less, but with three or four processes on two cores the same
# work took 9 % more CPU and ended 67 s later (bench/results/ci-time-cpu-2026-12-02-s28.md).
lint-and-pytest: dev-env mlflow-server
	$(call beside,pytest-cpu,lint pytest-simulated,SIMULATED_WORKERS=1)

# rcheck and newer-stack-test side by side. Every other step of make test keeps both cores
# busy, but R CMD build's knitting and R CMD check's own checks and examples before its tests
# run one R process for about 7 minutes, beside which the newer stack's tests run, in one
# test process: with two, three processes shared the two cores there, and the check's first
# example to import Keras (3 s of CPU) took 6.5 s, over R CMD check's 5 s (a NOTE). Once
# rcheck's tests run (two processes), the three keep both cores busy.
r-tests: newer-stack-env
	$(call beside,rcheck,newer-stack-test,-o newer-stack-env NEWER_CPUS=1)

# The pkgdown site: reference grouped by task and the vignettes as articles (_pkgdown.yml),
# built into docs/ and then checked: no broken internal link on any page, and the home page
# and gpu_fit()'s reference rendered by headless Chromium, screenshots and DOM read back
# (python/check_site.py). pkgdown installs the package into a temporary library itself, so
# the site documents these sources, not whatever copy is installed.
SITE_APT_PACKAGES := r-cran-pkgdown chromium

site-config:
	@$(call apt_install,r-cran-pkgdown)
	@# Every exported topic in a reference group and every vignette an article, or pkgdown stops.
	$(RSCRIPT) -e 'pkgdown::check_pkgdown()'

# The site builds with no network. pkgdown.internet = FALSE: pkgdown would ask CRAN,
# Bioconductor and crandb about the package for the home page's links and the news. downlit,
# which links code to the help of the packages it names, asks CRAN's package list about
# packages not installed here (library(keras3) in the README) and stops when CRAN cannot be
# reached: given an empty list, it leaves them unlinked. new_process = FALSE keeps that
# in force in the process that builds the pages.
site: deps site-config
	@$(call apt_install,$(SITE_APT_PACKAGES))
	@"$(ENV_PYTHON)" -c "import keras" 2>/dev/null || $(MAKE) --no-print-directory python-env
	rm -rf docs site-check
	$(RSCRIPT) -e 'options(pkgdown.internet = FALSE)' \
	  -e 'utils::assignInNamespace("CRAN_urls", function() data.frame(Package = character(), URL = character()), "downlit")' \
	  -e 'pkgdown::build_site(install = TRUE, new_process = FALSE, preview = FALSE)'
	python3 python/check_site.py docs --screenshots site-check
