#' Write an issue-ready report of the GPU stack
#'
#' Writes what a bug report about the GPU needs, as Markdown that renders on
#' GitHub: [gpu_check()]'s verdict, reasons and advice; the versions of R,
#' reticulate, Python, Keras and its framework; which Python R uses and why;
#' what R's Python sees beside what a `python -c` of the same Python, with
#' this session's environment variables, sees (the commonest report, "the GPU
#' is visible in Python but not in R", is a difference between the two); the
#' CUDA libraries this process has loaded (from `/proc/self/maps`: libcudart,
#' libcudnn, libcublas, libnccl, ..., with versions); the NVIDIA driver and
#' the GPUs NVML sees; and the environment variables that change what the
#' frameworks do: a fixed list of names (`CUDA_VISIBLE_DEVICES`,
#' `KERAS_BACKEND`, `LD_LIBRARY_PATH`, `PYTHONPATH`, `XLA_FLAGS`,
#' `TF_FORCE_GPU_ALLOW_GROWTH`, `JAX_PLATFORMS`, `RETICULATE_PYTHON`, ...) and
#' those starting with `XLA_PYTHON_CLIENT_` or `GPUKERAS_`. Nothing else: the
#' prefixes `TF_` and `NVIDIA_` also hold other programs' secrets
#' (Terraform's `TF_TOKEN_*` and `TF_VAR_*`, `NVIDIA_API_KEY`), and a listed
#' variable whose name says it is a token, key, secret or password shows
#' `<masked>`. A difference between R's Python and `python -c` comes with what
#' commonly causes it; `python -c` runs from an empty folder, so that a
#' `keras.py` in the working folder is not imported instead of Keras.
#'
#' The home folder becomes `~` (where a path component ends: `/home/al` leaves
#' `/home/alice` alone) and the user name `<user>` everywhere in the report,
#' so that it can be pasted into a public issue as it is. Read it before you
#' post it: other values (a host name in a variable, a project path outside
#' the home folder) are left as they are.
#'
#' @param file Where to write the report (a new file, in a folder that
#'   exists, unless `overwrite = TRUE`), or `NULL` to only return it.
#' @param check A [gpu_check()] result to report; `NULL` runs one.
#' @param probe For the check run here: also run its training probe (a few
#'   seconds), see [gpu_check()].
#' @param compare Also run a `python -c` of the same Python and compare
#'   what it sees with what R's Python sees (a few seconds: it imports Keras
#'   and its framework); `FALSE` reports R's side alone.
#' @param overwrite Replace `file` if it exists.
#' @param ... Not used: an argument gpu_report() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return The report, an object of class `gpukeras_report` (the Markdown
#'   lines), invisibly when written to `file`. `print()` shows it.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   # compare = FALSE: no `python -c` beside R's Python (it takes seconds)
#'   report <- gpu_report(file = NULL, probe = FALSE, compare = FALSE)
#'   report
#' }
gpu_report <- function(file = "gpukeras-report.md", check = NULL, probe = FALSE, compare = TRUE, overwrite = FALSE,
                       ...) {
  check_unknown_args("gpu_report")
  if (!is.null(file)) check_string(file)
  check_flag(probe)
  check_flag(compare)
  check_flag(overwrite)
  if (!is.null(check) && !inherits(check, "gpukeras_check")) {
    stop_input_type(check, "a gpu_check() result or NULL")
  }
  if (!is.null(file) && !dir.exists(dirname(path.expand(file)))) {
    abort_bad_argument(
      c(sprintf("`file` '%s' is in a folder that does not exist: '%s'.", file, dirname(file)),
        "Create the folder first, or give a file in an existing one.")
    )
  }
  if (!is.null(file) && file.exists(file) && !overwrite) {
    abort_bad_argument(
      c(sprintf("`file` '%s' exists already.", file), "Give another file, or overwrite = TRUE to replace it.")
    )
  }
  check <- check %||% gpu_check(probe = probe)
  # the home folder as `~`, the user name as `<user>`, as R knows them
  homes <- unique(c(normalizePath(path.expand("~"), mustWork = FALSE), path.expand("~"), Sys.getenv("HOME")))
  users <- unique(c(Sys.info()[["user"]], Sys.getenv(c("USER", "LOGNAME"))))
  lines <- core_call("report_markdown", homes = as_python(homes), users = as_python(users), check = list(
    gpukeras = format(utils::packageVersion("gpukeras")), verdict = check$verdict, reasons = as_python(check$reasons),
    advice = as_python(check$advice), stack = check$stack, full = as_python(format(check)),
    nvml = replace(check$nvml, "devices", list(lapply(check$nvml$devices, as_python)))
  ), compare = compare)
  report <- structure(unlist(lines), class = "gpukeras_report")
  if (is.null(file)) return(report)
  # An existing link is replaced, not followed.
  written <- write_file_atomic(path.expand(file), charToRaw(paste0(report, "\n", collapse = "")))
  if (!isTRUE(written)) abort_bad_argument(sprintf("Cannot write `file` '%s': %s.", file, written))
  cli::cli_inform(c(v = "Wrote the report to {.file {file}}: read it, then paste it into the issue."))
  invisible(report)
}

#' @export
format.gpukeras_report <- function(x, ...) unclass(x)

#' @export
print.gpukeras_report <- print_formatted
