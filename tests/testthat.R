# This file is part of the standard setup for testthat.
# It is recommended that you do not modify it.
#
# Where should you do additional test configuration?
# Learn more about the roles of various files in:
# * https://r-pkgs.org/tests.html
# * https://testthat.r-lib.org/reference/test_package.html#special-files

library(testthat)
library(gpukeras)

results <- test_check("gpukeras")
# a file that did not report runs again, alone (testthat/reported.R says why)
source(file.path("testthat", "reported.R"))
rerun_silent(results, "testthat")
