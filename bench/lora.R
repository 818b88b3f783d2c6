# A LoRA fine-tune of a causal LM from R against KerasHub's own fit() (issue #79's GPU goal):
# a Gemma3 causal LM of gemma3_1b's configuration (random weights, saved as a local preset
# by KerasHub's save_to_preset(): bench/lora.py prepare), sequences of 512 tokens, bfloat16
# weights, LoRA at rank 8, batch 8.
#
#   KerasHub: CausalLM.from_preset(), enable_lora(), compile(), fit() on the token ids
#             (bench/lora.py keras-hub, a fresh Python process run before this session
#             starts its runtime, so that each side's peak memory is its own);
#   gpukeras: gpu_causal_lm(preset, lora_rank = 8) under the bfloat16 policy set first
#             (keras' config.set_dtype_policy(): a user's own policy, which gpu_fit() keeps),
#             gpu_memory_plan() at the batch and sequence length (on JAX: the step XLA
#             compiles, on a copy with the same LoRA), then gpu_fit() of the same token ids as a named
#             list (token_ids, padding_mask; the next tokens as y).
#
# Each side: a warm-up fit of one epoch (XLA compiles the step), then a timed fit of six
# epochs of 128 sequences; tokens per second over that second call (the data's hand-over
# included), gpukeras' over KerasHub's (goal >= 1.0); the peak memory of the device (JAX's
# memory_stats()) against the memory plan's estimate at the model's precision and LoRA (goal:
# within 10 %). The machines that run it have no TensorFlow, whose tokenizers KerasHub's text
# presets need: the preset has no tokenizer and token ids go in (the same on both sides).
#
# On a GPU machine, through the bundle of bench/gpu_r_bundle.sh (bench/gpu_verify.sh
# pretrained; KerasHub's and Grain's wheels in .whl/):
#   KERAS_BACKEND=jax PYTHON=python3 .gpu-r/Rscript bench/lora.R --out FILE [--rows N]
# --smoke: a tiny model of the same architecture, both KerasHub steps in one process, with
# this machine's R (its file in GPUKERAS_BENCH_OUT).
suppressPackageStartupMessages(library(gpukeras))
source("bench/lib/common.R")
mode <- bench_mode()
out <- markdown_out("lora", mode)
sizes <- if (mode$smoke) {
  list(size = "tiny", rows = 16L, length = 32L, batch = 4L, epochs = 1L, rank = 4L)
} else {
  list(size = "gemma3_1b", rows = 128L, length = 512L, batch = 8L, epochs = 6L, rank = 8L)
}
# --rows N: the sequences an epoch trains (16 steps of 8 by default): an epoch's own costs (its
# end's wait for the device, the next order drawn) weigh less in longer epochs
rows_arg <- match("--rows", commandArgs(trailingOnly = TRUE))
if (!is.na(rows_arg)) sizes$rows <- as.integer(commandArgs(trailingOnly = TRUE)[rows_arg + 1L])
python <- Sys.getenv("PYTHON", unset = gpukeras_python())
folder <- tempfile("lora-")
dir.create(folder)
# bench/lora.py's steps in a fresh Python: its JSON line (read once gpukeras has started
# Python in this session, below)
lora_py <- function(steps) {
  flags <- c("--folder", folder, unlist(Map(function(name, value) c(paste0("--", name), value), names(sizes), sizes)))
  output <- system2(python, c("bench/lora.py", steps, flags), stdout = TRUE)
  status <- attr(output, "status")
  if (!is.null(status) && status != 0L) stop("bench/lora.py ", paste(steps, collapse = " "), " failed (status ", status, ")")
  utils::tail(output, 1L)
}
hub <- if (mode$smoke) lora_py(c("prepare", "keras-hub")) else c(lora_py("prepare"), lora_py("keras-hub"))
cat("bench/lora.py:", hub, sep = "\n") # in the log, whatever happens below

keras <- gpu_keras()
# integers as doubles: reticulate wraps a Python int past 2^31 into an R integer (a peak of
# 12,968,068,352 bytes read as 83,166,464 on 2026-11-30)
hub <- do.call(c, lapply(hub, reticulate::import("json")$loads, parse_int = reticulate::import_builtins()$float))
keras$config$set_dtype_policy("bfloat16")
model <- gpu_causal_lm(file.path(folder, "preset"), lora_rank = sizes$rank)
ids <- reticulate::py_to_r(reticulate::import("numpy", convert = FALSE)$load(file.path(folder, "token_ids.npy")))
length_ <- ncol(ids) - 1L
data <- list(x = list(token_ids = ids[, seq_len(length_)], padding_mask = matrix(1L, nrow(ids), length_)),
             y = ids[, -1L])
