# Helpers the R benchmarks share: what was measured, and the interval of a median.

# The commit measured, and uncommitted changes to the package's code, if any.
code_state <- function() {
  git <- function(...) tryCatch(system2("git", c(...), stdout = TRUE, stderr = FALSE), error = function(e) character(), warning = function(w) character())
  changed <- git("status", "--porcelain", "--", "R", "inst/python")
  list(commit = git("rev-parse", "HEAD")[1], uncommitted = I(trimws(changed)))
}

# A bootstrap 95% interval of the median of per-round ratios (seeded: the same
# rounds give the same interval).
median_interval <- function(ratios, draws = 4000L) {
  withr::with_seed(1, {
    medians <- replicate(draws, stats::median(ratios[sample.int(length(ratios), replace = TRUE)]))
  })
  unname(stats::quantile(medians, c(0.025, 0.975)))
}

# How a benchmark runs, from its command-line arguments and the environment:
# `smoke` (--smoke, or GPUKERAS_BENCH_SMOKE=1: tiny sizes and one round, only to
# show that the script still runs; `make bench-smoke` runs every benchmark so),
# else `quick` (--quick: fewer rounds), else the full run.
bench_mode <- function(args = commandArgs(trailingOnly = TRUE)) {
  smoke <- "--smoke" %in% args || identical(Sys.getenv("GPUKERAS_BENCH_SMOKE"), "1")
  list(smoke = smoke, quick = !smoke && "--quick" %in% args)
}

# The command that ran a benchmark in `mode`, for its result (with the KERAS_BACKEND it ran
# under, where one was set).
bench_command <- function(script, mode) {
  backend <- Sys.getenv("KERAS_BACKEND")
  trimws(paste(
    if (nzchar(backend)) paste0("KERAS_BACKEND=", backend), "Rscript", script,
    if (mode$smoke) "--smoke" else if (mode$quick) "--quick" else ""
  ))
}

# Where a benchmark's Markdown goes: `--out FILE` among `args`; a smoke run's
# <name>-smoke.md in GPUKERAS_BENCH_OUT (else the session's temporary folder); else
# bench/results/<name>-<date>.md.
markdown_out <- function(name, mode, args = commandArgs(trailingOnly = TRUE)) {
  at <- match("--out", args)
  if (!is.na(at)) return(args[at + 1L])
  if (mode$smoke) return(file.path(Sys.getenv("GPUKERAS_BENCH_OUT", tempdir()), paste0(name, "-smoke.md")))
  sprintf("bench/results/%s-%s.md", name, Sys.Date())
}

# A result's name for a run on `backend`: "-<backend>" added to `name` for any but
# TensorFlow, so that a run on JAX is kept beside the TensorFlow one, not written over it.
on_backend <- function(name, backend) {
  if (identical(backend, "tensorflow")) name else paste0(name, "-", backend)
}

# `result` as JSON in bench/results/<name>.json (<name>-quick.json for a quick
# run); a smoke run's in GPUKERAS_BENCH_OUT (else the session's temporary
# folder), never over a measured result.
write_result <- function(result, name, mode) {
  out <- if (mode$smoke) {
    file.path(Sys.getenv("GPUKERAS_BENCH_OUT", tempdir()), paste0(name, "-smoke.json"))
  } else {
    sprintf("bench/results/%s%s.json", name, if (mode$quick) "-quick" else "")
  }
  dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
  writeLines(jsonlite::toJSON(result, auto_unbox = TRUE, pretty = TRUE, digits = NA, null = "null"), out)
  invisible(out)
}

# The machine a benchmark ran on, and how busy it was before and after.
machine_facts <- function(load_before) {
  tf <- reticulate::import("tensorflow")
  gpus <- tf$config$list_logical_devices("GPU")
  memory_kib <- as.numeric(sub("\\D*(\\d+).*", "\\1", grep("^MemTotal", readLines("/proc/meminfo"), value = TRUE)))
  list(
    cores = parallel::detectCores(),
    cpu = sub(".*: ", "", grep("model name", readLines("/proc/cpuinfo"), value = TRUE)[1]),
    memory_gib = round(memory_kib / 2^20, 1),
    loadavg_before = load_before,
    loadavg_after = readLines("/proc/loadavg"),
    gpu = if (length(gpus)) vapply(gpus, function(d) d$name, character(1)) else "none",
    tensorflow_build = if (tf$test$is_built_with_cuda()) "CUDA" else "CPU"
  )
}

# The versions of the stack measured.
version_facts <- function() {
  keras <- reticulate::import("keras")
  list(
    R = paste(R.version$major, R.version$minor, sep = "."),
    reticulate = as.character(utils::packageVersion("reticulate")),
    gpukeras = as.character(utils::packageVersion("gpukeras")),
    python = reticulate::import("platform")$python_version(),
    tensorflow = reticulate::import("tensorflow")$`__version__`,
    keras = keras$`__version__`,
    numpy = reticulate::py_to_r(reticulate::import("numpy", convert = FALSE)$`__version__`)
  )
}

# Wall-clock and CPU seconds (user + system, all threads) of `expr`, with R's and
# Python's garbage collected first, outside the time.
timed <- function(expr) {
  invisible(gc(full = TRUE))
  invisible(reticulate::import("gc")$collect())
  took <- system.time(expr)
  c(wall = took[["elapsed"]], cpu = took[["user.self"]] + took[["sys.self"]])
}

# Runs each of `ways` (functions returning timed(), with more named numbers if
# they like) once to warm up (not in a smoke run, whose one round is not a
# measure), then `rounds` times in an order that rotates each round, so no way
# always runs first or last. Returns, for each number the ways return (`seconds`
# for timed()'s wall, `cpu_seconds` for its cpu, else by its name), per way one
# number per round.
run_rounds <- function(ways, rounds, mode = bench_mode()) {
  if (!mode$smoke) {
    cat("warming up ...\n")
    for (way in names(ways)) ways[[way]]()
  }
  measured <- list()
  for (round in seq_len(rounds)) {
    order <- names(ways)[(seq_along(ways) + round - 2L) %% length(ways) + 1L]
    for (way in order) {
      took <- ways[[way]]()
      for (what in names(took)) {
        if (is.null(measured[[what]])) measured[[what]] <- list()
        measured[[what]][[way]] <- c(measured[[what]][[way]], took[[what]])
      }
    }
    cat(sprintf(
      "round %d: %s s\n", round,
      paste(sprintf("%s %.3f", names(measured$wall), vapply(measured$wall, utils::tail, numeric(1), 1)), collapse = ", ")
    ))
  }
  names(measured)[match(c("wall", "cpu"), names(measured))] <- c("seconds", "cpu_seconds")
  measured
}

# The median of per-round ratios, its bootstrap 95% interval, and the ratios.
ratio_summary <- function(ratios) {
  list(median = stats::median(ratios), ci95 = median_interval(ratios), rounds = ratios)
}

# A ratio_summary() as printed: "1.31 [1.11-1.57]".
interval <- function(r) sprintf("%.2f [%.2f-%.2f]", r$median, r$ci95[1], r$ci95[2])
