# gpu_fit(accumulate = ): the batch asked for, trained as micro-batches whose gradients are
# averaged into one update (the core sets Keras' gradient_accumulation_steps for the fit).

# `accumulate` (already "auto" or a whole number, check_auto_count()) as a whole number of
# micro-batches per update, with `reason`: why "auto" chose it (NULL otherwise). R data
# needs `batch_size` (the update's batch) divisible by it; a dataset's own batches are the
# micro-batches. "auto" asks gpu_memory_plan()'s core for the smallest factor of
# `batch_size` whose micro-batch fits the GPU's free memory.
resolve_accumulate <- function(accumulate, batch_size, data, model, call = caller_env()) {
  if (identical(accumulate, 1L)) {
    return(list(accumulate = 1L, reason = NULL))
  }
  if (data$kind != "r" && identical(accumulate, "auto")) {
    gpukeras_abort(
      c(
        "`accumulate = \"auto\"` needs R data and its `batch_size`, the batch each update is to have: a dataset makes its own batches.",
        "Give `accumulate` as a whole number: the dataset's batches are then the micro-batches, and each update has `accumulate` of them."
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  if (data$kind != "r") {
    return(list(accumulate = accumulate, reason = NULL))
  }
  if (is.null(batch_size)) {
    gpukeras_abort(
      c(
        "`accumulate` needs `batch_size`: the batch each update is to have, split into `accumulate` micro-batches.",
        sprintf("For example gpu_fit(model, data, batch_size = %d, accumulate = %s).", 32L * if (is.numeric(accumulate)) accumulate else 4L, if (is.numeric(accumulate)) accumulate else "\"auto\"")
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  if (identical(accumulate, "auto")) {
    return(accumulate_by_plan(batch_size, model, call))
  }
  if (batch_size %% accumulate != 0) {
    divisors <- factors_of(batch_size)
    gpukeras_abort(
      c(
        sprintf("`accumulate` must divide `batch_size` (%d), not %d: each update is `accumulate` micro-batches of equal size.", as.integer(batch_size), accumulate),
        sprintf("Give one of %s, or \"auto\" (the smallest whose micro-batch fits the GPU's memory).", paste(utils::head(divisors[divisors > 1L], 8L), collapse = ", "))
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  list(accumulate = accumulate, reason = NULL)
}

# The whole numbers that divide n, ascending.
factors_of <- function(n) {
  candidates <- seq_len(as.integer(n))
  candidates[n %% candidates == 0]
}

# "auto": the smallest factor of `batch_size` whose micro-batch the plan fits in the GPU's
# free memory; accumulating holds one more copy of the gradients (Keras' accumulators), so
# a micro-batch of a split batch pays that too. 1 where the plan knows no free memory.
accumulate_by_plan <- function(batch_size, model, call = caller_env()) {
  built <- tryCatch(isTRUE(model$built), error = function(e) FALSE)
  if (!built) {
    return(list(accumulate = 1L, reason = "auto: 1, the model is not built, so no memory plan"))
  }
  plan <- core_call("memory_plan", model = model, batch_size = as.integer(batch_size))
  accumulate_from_plan(plan, batch_size, call)
}

# The choice "auto" makes from the core's memory plan of `batch_size` (see accumulate_by_plan()).
accumulate_from_plan <- function(plan, batch_size, call = caller_env()) {
  if (is.null(plan$free_mib) || is.null(plan$largest_batch)) {
    return(list(accumulate = 1L, reason = paste0("auto: 1, no memory plan to split by (", plan$largest_batch_reason %||% "free memory unknown", ")")))
  }
  gradients <- sum(vapply(plan$parts, function(p) if (identical(p$part, "gradients")) p$mib else 0, numeric(1)))
  for (factor in factors_of(batch_size)) {
    micro <- batch_size %/% factor
    peak <- plan$fixed_mib + if (factor > 1L) gradients else 0
    peak <- peak + micro * plan$per_sample_mib
    if (peak <= plan$free_mib) {
      return(list(
        accumulate = as.integer(factor),
        reason = sprintf("auto: micro-batch %d fits by the memory plan (%.0f of %.0f MiB free)", as.integer(micro), peak, plan$free_mib)
      ))
    }
  }
  fixed_alone <- plan$fixed_mib >= plan$free_mib
  gpukeras_abort(
    c(
      sprintf(
        "No micro-batch of `batch_size` %d fits the GPU's free memory by the memory plan: %s.",
        as.integer(batch_size),
        if (fixed_alone) {
          sprintf("the parameters, gradients and optimizer slots alone take %.0f of %.0f MiB free", plan$fixed_mib, plan$free_mib)
        } else {
          sprintf("even a micro-batch of 1 needs %.1f MiB, and %.1f MiB are free", plan$fixed_mib + gradients + plan$per_sample_mib, plan$free_mib)
        }
      ),
      if (fixed_alone) {
        "Free GPU memory (other processes, other models in this session) or train a smaller model."
      } else {
        "Lower the per-sample memory: mixed precision (gpu_setup(mixed_precision = \"bfloat16\") or \"float16\" before building the model) or rematerialization (gpu_fit(step = gpu_step(remat = TRUE)): activations are recomputed in the backward pass instead of kept)."
      },
      "gpu_memory_plan(model, batch_size) shows what takes the memory."
    ),
    "gpukeras_error_out_of_memory",
    call = call
  )
}
