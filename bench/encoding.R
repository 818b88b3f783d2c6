# A data.frame with factors against the same rows already encoded: what gpu_fit() of R's
# data.frame costs in time and in the R process' memory (issue 76's goals).
#
# Data: `rows` rows of 2 numeric columns and one 53-level factor (uniform levels), labels
# 0/1. The model: MLP 55-32-2 (the data.frame's one-hot width), batch 1024, one epoch,
# seed 1, monitor off. Two ways, each in a fresh R process (so that its peak memory is its
# own), alternating from round to round:
#   frame:  gpu_fit(model, list(x = <data.frame>, y = y)): R's encoding, today's way;
#   matrix: gpu_fit(model, list(x = <float32 NumPy indicator matrix>, y = <int32 array>)),
#           the matrix made before the clock starts (and before the memory mark).
# Each process times gpu_fit() alone (wall clock, after one warm-up fit of 1,000 rows that
# starts TensorFlow and compiles nothing that counts), and reads the R process' peak
# resident memory (VmHWM, reset through /proc/self/clear_refs just before the fit) against
# its resident memory then: the fit's peak memory growth.
# Then the fitted model predicts `predict_rows` rows (1e5; the same batch size, Keras'
# default 32, both ways) after a warm-up of 1,000 rows on the same model:
#   frame:  predict(<the gpu_fit() result>, <data.frame>), the encoding applied by gpukeras;
#   matrix: Keras' own model$predict(<float32 NumPy indicator matrix>).
# Goals: frame - matrix <= 1.0 s (median of rounds), frame's peak growth <= 1.5 x the float32
# indicator matrix, frame's predict() <= 1.5 x Keras' own predict() (median of rounds).
#
# Usage (from the repository root): Rscript bench/encoding.R [--quick | --smoke]
# Writes bench/results/encoding-cpu-2026-11-28.json (a smoke run: see bench/lib/common.R).
# GPUKERAS_BENCH_LABEL adds a label to the name (e.g. "before").
load_before <- readLines("/proc/loadavg")
source("bench/lib/common.R")
mode <- bench_mode()
args <- commandArgs(trailingOnly = TRUE)

one_fit <- function(way, rows, predict_rows) {
  source("bench/lib/load.R")
  set.seed(1)
  levels <- sprintf("level%02d", 1:53)
  make <- function(n) {
    data.frame(a = stats::rnorm(n), b = stats::runif(n), f = factor(sample(levels, n, TRUE), levels = levels))
  }
  x <- make(rows)
  y <- as.integer(x$a > 0)
  np <- reticulate::import("numpy", convert = FALSE)
  keras <- gpu_keras()
  model <- function() {
    keras$utils$set_random_seed(1L)
    m <- keras$Sequential(list(
      keras$Input(shape = list(55L)), keras$layers$Dense(32L, activation = "relu"), keras$layers$Dense(2L)
    ))
    m$compile(optimizer = "adam", loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE))
    m
  }
  fit <- function(data, batch_size = 1024) {
    gpu_fit(model(), data, epochs = 1, batch_size = batch_size, seed = 1, monitor = FALSE, verbose = 0)
  }
  warm <- make(1000)
  invisible(fit(list(x = warm, y = as.integer(warm$a > 0)), batch_size = 100))
  if (way == "matrix") {
    float32 <- function(rows) {
      np$ascontiguousarray(reticulate::r_to_py(cbind(x$a, x$b, outer(as.integer(x$f), 1:53, `==`) + 0)[rows, ]),
                           dtype = "float32")
    }
    data <- list(x = float32(TRUE), y = np$array(array(y), dtype = "int32"))
    new <- list(warm = float32(1:1000), timed = float32(seq_len(predict_rows)))
    predicting <- function(fitted, rows) fitted$model$predict(rows, verbose = 0L)
  } else {
    data <- list(x = x, y = y)
    new <- list(warm = x[1:1000, ], timed = x[seq_len(predict_rows), ])
    predicting <- function(fitted, rows) stats::predict(fitted, rows)
  }
  invisible(gc(full = TRUE))
  invisible(reticulate::import("gc")$collect())
  status <- function(key) {
    line <- grep(paste0("^", key, ":"), readLines("/proc/self/status"), value = TRUE)
    as.numeric(sub("\\D*(\\d+).*", "\\1", line)) * 1024
  }
  cat("5", file = "/proc/self/clear_refs")
  before <- status("VmRSS")
  took <- system.time(result <- fit(data))[["elapsed"]]
  growth <- status("VmHWM") - before
  invisible(predicting(result, new$warm))
  predicted <- system.time(predictions <- predicting(result, new$timed))[["elapsed"]]
  stopifnot(NROW(predictions) == predict_rows)
  list(seconds = took, peak_growth_bytes = growth, loss = result$history$loss[[1]], predict_seconds = predicted)
}

