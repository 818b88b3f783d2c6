# gpu_check(fix = TRUE): the repairs the core planned (tools/repair.py) and
# those of a stack the core cannot start on (NumPy, Keras), asked for and made here:
# pip runs with the Python in use, a variable goes into the .Renviron R reads.

# The repairs as a data.frame: `id`, `what` (one sentence), `how` (the pip
# commands or the line and file), `needs_restart`, and `status` ("done",
# "declined", "failed"; NA when gpu_check() was not asked to fix).
repairs_df <- function(repairs) {
  data.frame(
    id = vapply(repairs, `[[`, character(1), "id"), what = vapply(repairs, `[[`, character(1), "what"),
    how = vapply(repairs, `[[`, character(1), "how"),
    needs_restart = vapply(repairs, function(r) isTRUE(r$needs_restart), logical(1)),
    status = rep(NA_character_, length(repairs)), stringsAsFactors = FALSE
  )
}

# Words as a shell command shows them: quoted only where the shell would
# read them otherwise ('tensorflow[and-cuda]==2.21.0').
shell_words <- function(words) ifelse(grepl("^[A-Za-z0-9_./=:+-]+$", words), words, shQuote(words))

env_lines <- function(variables) paste0(names(variables), "=", unlist(variables))

# The file R read the user's variables from at start-up (see ?Startup):
# R_ENVIRON_USER, else ~/.Renviron. Not a .Renviron in the working folder: after a
# setwd() that is not the folder R started in (add_renviron_lines() says when one
# there would be read instead).
renviron_path <- function() {
  user <- Sys.getenv("R_ENVIRON_USER")
  if (nzchar(user)) return(path.expand(user))
  path.expand("~/.Renviron")
}

# Make each of `repairs` (the core's list) with `python`, first asking `ask`
# (a function of the question that returns TRUE to go ahead; by default the
# user, in an interactive session; NULL: without asking); returns the
# statuses. Says what it changed.
make_repairs <- function(repairs, python, ask = if (rlang::is_interactive()) utils::askYesNo,
                         call = caller_env()) {
  if (!length(repairs)) {
    cli::cli_alert_success("gpu_check(fix = TRUE): nothing to repair.")
    return(character())
  }
  if (is.null(ask)) {
    cli::cli_alert_info(
      "Not an interactive session: making the {length(repairs)} repair{?s} gpu_check(fix = TRUE) found without asking."
    )
  }
  status <- vapply(repairs, function(repair) {
    if (!is.null(ask) && !isTRUE(ask(sprintf("%s (%s)?", repair$what, repair$how)))) {
      cli::cli_alert_info("Not changed: {repair$what}.")
      return("declined")
    }
    make_repair(repair, python, call = call)
  }, character(1))
  restart <- vapply(repairs, function(r) isTRUE(r$needs_restart), logical(1))
  if (any(status == "done" & restart)) {
    cli::cli_alert_warning("Restart R for the changes to take effect, then run gpu_check() again.")
  } else if (any(status == "done")) {
    cli::cli_alert_info("Run gpu_check() again to see the change.")
  }
  status
}

# Make one repair (a list as the core plans it: `id`, `what`, `action`,
# `needs_restart`) in the environment of `python`, or in the .Renviron R reads;
# returns "done" or "failed", having said what it changed. Every wheel is
# downloaded before anything is uninstalled (offline, nothing changes), and what
# is uninstalled can be put back from its own wheel; an environment left without
# it is a gpukeras_error_repair that gives the one command that restores it.
make_repair <- function(repair, python, call = caller_env()) {
  action <- repair$action
  if (!is.null(action$set_env)) return(add_renviron_lines(renviron_path(), env_lines(action$set_env)))
  remove <- unlist(action$pip_uninstall)
  install <- unlist(action$pip_install)
  restore <- unlist(action$pip_restore)
  wheels <- withr::local_tempdir("gpukeras-repair-")
  fetched <- (!length(restore) || pip(python, c("download", "--no-deps", "--dest", wheels, restore))) &&
    (!length(install) || pip(python, c("download", "--dest", wheels, install)))
  if (!fetched) {
    cli::cli_alert_info("Nothing was changed: the wheels could not be downloaded (offline?).")
    return("failed")
  }
  if (length(remove) && !pip(python, c("uninstall", "-y", remove))) return("failed")
  from_wheels <- c("install", "--no-index", "--find-links", wheels)
  if (length(install) && !pip(python, c(from_wheels, install))) {
    if (!length(remove)) return("failed")
    # What was uninstalled goes back, so a failed repair leaves a working environment.
    if (length(restore) && pip(python, c(from_wheels, "--no-deps", restore))) {
      cli::cli_alert_info("Put back {.val {restore}}: the environment is as it was.")
      return("failed")
    }
    repair_broke_environment(python, remove, install, restore, call = call)
  }
  "done"
}

repair_broke_environment <- function(python, remove, install, restore, call = caller_env()) {
  back <- if (length(restore)) restore else remove
  gpukeras_abort(c(
    sprintf(paste0(
      "gpu_check(fix = TRUE) left the Python environment %s without %s: it uninstalled it, then could not install ",
      "%s nor put it back."
    ), python, paste(remove, collapse = ", "), paste(install, collapse = ", ")),
    sprintf(
      "Restore it (with a network) with: %s -m pip install %s",
      shell_words(python), paste(shell_words(back), collapse = " ")
    )
  ), "gpukeras_error_repair", call = call)
}

