# The copies R data goes through on its way to Keras: R -> NumPy -> tf.data.
#
# Builds one large R double matrix (200 MiB: 2,621,440 rows x 10 columns; R stores it
# column-major) and records, after each stage, the process's resident memory (VmRSS
# from /proc/self/status; R, Python and TensorFlow share the process) and its peak
# during the stage (VmHWM, reset before each stage through /proc/self/clear_refs),
# together with what NumPy says about the array:
#   1. reticulate::r_to_py(x)         does NumPy wrap R's memory, or copy it?
#   2. gpu_as_numpy(x)                float32, C order: one copy of half the size?
#   3. gpu_dataset(x, y)              its R side (checks, no copy), then the core (the
#                                     one copy, in float32, the tensors sharing it, the
#                                     tf.data pipeline): one copy of half the size?
#   4. iterating it                   the iterator (tf.data's graph rewrites serialize the
#                                     pipeline, its tensors included), the first batches
#   5. gpu_dataset(x, y, validation_split = 0.2)
# Two NumPy views of one small matrix show directly whether the memory is shared.
# Both R and Python collect garbage before each reading.
#
# Usage (from the repository root): Rscript bench/copies.R [--smoke]
# Writes bench/results/copies.json (a smoke run: see bench/lib/common.R).
source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()

rows <- if (mode$smoke) 10240L else 2621440L

columns <- 10L
mib <- 2^20

status_kib <- function(field) {
  line <- grep(paste0("^", field, ":"), readLines("/proc/self/status"), value = TRUE)
  as.numeric(sub("\\D*(\\d+).*", "\\1", line))
}
py_gc <- NULL
collect <- function() {
  invisible(gc(full = TRUE))
  if (!is.null(py_gc)) invisible(py_gc$collect())
}
can_reset_peak <- tryCatch(
  {
    writeLines("5", "/proc/self/clear_refs")
    TRUE
  },
  error = function(e) FALSE,
  warning = function(w) FALSE
)

stages <- list()
# Run `expr` as a stage: resident memory after it (garbage collected) and its peak.
stage <- function(name, expr, python = NULL) {
  collect()
  before <- status_kib("VmRSS")
  if (can_reset_peak) writeLines("5", "/proc/self/clear_refs")
  seconds <- system.time(value <- force(expr))[["elapsed"]]
  peak <- status_kib("VmHWM")
  collect()
  after <- status_kib("VmRSS")
  stages[[name]] <<- c(
    list(
      rss_before_mib = round(before / 1024, 1),
      rss_after_mib = round(after / 1024, 1),
      rss_added_mib = round((after - before) / 1024, 1),
      peak_added_mib = if (can_reset_peak) round((peak - before) / 1024, 1),
      seconds = round(seconds, 3)
    ),
    python
  )
  cat(sprintf(
    "%-44s RSS %+7.1f MiB (peak %+7.1f) -> %7.1f MiB  %.2f s\n", name,
    (after - before) / 1024, if (can_reset_peak) (peak - before) / 1024 else NA, after / 1024, seconds
  ))
  value
}

# NumPy's view of an array.
numpy_facts <- function(array) {
  flags <- array$flags
  list(
    dtype = reticulate::py_to_r(array$dtype$name),
    shape = unlist(reticulate::py_to_r(array$shape)),
    nbytes_mib = reticulate::py_to_r(array$nbytes) / mib,
    c_contiguous = reticulate::py_to_r(flags$c_contiguous),
    f_contiguous = reticulate::py_to_r(flags$f_contiguous),
    owndata = reticulate::py_to_r(flags$owndata),
    # NoneType: the array owns its buffer; otherwise what holds the memory it views.
    base_type = reticulate::py_to_r(builtins$type(array$base)$`__name__`)
  )
}

# Start Python, TensorFlow and tf.data first, so their own memory is not counted below.
keras <- gpu_keras()
tf <- reticulate::import("tensorflow")
np <- reticulate::import("numpy", convert = FALSE)
builtins <- reticulate::import_builtins(convert = FALSE)
py_gc <- reticulate::import("gc")
invisible(gpu_dataset(matrix(stats::runif(40), 10), stats::runif(10), batch_size = 4))

