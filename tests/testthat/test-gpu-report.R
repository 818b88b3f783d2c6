# gpu_report() (issue #27, item 1): Markdown a user pastes into a GitHub issue, with the
# verdict, versions, what R and `python -c` see, CUDA libraries, NVML, the variables that
# matter; the home folder and the user name masked.

test_that("the report renders as GitHub Markdown with every section, and masks the home folder", {
  skip_if_no_python()
  path <- file.path(withr::local_tempdir(), "report.md")
  expect_message(report <- gpu_report(path, check = shared_check()), "Wrote the report")
  expect_s3_class(report, "gpukeras_report")
  text <- readLines(path)
  expect_identical(text, unclass(report))
  html <- commonmark::markdown_html(paste(text, collapse = "\n"), extensions = TRUE)
  headings <- gsub("<[^>]+>", "", regmatches(html, gregexpr("<h3>.*?</h3>", html, perl = TRUE))[[1]])
  expect_identical(
    headings[-1],
    c(
      "Versions", "Which Python R uses", "What R sees, and what python -c sees",
      "CUDA libraries loaded by this process",
      "NVIDIA driver and GPUs (NVML)", "Environment variables"
    )
  )
  said <- c(
    gpu_used = "the GPU is used", gpu_available_not_used = "a GPU is available but NOT used", no_gpu = "no GPU is used"
  )
  expect_identical(headings[1], sprintf("Verdict: %s (%s)", shared_check()$verdict, said[[shared_check()$verdict]]))
  # Tables, not text with bars: the versions, and R beside python -c.
  expect_gte(lengths(regmatches(html, gregexpr("<table>", html))), 2L)
  expect_match(html, "<td>Python executable</td>", fixed = TRUE)
  expect_match(html, "<details><summary>gpu_check() in full</summary>", fixed = TRUE)
  python <- shared_check()$stack$python_executable
  home <- normalizePath("~")
  expect_false(any(grepl(home, text, fixed = TRUE)))
  if (startsWith(python, home)) expect_true(any(grepl(sub(home, "~", python, fixed = TRUE), text, fixed = TRUE)))
})

test_that("python -c sees the same Python, and a difference in the environment shows", {
  skip_if_no_python()
  report <- gpu_report(NULL, check = shared_check())
  executable <- grep("^\\| Python executable", report, value = TRUE)
  cells <- trimws(strsplit(executable, "|", fixed = TRUE)[[1]])
  expect_identical(cells[3], cells[4])
  expect_match(paste(report, collapse = "\n"), "| Keras | ", fixed = TRUE)
})

test_that("compare = FALSE reports R's Python alone, without running python -c", {
  skip_if_no_python()
  report <- gpu_report(NULL, check = shared_check(), compare = FALSE)
  expect_true("`python -c` not run (`compare = FALSE`)." %in% report)
  expect_match(paste(report, collapse = "\n"), "| Python executable | ", fixed = TRUE)
  expect_false(any(grepl("`python -c` |", report, fixed = TRUE)))
})

test_that("the report refuses a file it would overwrite, and a check that is not one", {
  skip_if_no_python()
  path <- withr::local_tempfile(fileext = ".md")
  writeLines("mine", path)
  expect_snapshot(error = TRUE, transform = function(x) gsub("'[^']*[.]md'", "'<file>'", x), {
    gpu_report(path, check = shared_check())
    gpu_report(path, check = list(verdict = "gpu_used"))
  })
  expect_snapshot(error = TRUE, gpu_report("no-such-folder/report.md", check = shared_check()))
  expect_false(dir.exists("no-such-folder"))
  expect_identical(readLines(path), "mine")
  expect_message(gpu_report(path, check = shared_check(), overwrite = TRUE), "Wrote the report")
  expect_match(readLines(path)[1], "## gpukeras report", fixed = TRUE)
})
