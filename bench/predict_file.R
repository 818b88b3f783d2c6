# predict(fit, newdata, file = ) on data larger than memory: the peak memory of scoring a
# CSV file of 1e5 and of 1e6 rows, each in a fresh R process.
#
# The model is the README's: a 64-100-10 MLP (relu, softmax) fitted by gpu_fit() on the
# UCI digits (inst/extdata/digits.csv.gz, pixels / 16), saved with gpu_save(). The new
# data: `rows` digits drawn with replacement (pixels / 16), written to a CSV file of 64
# columns, read with gpu_dataset(file, batch_size, shuffle = FALSE). In each fresh R
# process (callr): gpu_load() the model, make the dataset, then one of
#   file:   predict(model, ds, file = <csv>): batch by batch, nothing held whole;
#   memory: predict(model, ds): Keras' own predict() keeps every batch's outputs and R
#           gets them all (the way that grows with the rows, for contrast).
# Peak memory is the process's own high-water mark of resident memory (VmHWM in
# /proc/self/status) at its end: R, Python, TensorFlow, the data and the outputs. Its
# resident memory before predict() (VmRSS) is kept too. The core's seconds in the model,
# in writing the CSV lines and in reading the data tell whether writing is the
# bottleneck. Goal: peak(1e6 rows) / peak(1e5 rows) <= 1.2 with `file`.
#
# Usage (from the repository root): Rscript bench/predict_file.R [--quick | --smoke]
# Writes bench/results/predict-file-cpu.json (-quick with --quick: one round; a smoke run:
# 1e3 and 1e4 rows, see bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()
code <- code_state() # before the run: the code measured, not what changed while it ran

sizes <- if (mode$smoke) c(1e3, 1e4) else c(1e5, 1e6)
rounds <- if (mode$smoke || mode$quick) 1L else 2L
batch_size <- 1024L
goal <- list(peak_ratio = 1.2)
work <- tempfile("bench-predict-file-")
dir.create(work)

# The README's model, fitted and saved.
digits <- utils::read.csv(system.file("extdata", "digits.csv.gz", package = "gpukeras"), header = FALSE)
pixels <- as.matrix(digits[, 1:64]) / 16
keras <- gpu_keras()
model <- keras$Sequential(list(
  keras$Input(shape = 64),
  keras$layers$Dense(100, activation = "relu"),
  keras$layers$Dense(10, activation = "softmax")
))
model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
ds <- gpu_dataset(pixels, factor(digits$V65), batch_size = 64, validation_split = 0.2, seed = 1)
fit <- gpu_fit(model, ds, epochs = if (mode$smoke) 1 else 5, seed = 1, verbose = 0)
model_path <- file.path(work, "digits.keras")
gpu_save(fit, model_path)

# `rows` digits drawn with replacement as a CSV file, written 1e5 rows at a time.
write_rows <- function(rows, path) {
  withr::with_seed(rows %% 1000, {
    for (start in seq(1, rows, by = 1e5)) {
      chunk <- pixels[sample.int(nrow(pixels), min(1e5, rows - start + 1), replace = TRUE), , drop = FALSE]
      utils::write.table(chunk, path, sep = ",", row.names = FALSE, col.names = start == 1, append = start > 1)
    }
  })
  path
}
inputs <- vapply(sizes, function(rows) write_rows(rows, file.path(work, sprintf("new-%d.csv", rows))), character(1))

# One measurement in a fresh R process: peak memory and seconds of one way on one file.
measure <- function(way, input, output) {
  callr::r(function(way, input, output, model_path, batch_size, source_tree) {
    if (source_tree) pkgload::load_all(".", quiet = TRUE) else library(gpukeras)
    kib <- function(field) {
      line <- grep(paste0("^", field, ":"), readLines("/proc/self/status"), value = TRUE)
      as.numeric(gsub("\\D", "", line)) / 1024
    }
    model <- gpu_load(model_path)
    began <- Sys.time()
    ds <- gpu_dataset(input, batch_size = batch_size, shuffle = FALSE)
    dataset_seconds <- as.numeric(difftime(Sys.time(), began, units = "secs"))
    before <- kib("VmRSS")
    began <- Sys.time()
    result <- if (way == "file") predict(model, ds, file = output) else predict(model, ds)
    predict_seconds <- as.numeric(difftime(Sys.time(), began, units = "secs"))
    list(
      peak_rss_mib = kib("VmHWM"), rss_before_predict_mib = before,
      dataset_seconds = dataset_seconds, predict_seconds = predict_seconds,
      rows = if (way == "file") result$rows else nrow(result),
      core_seconds = if (way == "file") as.list(result$seconds),
      file_mib = if (way == "file") file.size(output) / 2^20
    )
  }, args = list(way, input, output, model_path, batch_size, from_sources), wd = getwd())
}