# Run `python -m pip <args>`, saying the command and pip's last word on it;
# TRUE when it succeeded.
pip <- function(python, args) {
  # nolint start: object_usage_linter. The cli messages below read it.
  command <- paste(shell_words(python), "-m pip", paste(shell_words(args), collapse = " "))
  # nolint end
  output <- suppressWarnings(system2(
    python, c("-m", "pip", shell_words(args)),
    stdout = TRUE, stderr = TRUE, env = python_run_env
  ))
  status <- attr(output, "status") %||% 0L
  said <- grep("^(Successfully|Found existing|Requirement already|ERROR)", output, value = TRUE)
  said <- paste(if (length(said)) said else utils::tail(output, 1), collapse = "; ")
  if (status == 0L) {
    cli::cli_alert_success("Ran {.code {command}}: {said}")
    return(TRUE)
  }
  cli::cli_alert_danger("{.code {command}} failed (status {status}): {paste(utils::tail(output, 3), collapse = '; ')}")
  FALSE
}

# Append `lines` ("NAME=value") to the .Renviron at `path`, each once: a line
# already there is left as it is, and nothing else in the file changes. The new
# file is written beside it, read back, and renamed over it (a full disk leaves
# the old one whole); a link is followed, so the file it names is the one changed.
add_renviron_lines <- function(path, lines) {
  if (file.exists(path)) path <- normalizePath(path)
  old <- if (file.exists(path)) readBin(path, "raw", n = file.size(path)) else raw()
  existing <- trimws(strsplit(rawToChar(old), "\n")[[1]])
  new <- setdiff(lines, existing)
  if (!length(new)) {
    cli::cli_alert_info("{.file {path}} already has {.code {lines}}: not changed.")
    return("done")
  }
  # A last line without its newline would join the first one added.
  ends_open <- length(old) > 0 && !identical(old[length(old)], as.raw(10L))
  wanted <- c(old, charToRaw(paste0(if (ends_open) "\n", paste0(new, "\n", collapse = ""))))
  written <- write_file_atomic(path, wanted)
  if (!isTRUE(written)) {
    cli::cli_alert_danger("Could not write {.file {path}} ({written}): it is as it was.")
    return("failed")
  }
  cli::cli_alert_success("Added {.code {new}} to {.file {path}} (R reads it when it starts).")
  here <- file.path(getwd(), ".Renviron")
  if (!nzchar(Sys.getenv("R_ENVIRON_USER")) && file.exists(here) && !identical(normalizePath(here), path)) {
    cli::cli_alert_info(
      "R started in {.path {getwd()}} reads {.file {here}} instead: add the line there for R started in that folder."
    )
  }
  "done"
}

# gpu_check(fix = TRUE) where the stack keeps the core from starting: reticulate < 1.38
# meets NumPy 2, or a Keras with a published safe_mode bypass (older than gpukeras
# needs). R repairs it (the pin install_gpukeras() uses) and says to restart; otherwise,
# or when the user declines, the error stands.
with_stack_repair <- function(code, fix, call = caller_env()) {
  if (!fix) return(code)
  repair <- function(error, package, what, why) {
    pin <- grep(sprintf("^%s==", package), gpukeras_requirements(), value = TRUE)
    planned <- list(
      id = package, needs_restart = TRUE, what = sprintf(what, pin), how = paste("pip install", pin),
      action = list(pip_install = list(pin))
    )
    if (!identical(make_repairs(list(planned), reticulate::py_config()$python, call = call), "done")) stop(error)
    gpukeras_abort(c(
      sprintf("gpu_check() could not run in this session: %s.", why),
      sprintf("%s is now installed: restart R, then run gpu_check() again.", pin)
    ), class(error)[1], call = call)
  }
  tryCatch(
    code,
    gpukeras_error_numpy_version = function(error) {
      repair(
        error, "numpy",
        sprintf(
          "Install %%s in the Python environment in use, which reticulate %s can convert",
          utils::packageVersion("reticulate")
        ),
        "this reticulate cannot convert NumPy 2 arrays"
      )
    },
    gpukeras_error_keras_too_old = function(error) {
      repair(
        error, "keras", "Install %s in the Python environment in use: its Keras has a published way around safe_mode",
        "its Keras has a published way to run code from a model file, even with safe_mode"
      )
    }
  )
}

# KERAS_BACKEND names a backend other than the one in use: it was set (or
# changed) after Python started, and Keras reads it once, when it starts.
# list(reason =, advice =), or NULL when it is unset or in force.
backend_ignored <- function(in_use) {
  asked <- Sys.getenv("KERAS_BACKEND")
  if (!nzchar(asked) || identical(asked, in_use)) return(NULL)
  list(
    reason = sprintf(
      "KERAS_BACKEND = %s was set after Python started, so it is ignored: this session runs %s",
      asked, in_use
    ),
    advice = sprintf(
      "Set KERAS_BACKEND=%s before the first gpukeras call (e.g. in %s), then restart R.",
      asked, renviron_path()
    )
  )
}