timed_fit <- function(epochs) {
  began <- Sys.time()
  fit <- gpu_fit(model, data, epochs = epochs, batch_size = sizes$batch, seed = 1, verbose = 0)
  list(fit = fit, seconds = as.numeric(difftime(Sys.time(), began, units = "secs")))
}
warmup <- timed_fit(1L)
timed <- timed_fit(sizes$epochs)
cat(sprintf("gpu_fit(): warm-up %.1f s, timed %.2f s\n", warmup$seconds, timed$seconds))
jax <- reticulate::import("jax")
peak <- reticulate::py_eval(
  "(lambda s: float(s['peak_bytes_in_use']) if s else None)(__import__('jax').devices()[0].memory_stats())"
)
# after the peak is read: the plan compiles the step on a copy of the model, whose weights
# would otherwise count in the fit's peak
plan <- gpu_memory_plan(model, batch_size = sizes$batch, sequence_length = length_)

tokens <- nrow(ids) * length_ * sizes$epochs
r_rate <- tokens / timed$seconds
hub_rate <- hub$keras_hub$tokens / hub$keras_hub$seconds
mib <- function(bytes) if (is.null(bytes)) NA_real_ else bytes / 2^20
lines <- c(
  sprintf("# A LoRA fine-tune from R against KerasHub's own fit(), %s", Sys.Date()), "",
  sprintf("`%s` (KERAS_BACKEND=%s). Code: %s. gpukeras %s, KerasHub %s, Keras %s; device: %s.",
          bench_command("bench/lora.R", mode), Sys.getenv("KERAS_BACKEND", "unset"), code_state()$commit,
          utils::packageVersion("gpukeras"), hub$keras_hub$keras_hub, hub$keras_hub$keras,
          reticulate::py_str(jax$devices()[[1]])), "",
  sprintf(paste("Model: Gemma3 causal LM, %s configuration (%s parameters, random weights), LoRA rank %d",
                "(%s trainable by gpukeras, %s by KerasHub), weights %s (gpukeras) and %s (KerasHub);",
                "%d sequences of %d tokens, batch %d; a warm-up fit of one epoch, then %d timed epochs."),
          sizes$size, format(hub$prepare$parameters, big.mark = ","), sizes$rank,
          format(sum(vapply(model$trainable_weights, function(w) prod(unlist(w$shape)), 1)), big.mark = ","),
          format(hub$keras_hub$trainable, big.mark = ","), model$backbone$weights[[1]]$dtype,
          hub$keras_hub$weights_dtype, nrow(ids), length_, sizes$batch, sizes$epochs), "",
  "| side | warm-up fit (s) | timed fit (s) | tokens per second | peak memory (MiB) |",
  "|---|---|---|---|---|",
  sprintf("| KerasHub's fit() | %.1f | %.2f | %.0f | %.0f |", hub$keras_hub$warmup_seconds, hub$keras_hub$seconds,
          hub_rate, mib(hub$keras_hub$peak_bytes)),
  sprintf("| gpukeras from R | %.1f | %.2f | %.0f | %.0f |", warmup$seconds, timed$seconds, r_rate, mib(peak)), "",
  sprintf("**Tokens per second, gpukeras over KerasHub: %.2fx** (goal >= 1.0).", r_rate / hub_rate), "",
  sprintf(paste("**Memory plan** (gpu_memory_plan(model, batch_size = %d, sequence_length = %d), method: %s):",
                "%.0f MiB for the model as it trains (%s, LoRA); measured peak %.0f MiB: **%.2f of the plan**",
                "(goal: within 10 %%)."),
          sizes$batch, length_, plan$method, plan$total_mib, model$dtype_policy$name, mib(peak),
          mib(peak) / plan$total_mib),
  "", "gpu_fit()'s timed fit:", "", "```", utils::capture.output(print(timed$fit)), "```",
  "", "The memory plan:", "", "```", utils::capture.output(print(plan)), "```"
)
dir.create(dirname(out), showWarnings = FALSE, recursive = TRUE)
writeLines(lines, out)
unlink(folder, recursive = TRUE)
cat(lines, sep = "\n")
cat("written to", out, "\n")
