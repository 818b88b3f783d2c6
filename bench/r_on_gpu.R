# The whole promise from R (issue #35, part 2): what an R user runs, on the GPU machine.
#
#   1. gpu_check(): the verdict and its evidence;
#   2. gpu_fit() of the README's digits model (R matrix and factor), and its report;
#   3. gpu_fit() of the MLP 20-128-128-2 on 102,400 rows, batch 256 (device-resident on
#      JAX: the data on the device, several steps per dispatch), and its report;
#   4. a background job (gpu_fit(background = TRUE)), then the standby process gpukeras
#      keeps waiting for the next one: NVML's memory used before, during and after, and
#      the GPU memory each of this session's child processes holds (it must hold none).
#
# Every output is written as Markdown to bench/results/r-on-gpu-<device>-<date>.md (a
# smoke run, --smoke: tiny sizes, the file in GPUKERAS_BENCH_OUT; --out FILE: there).
# On a GPU machine, through the bundle of bench/gpu_r_bundle.sh:
#   KERAS_BACKEND=jax .gpu-r/Rscript bench/r_on_gpu.R
# The installed gpukeras is used (the bundle's), as an R user has it.
suppressPackageStartupMessages(library(gpukeras))
source("bench/lib/common.R")
mode <- bench_mode()
args <- commandArgs(trailingOnly = TRUE)
out_arg <- match("--out", args)

lines <- character()
say <- function(...) {
  text <- paste0(...)
  cat(text, "\n", sep = "")
  lines <<- c(lines, text)
}
block <- function(title, expr_text, value) {
  say("\n## ", title, "\n")
  say("```r\n", expr_text, "\n```\n")
  say("```\n", paste(utils::capture.output(print(value)), collapse = "\n"), "\n```")
}
# NVML's view: each GPU's memory in use, and the compute processes holding memory
nvml_memory <- function() {
  devices <- gpu_devices()
  gpus <- devices$type == "GPU"
  if (any(gpus)) sum(devices$memory_total_mib[gpus] - devices$memory_free_mib[gpus]) else NA_real_
}
gpu_processes <- function() {
  smi <- Sys.which("nvidia-smi")
  if (!nzchar(smi)) {
    return(data.frame(pid = integer(), used_mib = numeric()))
  }
  rows <- system2(smi, c("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"),
                  stdout = TRUE, stderr = FALSE)
  rows <- strsplit(rows[nzchar(rows)], ",\\s*")
  data.frame(pid = as.integer(vapply(rows, `[`, "", 1)), used_mib = as.numeric(vapply(rows, `[`, "", 2)))
}
# This session's child processes (all generations), by pid
descendants <- function() {
  kids <- ps::ps_children(ps::ps_handle(), recursive = TRUE)
  data.frame(pid = vapply(kids, ps::ps_pid, 1L),
             name = vapply(kids, function(p) tryCatch(ps::ps_name(p), error = function(e) NA_character_), ""))
}

started <- Sys.time()
say("# gpukeras from R on ", Sys.getenv("GPUKERAS_DEVICE_NAME", "this machine"), ", ", format(Sys.Date()))
say("\nCommand: `", bench_command("bench/r_on_gpu.R", mode), "` (KERAS_BACKEND=",
    Sys.getenv("KERAS_BACKEND", "unset"), "). Code: ", code_state()$commit, ".")

# 1. Is the GPU used? -------------------------------------------------------------
check <- gpu_check(probe_seconds = if (mode$smoke) 0.5 else 3)
block("1. gpu_check()", "check <- gpu_check(probe_seconds = 3)\ncheck", check)
device <- if (identical(check$verdict, "gpu_used")) {
  rows <- gpu_devices()
  rows$name[rows$type == "GPU"][1]
} else {
  "cpu"
}
config <- reticulate::py_config()
numpy <- reticulate::py_to_r(reticulate::import("numpy", convert = FALSE)$`__version__`)
say("\nStack: R ", paste(R.version$major, R.version$minor, sep = "."), " (", R.home(), "), reticulate ",
    format(utils::packageVersion("reticulate")), ", gpukeras ", format(utils::packageVersion("gpukeras")),
    ", Python ", config$version, " (", config$python, "; libpython ", config$libpython, "), NumPy ", numpy,
    ", Keras backend ", reticulate::import("keras")$backend$backend(), ".")
say("Verdict: **", check$verdict, "**")

keras <- gpu_keras()

# 2. The README's digits model, from an R matrix and a factor ------------------------
digits <- utils::read.csv(system.file("extdata", "digits.csv.gz", package = "gpukeras"), header = FALSE)
x <- as.matrix(digits[, 1:64]) / 16
y <- factor(digits$V65)
set.seed(1)
held_out <- sample.int(nrow(x), round(0.2 * nrow(x)))
model <- keras$Sequential(list(
  keras$Input(shape = list(64L)),
  keras$layers$Dense(100L, activation = "relu"),
  keras$layers$Dense(10L, activation = "softmax")
))
model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
digits_fit <- gpu_fit(model, list(x = x[-held_out, ], y = y[-held_out]),
                      validation_data = list(x = x[held_out, ], y = y[held_out]),
                      epochs = if (mode$smoke) 1 else 5, batch_size = 64, seed = 1, verbose = 0)