if ("--child" %in% args) {
  way <- args[which(args == "--child") + 1L]
  rows <- as.integer(args[which(args == "--child") + 2L])
  out <- args[which(args == "--child") + 3L]
  writeLines(jsonlite::toJSON(one_fit(way, rows, min(rows, 100000L)), auto_unbox = TRUE, digits = NA), out)
  quit(save = "no")
}

code <- code_state()
rows <- if (mode$smoke) 2000L else 1000000L
rounds <- if (mode$smoke) 1L else if (mode$quick) 2L else 4L
run_child <- function(way) {
  out <- tempfile(fileext = ".json")
  status <- system2("Rscript", c("--no-save", "--no-restore", "bench/encoding.R", "--child", way, rows, out))
  if (status != 0 || !file.exists(out)) stop(sprintf("the %s fit failed (exit status %s)", way, status))
  jsonlite::fromJSON(out)
}
measured <- list(frame = list(), matrix = list())
for (round in seq_len(rounds)) {
  for (way in if (round %% 2L) c("frame", "matrix") else c("matrix", "frame")) {
    measured[[way]][[round]] <- run_child(way)
  }
  cat(sprintf(
    "round %d: frame %.2f s (peak +%.0f MB, predict %.2f s), matrix %.2f s (peak +%.0f MB, predict %.2f s)\n", round,
    measured$frame[[round]]$seconds, measured$frame[[round]]$peak_growth_bytes / 1e6, measured$frame[[round]]$predict_seconds,
    measured$matrix[[round]]$seconds, measured$matrix[[round]]$peak_growth_bytes / 1e6,
    measured$matrix[[round]]$predict_seconds
  ))
}
pick <- function(way, what) vapply(measured[[way]], `[[`, numeric(1), what)
matrix_bytes <- rows * 55 * 4
extra <- pick("frame", "seconds") - pick("matrix", "seconds")
result <- list(
  benchmark = "encoding", command = bench_command("bench/encoding.R", mode), code = code, date = format(Sys.Date()),
  rows = rows, columns = "2 numeric + one 53-level factor (55 model columns)", rounds = rounds,
  seconds = list(frame = pick("frame", "seconds"), matrix = pick("matrix", "seconds")),
  frame_minus_matrix_seconds = list(median = stats::median(extra), rounds = extra),
  peak_growth_bytes = list(frame = pick("frame", "peak_growth_bytes"), matrix = pick("matrix", "peak_growth_bytes")),
  float32_matrix_bytes = matrix_bytes,
  frame_peak_vs_float32_matrix = stats::median(pick("frame", "peak_growth_bytes")) / matrix_bytes,
  loss = list(frame = pick("frame", "loss"), matrix = pick("matrix", "loss")),
  predict_rows = min(rows, 100000L),
  predict_seconds = list(frame = pick("frame", "predict_seconds"), keras_on_matrix = pick("matrix", "predict_seconds")),
  predict_vs_keras = stats::median(pick("frame", "predict_seconds")) / stats::median(pick("matrix", "predict_seconds")),
  goal = list(frame_minus_matrix_seconds = 1.0, frame_peak_vs_float32_matrix = 1.5, predict_vs_keras = 1.5),
  machine = list(
    cores = parallel::detectCores(), loadavg_before = load_before, loadavg_after = readLines("/proc/loadavg")
  )
)
label <- Sys.getenv("GPUKERAS_BENCH_LABEL")
name <- paste0("encoding-cpu-2026-11-28", if (nzchar(label)) paste0("-", label))
cat(sprintf(
  paste(
    "frame - matrix: %.2f s (goal <= 1.0); frame's peak growth %.2f x the float32 matrix (goal <= 1.5);",
    "predict() %.2f x Keras' own (goal <= 1.5)\n"
  ),
  stats::median(extra), result$frame_peak_vs_float32_matrix, result$predict_vs_keras
))
cat("written:", write_result(result, name, mode), "\n")
