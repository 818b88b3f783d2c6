# This file is part of the standard setup for testthat.
# It is recommended that you do not modify it.
#
# Where should you do additional test configuration?
# Learn more about the roles of various files in:
# * https://r-pkgs.org/tests.html
# * https://testthat.r-lib.org/reference/test_package.html#special-files

library(testthat)
library(gpukeras)

# GPUKERAS_TESTS_ELSEWHERE: a regular expression naming (as test_check()'s filter does) the
# files that another run of the same tests covers; make test's rcheck leaves out those its
# simulated-GPU run tests (the Makefile says why). Unset, as R CMD check has it, every file runs.
elsewhere <- Sys.getenv("GPUKERAS_TESTS_ELSEWHERE")
filter <- if (nzchar(elsewhere)) elsewhere
results <- test_check("gpukeras", filter = filter, invert = !is.null(filter))
# a file that did not report runs again, alone (testthat/reported.R says why)
source(file.path("testthat", "reported.R"))
rerun_silent(results, "testthat", filter, invert = !is.null(filter))