block("2. gpu_fit(): the README's digits model", paste(
  "fit <- gpu_fit(model, list(x = x[-held_out, ], y = y[-held_out]),",
  "               validation_data = list(x = x[held_out, ], y = y[held_out]),",
  "               epochs = 5, batch_size = 64, seed = 1, verbose = 0)\nfit", sep = "\n"), digits_fit)

# 3. The MLP, device-resident on JAX -------------------------------------------------
rows <- if (mode$smoke) 2048L else 102400L
features <- matrix(stats::rnorm(rows * 20), ncol = 20)
labels <- as.integer(features[, 1] + 0.5 * features[, 2] > 0)
keras$utils$set_random_seed(1L)
mlp <- keras$Sequential(list(
  keras$Input(shape = list(20L)),
  keras$layers$Dense(128L, activation = "relu"),
  keras$layers$Dense(128L, activation = "relu"),
  keras$layers$Dense(2L)
))
mlp$compile(optimizer = "adam", loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE),
            metrics = list("accuracy"))
mlp_fit <- gpu_fit(mlp, list(x = features, y = labels), epochs = if (mode$smoke) 1 else 10,
                   batch_size = 256, seed = 1, verbose = 0)
block("3. gpu_fit(): the MLP 20-128-128-2, batch 256", paste(
  "mlp_fit <- gpu_fit(mlp, list(x = features, y = labels), epochs = 10, batch_size = 256,",
  "                   seed = 1, verbose = 0)\nmlp_fit", sep = "\n"), mlp_fit)
say("\nData path: ", mlp_fit$settings$data, "; steps per dispatch: ", mlp_fit$settings$steps_per_execution)

# 4. A background job, and the standby that waits for the next one --------------------
memory <- c(before_job = nvml_memory())
job <- gpu_fit(mlp, list(x = features, y = labels), epochs = if (mode$smoke) 1 else 5,
               batch_size = 256, seed = 1, verbose = 0, background = TRUE)
while (!gpu_job_status(job)$state %in% c("training", "done", "failed", "cancelled")) Sys.sleep(0.2)
memory["while_training"] <- nvml_memory()
job_fit <- gpu_job_wait(job, timeout = 600)
block("4. gpu_fit(background = TRUE)", paste(
  "job <- gpu_fit(mlp, list(x = features, y = labels), epochs = 5, batch_size = 256,",
  "               seed = 1, verbose = 0, background = TRUE)\njob_fit <- gpu_job_wait(job)\njob_fit", sep = "\n"),
  job_fit)
# the standby starts once a job trains, and is ready when its child has started Python
deadline <- Sys.time() + 60
repeat {
  children <- descendants()
  if (nrow(children) >= 2L || Sys.time() > deadline) break
  Sys.sleep(0.5)
}
Sys.sleep(if (mode$smoke) 1 else 10) # time for the standby's child to import Keras and JAX
children <- descendants()
memory["standby_waiting"] <- nvml_memory()
holding <- gpu_processes()
children$gpu_memory_mib <- holding$used_mib[match(children$pid, holding$pid)]
say("\nNVML memory used (MiB, all processes): ", paste(names(memory), round(memory), sep = " = ", collapse = ", "))
say("\nThis session's child processes after the job (the standby), and the GPU memory NVML",
    " shows each holding (NA: none listed):\n")
say("```\n", paste(utils::capture.output(print(children, row.names = FALSE)), collapse = "\n"), "\n```")
say("\nCompute processes NVML lists (pid, MiB; inside a container these may be the host's pids):\n")
say("```\n", paste(utils::capture.output(print(holding, row.names = FALSE)), collapse = "\n"), "\n```")
standby_mib <- sum(children$gpu_memory_mib, na.rm = TRUE)
say("\nStandby's GPU memory: ", standby_mib, " MiB",
    if (nrow(holding) && !any(holding$pid %in% c(Sys.getpid(), children$pid))) {
      " (NVML's pids are not this machine's: see the memory used before and after instead)"
    } else "")
say("\nWall time of this script: ", round(as.numeric(difftime(Sys.time(), started, units = "secs"))), " s.")

out <- if (!is.na(out_arg)) {
  args[out_arg + 1L]
} else if (mode$smoke) {
  file.path(Sys.getenv("GPUKERAS_BENCH_OUT", tempdir()), "r-on-gpu-smoke.md")
} else {
  sprintf("bench/results/r-on-gpu-%s-%s.md", gsub("[^A-Za-z0-9]+", "-", device), Sys.Date())
}
dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
writeLines(lines, out)
cat("written to", out, "\n")