runs <- list()
for (round in seq_len(rounds)) {
  for (i in seq_along(sizes)) {
    # alternate the order of sizes and ways from round to round
    at <- if (round %% 2 == 1) i else length(sizes) + 1 - i
    for (way in if (round %% 2 == 1) c("file", "memory") else c("memory", "file")) {
      output <- file.path(work, sprintf("predictions-%d.csv", round))
      got <- measure(way, inputs[[at]], output)
      unlink(output)
      got$way <- way
      got$size <- sizes[[at]]
      got$round <- round
      runs[[length(runs) + 1L]] <- got
      cat(sprintf(
        "round %d, %s rows, %-6s: peak %.0f MiB (before predict %.0f MiB), predict %.1f s\n",
        round, format(sizes[[at]], big.mark = ",", scientific = FALSE), way, got$peak_rss_mib, got$rss_before_predict_mib, got$predict_seconds
      ))
    }
  }
}

peak <- function(way, size) {
  stats::median(vapply(Filter(function(r) r$way == way && r$size == size, runs), `[[`, numeric(1), "peak_rss_mib"))
}
ratios <- list(
  file = peak("file", sizes[2]) / peak("file", sizes[1]),
  memory = peak("memory", sizes[2]) / peak("memory", sizes[1])
)
largest_file <- Filter(function(r) r$way == "file" && r$size == sizes[2], runs)
split <- vapply(c("model", "writing", "reading", "waiting_for_writer"), function(part) stats::median(vapply(largest_file, function(r) r$core_seconds[[part]], numeric(1))), numeric(1))

result <- list(
  benchmark = "predict_file",
  command = bench_command("bench/predict_file.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick,
  smoke = mode$smoke,
  machine = machine_facts(load_before),
  code = code,
  backend = keras$backend$backend(),
  versions = version_facts(),
  model = "README's: MLP 64-100-10 (relu, softmax), gpu_fit() on the UCI digits (pixels / 16), saved and gpu_load()ed in each process",
  data = "digits drawn with replacement, pixels / 16, as one CSV file of 64 columns; gpu_dataset(file, batch_size, shuffle = FALSE)",
  sizes = sizes,
  batch_size = batch_size,
  rounds = rounds,
  goal = goal,
  peak_rss_mib = list(
    file = stats::setNames(as.list(vapply(sizes, peak, numeric(1), way = "file")), format(sizes, scientific = TRUE)),
    memory = stats::setNames(as.list(vapply(sizes, peak, numeric(1), way = "memory")), format(sizes, scientific = TRUE))
  ),
  peak_ratio = ratios,
  largest_file_core_seconds = as.list(split),
  meets_goal = list(peak_ratio = ratios$file <= goal$peak_ratio),
  runs = runs,
  notes = c(
    "peak_rss_mib: the median over rounds of each fresh R process's VmHWM (/proc/self/status) at its end; peak_ratio: of the larger size over the smaller.",
    "file: predict(model, ds, file = ) writes each batch's rows as it goes (model$predict_on_batch per batch); it first makes the dataset again without its in-memory cache (gpu_dataset()'s default cache = TRUE), which scans the CSV file once more. memory: predict(model, ds) as before, Keras' predict() keeping every batch's outputs and R getting them all, the dataset's cache filling as it reads.",
    "largest_file_core_seconds: the core's seconds for the larger size with `file`: waiting for the next batch of the dataset (tf.data reading and decoding the input CSV), in the model, formatting and writing the CSV lines (in a thread of its own, beside the other two) and waiting for that writer; predict_seconds less reading, model and waiting_for_writer is mostly making the dataset again without its cache.",
    "2 CPU cores shared with other work: seconds vary from run to run; memory much less."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
out <- write_result(result, "predict-file-cpu", mode)
unlink(work, recursive = TRUE)

cat(sprintf(
  "peak memory %s -> %s rows: with file %.0f -> %.0f MiB (%.2fx, goal <= %.1f); without %.0f -> %.0f MiB (%.2fx)\n",
  format(sizes[1], big.mark = ",", scientific = FALSE), format(sizes[2], big.mark = ",", scientific = FALSE),
  peak("file", sizes[1]), peak("file", sizes[2]), ratios$file, goal$peak_ratio,
  peak("memory", sizes[1]), peak("memory", sizes[2]), ratios$memory
))
cat(sprintf(
  "core seconds for %s rows with file: reading %.1f, model %.1f, writing %.1f (beside them), waiting for the writer %.1f\n",
  format(sizes[2], big.mark = ",", scientific = FALSE), split[["reading"]], split[["model"]], split[["writing"]], split[["waiting_for_writer"]]
))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
