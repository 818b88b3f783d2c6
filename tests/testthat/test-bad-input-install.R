# Bad inputs to the environment functions: install_gpukeras(),
# gpukeras_requirements(), gpukeras_python(), and what every function that
# needs Python says when there is none. Each row must fail with a classed
# error whose message says what to do (see helper-bad-input.R), without
# starting Python and without installing anything (`envname` is a path in a
# temporary folder).

checked <- check_before_python(
  # nolint start: line_length_linter. One case a row, its columns aligned.
  bad_inputs(
    ~name,                                          ~code,                                                            ~class,           ~message,
    "gpukeras_requirements: gpu NA",                gpukeras_requirements(gpu = NA),                                  "bad_argument",   "^`gpu` must be TRUE or FALSE, not `NA`",
    "gpukeras_requirements: gpu a word",            gpukeras_requirements(gpu = "yes"),                               "bad_argument",   "^`gpu` must be TRUE or FALSE, not `yes`",
    "gpukeras_requirements: gpu empty",             gpukeras_requirements(gpu = logical()),                           "bad_argument",   "^`gpu` must be TRUE or FALSE",
    "gpukeras_requirements: os NA",                 gpukeras_requirements(os = NA_character_),                        "bad_argument",   "^`os` must be one non-empty string",
    "gpukeras_requirements: os empty",              gpukeras_requirements(os = ""),                                   "bad_argument",   "^`os` must be one non-empty string",
    "gpukeras_requirements: os a number",           gpukeras_requirements(os = 1),                                    "bad_argument",   "^`os` must be one non-empty string, not `1`",
    "gpukeras_requirements: two systems",           gpukeras_requirements(os = c("Linux", "Darwin")),                 "bad_argument",   "^`os` must be one non-empty string, not a character of length 2",
    "gpukeras_requirements: reticulate a word",     gpukeras_requirements(reticulate = "new"),                        "bad_argument",   "^`reticulate` must be one version such as \"1.41.0\", not `new`",
    "gpukeras_requirements: reticulate NA",         gpukeras_requirements(reticulate = NA_character_),                "bad_argument",   "^`reticulate` must be one version",
    "gpukeras_requirements: reticulate a number",   gpukeras_requirements(reticulate = 1.41),                         "bad_argument",   "^`reticulate` must be one version such as \"1.41.0\", not `1.41`",
    "gpukeras_requirements: two reticulates",       gpukeras_requirements(reticulate = c("1.28", "1.41")),            "bad_argument",   "^`reticulate` must be one version.*length 2",
    "install_gpukeras: envname empty",              install_gpukeras(envname = ""),                                   "bad_argument",   "^`envname` must be one non-empty string",
    "install_gpukeras: envname NA",                 install_gpukeras(envname = NA_character_),                        "bad_argument",   "^`envname` must be one non-empty string",
    "install_gpukeras: envname a number",           install_gpukeras(envname = 1),                                    "bad_argument",   "^`envname` must be one non-empty string",
    "install_gpukeras: two envnames",               install_gpukeras(envname = c("a", "b")),                          "bad_argument",   "^`envname` must be one non-empty string",
    "install_gpukeras: gpu a word",                 install_gpukeras(envname, gpu = "yes"),                           "bad_argument",   "^`gpu` must be TRUE, FALSE or NA \\(detect\\), not `yes`",
    "install_gpukeras: gpu a number",               install_gpukeras(envname, gpu = 1),                               "bad_argument",   "^`gpu` must be TRUE, FALSE or NA \\(detect\\)",
    "install_gpukeras: gpu two",                    install_gpukeras(envname, gpu = c(TRUE, FALSE)),                  "bad_argument",   "^`gpu` must be TRUE, FALSE or NA",
    "install_gpukeras: python a number",            install_gpukeras(envname, gpu = FALSE, python = 3),               "bad_argument",   "^`python` must be one non-empty string",
    "install_gpukeras: python NA",                  install_gpukeras(envname, gpu = FALSE, python = NA_character_),   "bad_argument",   "^`python` must be one non-empty string",
    "install_gpukeras: python that does not exist", install_gpukeras(envname, gpu = FALSE, python = "/no/such/python"), "no_python",     "^`python` is '/no/such/python', which is not an executable.*leave `python` NULL",
    "gpukeras_python: GPUKERAS_PYTHON missing",     withr::with_envvar(c(GPUKERAS_PYTHON = "/no/such/python"), gpukeras_python()), "no_python_env", "^GPUKERAS_PYTHON is set to '/no/such/python', which does not exist.*install_gpukeras\\(\\)",
    "gpukeras_python: RETICULATE_PYTHON missing",   without_env(RETICULATE_PYTHON = "/no/such/python", gpukeras_python()), "no_python_env", "^RETICULATE_PYTHON is set to '/no/such/python', which does not exist",
    "gpu_keras: no Python environment",             without_env(gpu_keras()),                                         "no_python_env",  "^No Python environment for gpukeras was found.*Run install_gpukeras\\(\\) once",
    "gpu_devices: no Python environment",           without_env(gpu_devices()),                                       "no_python_env",  "^No Python environment for gpukeras was found",
    "gpu_check: no Python environment",             without_env(gpu_check()),                                         "no_python_env",  "^No Python environment for gpukeras was found.*GPUKERAS_PYTHON",
    "gpu_as_numpy: no Python environment",          without_env(gpu_as_numpy(1:3)),                                   "no_python_env",  "^No Python environment for gpukeras was found"
  ),
  # nolint end
  setup = quote({
    envname <- file.path(tempfile("gpukeras-bad-input-"), "env")
    # `code` with no Python environment to be found: none named by the
    # variables or, after them, in reticulate's virtualenv folder; and none
    # that reticulate >= 1.41 would make for py_require().
    without_env <- function(code, ...) {
      variables <- c(
        GPUKERAS_PYTHON = NA, RETICULATE_PYTHON = NA, WORKON_HOME = tempfile("no-envs-"),
        RETICULATE_USE_MANAGED_VENV = "no"
      )
      overrides <- c(...)
      variables[names(overrides)] <- overrides
      withr::with_envvar(variables, withr::with_options(list(gpukeras.envname = "no-such-env"), code))
    }
  })
)

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}