# Does NumPy view R's memory? Two conversions of one R matrix share their buffer only
# if both point into R's memory (a copy each time would give two buffers). reticulate
# makes such views read-only, so they cannot be written through to check.
probe <- matrix(as.double(1:6), nrow = 2)
probe_view <- reticulate::r_to_py(probe)
shares_r_memory <- reticulate::py_to_r(np$shares_memory(probe_view, reticulate::r_to_py(probe)))
gpu_as_numpy_shares <- reticulate::py_to_r(np$shares_memory(probe_view, gpu_as_numpy(probe)))

baseline <- status_kib("VmRSS")
set.seed(1)
x <- stage("R matrix (double, column-major)", {
  x <- stats::rnorm(rows * columns) # dim<- on a fresh vector does not copy it
  dim(x) <- c(rows, columns)
  x
})
y <- stats::runif(rows) # 20 MiB of labels (double), made outside the stages
x_view <- stage("reticulate::r_to_py(x)", reticulate::r_to_py(x))
stages[["reticulate::r_to_py(x)"]]$numpy <- numpy_facts(x_view)
x_numpy <- stage("gpu_as_numpy(x) (float32, C order)", gpu_as_numpy(x))
stages[["gpu_as_numpy(x) (float32, C order)"]]$numpy <- numpy_facts(x_numpy)
stages[["gpu_as_numpy(x) (float32, C order)"]]$shares_memory_with_r_view <-
  reticulate::py_to_r(np$shares_memory(x_view, x_numpy))
rm(x_view, x_numpy)
collect()

# gpu_dataset(x, y) in its two halves: the R side (checks, NA handling), then the core
# (pipeline.from_arrays: the one copy, tensors, shuffle, batch, prefetch).
as_pipeline_data <- utils::getFromNamespace("as_pipeline_data", "gpukeras")
handover_call <- utils::getFromNamespace("handover_call", "gpukeras")
kept_arrays <- utils::getFromNamespace("kept_arrays", "gpukeras")
data <- stage("gpu_dataset(), R side: checks", as_pipeline_data(x, y, "error"))
pipeline <- stage(
  "gpu_dataset(), core: the copy, tensors, tf.data pipeline",
  handover_call("dataset_from_arrays", data, list(copy = FALSE, x_dtype = "float32", batch_size = 256L, seed = 1L))
)
stages[["gpu_dataset(), core: the copy, tensors, tf.data pipeline"]]$numpy <- numpy_facts(kept_arrays(pipeline$arrays)$x)
# The tensors share the pipeline's own arrays: dropping R's references frees nothing.
invisible(stage("R drops its references to the data and the pipeline's arrays", {
  rm(data, envir = globalenv())
  pipeline$arrays <- NULL
  NULL
}))
iterator <- stage(
  "iterator created (tf.data applies its graph rewrites)",
  reticulate::as_iterator(pipeline$dataset)
)
invisible(stage("first 20 batches read", {
  for (i in seq_len(20)) reticulate::iter_next(iterator)
  NULL
}))
rm(iterator, pipeline)
invisible(stage("pipeline and iterator dropped", NULL))
split <- stage(
  "gpu_dataset(x, y, validation_split = 0.2)",
  gpu_dataset(x, y, batch_size = 256, seed = 1, validation_split = 0.2)
)
rm(split)
invisible(stage("split pipelines dropped", NULL))

result <- list(
  benchmark = "copies",
  command = bench_command("bench/copies.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  machine = list(
    cores = parallel::detectCores(),
    cpu = sub(".*: ", "", grep("model name", readLines("/proc/cpuinfo"), value = TRUE)[1])
  ),
  code = code_state(),
  versions = list(
    R = paste(R.version$major, R.version$minor, sep = "."),
    reticulate = as.character(utils::packageVersion("reticulate")),
    tensorflow = tf$`__version__`,
    keras = keras$`__version__`,
    numpy = reticulate::py_to_r(np$`__version__`)
  ),
  data = list(
    rows = rows, columns = columns, r_type = "double",
    r_mib = rows * columns * 8 / mib, float32_mib = rows * columns * 4 / mib,
    labels_mib = rows * 8 / mib
  ),
  rss_baseline_mib = round(baseline / 1024, 1),
  peak_measured = can_reset_peak,
  r_to_py_shares_r_memory = shares_r_memory,
  gpu_as_numpy_shares_r_memory = gpu_as_numpy_shares,
  stages = stages
)
out <- write_result(result, "copies", mode)
cat(sprintf(
  "r_to_py() shares R's memory: %s; gpu_as_numpy() shares it: %s\nwrote %s\n",
  shares_r_memory, gpu_as_numpy_shares, out
))
