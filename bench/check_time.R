# Cold wall time of `Rscript -e 'gpukeras::gpu_check()'`: a new R process each
# time, so Python, TensorFlow and Keras start from nothing, as for a user.
# Usage: Rscript bench/check_time.R [runs | --smoke]   (target: < 15 s on a 2-core machine)
# Writes bench/results/check_time.json (a smoke run, one run: see bench/lib/common.R).
source("bench/lib/common.R")
mode <- bench_mode()
args <- commandArgs(trailingOnly = TRUE)
counts <- suppressWarnings(as.integer(args))
runs <- if (mode$smoke) 1L else if (any(!is.na(counts))) counts[!is.na(counts)][[1]] else 3L
rscript <- file.path(R.home("bin"), "Rscript")
command <- "gpukeras::gpu_check()"

seconds <- vapply(seq_len(runs), function(i) {
  started <- Sys.time()
  status <- system2(rscript, c("-e", shQuote(command)), stdout = FALSE, stderr = FALSE)
  if (status != 0) stop("`Rscript -e '", command, "'` failed with status ", status)
  as.numeric(difftime(Sys.time(), started, units = "secs"))
}, numeric(1))

result <- list(
  benchmark = "check_time",
  command = sprintf("Rscript -e '%s'", command),
  date = format(Sys.time(), "%Y-%m-%d"),
  machine = list(
    cores = parallel::detectCores(),
    cpu = sub(".*: ", "", grep("model name", readLines("/proc/cpuinfo"), value = TRUE)[1]),
    gpu = "none"
  ),
  runs = runs,
  seconds = I(round(seconds, 2)),
  median_seconds = round(stats::median(seconds), 2),
  target_seconds = 15
)
cat(sprintf(
  "cold gpu_check(): median %.1f s over %d runs (%s s); target < 15 s\n",
  result$median_seconds, runs, paste(result$seconds, collapse = ", ")
))
out <- write_result(result, "check_time", mode)
cat("wrote", out, "\n")
