# Every test file must have reported. testthat 3.1.6 (Debian bookworm's), running the files in
# two processes (TESTTHAT_PARALLEL, as make test does), replays a file's results only when its
# process says the file is done, and has left out a whole file without a word (2026-11-27:
# test-bad-input-data.R, 325 expectations, which passed when run alone). Not a test file
# (testthat runs test*.R, helper*.R and setup*.R): tests/testthat.R and the Makefile's
# newer-stack-test source it after their runs.

# The files in `path` that `filter` chose (as testthat::test_dir() matches it, `invert`
# too) and that gave no result in `results`, run again alone: their failures stop with an error.
rerun_silent <- function(results, path, filter = NULL, invert = FALSE) {
  files <- list.files(path, "^test.*\\.[rR]$")
  if (!is.null(filter)) files <- files[grepl(filter, sub("^test[-_]?", "", sub("\\.[rR]$", "", files))) != invert]
  reported <- unique(vapply(results, function(result) basename(result$file), character(1)))
  silent <- setdiff(files, reported)
  if (!length(silent)) return(invisible(character()))
  message("No results came from ", paste(silent, collapse = ", "), ": running again, alone")
  for (file in silent) {
    again <- testthat::test_file(
      file.path(path, file),
      reporter = "check", package = "gpukeras", load_package = "installed", stop_on_failure = TRUE
    )
    if (!length(again)) stop(file, " reported no results when run alone either", call. = FALSE)
  }
  invisible(silent)
}
