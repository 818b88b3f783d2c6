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
    medians <- replicate(draws, stats::median(sample(ratios, replace = TRUE)))
  })
  unname(stats::quantile(medians, c(0.025, 0.975)))
}

# `result` as JSON in bench/results/<name>.json (<name>-quick.json for a quick run).
write_result <- function(result, name, quick = FALSE) {
  out <- sprintf("bench/results/%s%s.json", name, if (quick) "-quick" else "")
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
    gpu = if (length(gpus)) vapply(gpus, function(d) d$name, character(1)) else "none"
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

# Runs each of `ways` (functions returning timed()) once to warm up, then `rounds`
# times in an order that rotates each round, so no way always runs first or last.
# Returns list(seconds =, cpu_seconds =): per way, one number per round.
run_rounds <- function(ways, rounds) {
  cat("warming up ...\n")
  for (way in names(ways)) ways[[way]]()
  seconds <- setNames(vector("list", length(ways)), names(ways))
  cpu_seconds <- seconds
  for (round in seq_len(rounds)) {
    order <- names(ways)[(seq_along(ways) + round - 2L) %% length(ways) + 1L]
    for (way in order) {
      took <- ways[[way]]()
      seconds[[way]] <- c(seconds[[way]], took[["wall"]])
      cpu_seconds[[way]] <- c(cpu_seconds[[way]], took[["cpu"]])
    }
    cat(sprintf(
      "round %d: %s s\n", round,
      paste(sprintf("%s %.3f", names(seconds), vapply(seconds, utils::tail, numeric(1), 1)), collapse = ", ")
    ))
  }
  list(seconds = seconds, cpu_seconds = cpu_seconds)
}

# The median of per-round ratios, its bootstrap 95% interval, and the ratios.
ratio_summary <- function(ratios) {
  list(median = stats::median(ratios), ci95 = median_interval(ratios), rounds = ratios)
}
