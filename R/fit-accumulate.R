# gpu_fit(accumulate = ): the batch asked for, trained as micro-batches whose gradients are
# averaged into one update (the core sets Keras' gradient_accumulation_steps for the fit);
# and gpu_fit(batch_size = "auto"), the micro-batch the core chooses by the memory plan.

# `batch_size = "auto"` is for one device: the plan's largest batch is a device's, and a
# strategy's batch is the global one (R data or a dataset: the core refuses a dataset's).
check_auto_batch <- function(batch_size, strategy, call = caller_env()) {
  if (!identical(batch_size, "auto") || is.null(strategy)) return(invisible(batch_size))
  abort_bad_argument(c(
    "`batch_size = \"auto\"` chooses the batch of one device: with a `strategy`, give the global batch as a number.",
    "gpu_memory_plan(model, batch_size)$precisions gives the largest batch a device fits, by precision."
  ), call = call)
}

# `accumulate` (already "auto" or a whole number, check_auto_count()) as gpu_fit() sends it,
# checked where no Python is needed: R data needs `batch_size` (the update's batch)
# divisible by it; a dataset's own batches are the micro-batches; "auto" needs R data and
# its `batch_size`, and the core chooses the smallest factor of `batch_size` whose
# micro-batch fits the GPU's free memory (tools/training.py).
check_accumulate_for <- function(accumulate, batch_size, data, call = caller_env()) {
  if (identical(accumulate, 1L)) return(accumulate)
  if (data$kind != "r" && identical(accumulate, "auto")) {
    abort_bad_argument(c(
      paste0(
        "`accumulate = \"auto\"` needs R data and its `batch_size`, the batch each update is to have: a dataset ",
        "makes its own batches."
      ),
      paste0(
        "Give `accumulate` as a whole number: the dataset's batches are then the micro-batches, and each update has ",
        "`accumulate` of them."
      )
    ), call = call)
  }
  if (data$kind != "r") return(accumulate)
  # the core's "auto" batch is `accumulate` micro-batches of the one it chooses
  if (identical(batch_size, "auto")) return(accumulate)
  if (is.null(batch_size)) {
    abort_bad_argument(c(
      "`accumulate` needs `batch_size`: the batch each update is to have, split into `accumulate` micro-batches.",
      sprintf(
        "For example gpu_fit(model, data, batch_size = %d, accumulate = %s).",
        32L * if (is.numeric(accumulate)) accumulate else 4L, if (is.numeric(accumulate)) accumulate else "\"auto\""
      )
    ), call = call)
  }
  if (identical(accumulate, "auto")) {
    return(accumulate) # the core decides it by the memory plan (tools/training.py)
  }
  if (batch_size %% accumulate != 0) {
    divisors <- factors_of(batch_size)
    abort_bad_argument(c(
      sprintf(paste0(
        "`accumulate` must divide `batch_size` (%d), not %d: each update is `accumulate` micro-batches of equal ",
        "size."
      ), as.integer(batch_size), accumulate),
      sprintf(
        "Give one of %s, or \"auto\" (the smallest whose micro-batch fits the GPU's memory).",
        paste(utils::head(divisors[divisors > 1L], 8L), collapse = ", ")
      )
    ), call = call)
  }
  accumulate
}

# The whole numbers that divide n, ascending.
factors_of <- function(n) {
  candidates <- seq_len(as.integer(n))
  candidates[n %% candidates == 0]
}
