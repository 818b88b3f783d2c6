#' Plan the memory of a training step, part by part
#'
#' Says what a training step of `model` at `batch_size` is expected to hold
#' in memory at its peak, and the largest batch that fits in the free memory
#' of the GPU. Nothing runs: the plan is computed from the model's weights,
#' its optimizer and its layers' output shapes, and on JAX from the training
#' step as XLA compiles it.
#'
#' @section The parts:
#' * `parameters`: every weight of the model, in its variable dtype (under a
#'   mixed precision policy the master weights stay float32).
#' * `gradients`: one per trainable weight, in the same dtype.
#' * `optimizer slots`: the optimizer's per-weight state. Once the optimizer
#'   is built (the model has trained) its own variables are counted; before,
#'   by its type, in copies of the trainable weights: 2 for Adam, AdamW,
#'   Nadam, Adamax, Lamb, Adadelta and Ftrl (3 with `amsgrad`), 1 for
#'   Adagrad, Lion and Adafactor, 1 for SGD with momentum and 0 without, 1
#'   for RMSprop (+1 `centered`, +1 with momentum); +1 with
#'   `gradient_accumulation_steps`, +1 with `use_ema`. Another optimizer
#'   (Muon, a subclass, your own) is counted only once built.
#' * `input batch`: `batch_size` x the model's inputs (labels are not counted).
#' * `activations: <layer>`: `batch_size` x the layer's output (each call of a
#'   shared layer), in the layer's compute dtype: half of float32's under
#'   `mixed_float16` or `mixed_bfloat16`.
#'
#' @section An approximation:
#' The activations Keras and XLA keep for the backward pass are approximated
#' by every layer's output, kept once. XLA fuses some intermediates away and
#' recomputes others; some layers keep more (a dropout mask, a
#' normalization's statistics); cuDNN workspaces, the runtime's own memory
#' and fragmentation are not counted. Layers whose output shape Keras does
#' not know (those of a subclassed model) are listed as not counted.
#'
#' @section On JAX, XLA's measure of the step:
#' On the JAX backend Keras' training step is compiled by XLA for the device
#' the model trains on, at `batch_size` and at twice it, on a copy of the
#' model (nothing runs, and the copy is released; a KerasHub model's copy
#' gets the same LoRA), for a model of one output and one input or several
#' (a dict or list of them), whose shapes are known once `sequence_length`
#' fills what they leave open; its peak, from XLA's own buffer assignment, is the plan's
#' total (`method` is `"XLA's compiled step"`), and the two sizes give
#' `fixed_mib` and `per_sample_mib`. The parts still show the estimate by
#' layer, plus `step buffers beyond these parts (XLA)`: what the compiled step
#' holds beyond them (gradients of activations, attention scores, workspaces;
#' negative where XLA reuses buffers). Measured on an H100
#' (`bench/memory_plan.py`): the layer estimate alone came to 0.43 of a CNN's
#' peak and 0.28 of a transformer block's, XLA's measure to 1.00 and 0.80.
#' On TensorFlow, for a model of several outputs, and for inputs of a length
#' not known, `method` is `"layer outputs (an estimate)"`; so it is for a model `clone_model()`
#' cannot copy (custom classes not registered with
#' `keras$saving$register_keras_serializable()`), and `method_note` says so.
#'
#' @section The largest batch:
#' (free memory - parameters - gradients - optimizer slots) / (the
#' per-sample parts), rounded down. The free memory is that of `device`, or
#' the GPU the model trains on: JAX's allocator's (its limit less what is in
#' use) where it reports one, else the driver's (NVML). Memory this R session
#' already holds counts as used, the model's own weights included, so the
#' figure errs on the small side; TensorFlow without memory growth reserves
#' most of the GPU up front, and the driver then reports little free. On the
#' CPU, or where the free memory is not known, it is `NA` and
#' `largest_batch_reason` says why (on the CPU, [gpu_batch_size()] judges
#' sizes against the host's memory).
#'
#' @param model A built, compiled Keras 3 model (from keras3, [gpu_keras()]
#'   or reticulate). It is not changed.
#' @param batch_size The batch size to plan for.
#' @param device The GPU whose free memory the largest batch is judged
#'   against, e.g. `"GPU:1"`. `NULL`: the GPU the model trains on.
#' @param sequence_length For a model whose inputs leave their length open (a
#'   language model's token ids, shape `(batch, NULL)`): the length of the
#'   sequences it trains on. `NULL`: the sequence length of the model's
#'   preprocessor where it has one (a KerasHub preset's), else open, and the
#'   input batch and the activations of that length are not counted.
#' @param ... Not used: an argument gpu_memory_plan() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return An object of class `gpukeras_memory_plan`, a list with
#'   * `parts`: a data.frame with columns `part` and `mib`, largest first;
#'   * `total_mib`: their sum; `batch_size`;
#'   * `method`: `"XLA's compiled step"` or `"layer outputs (an estimate)"`,
#'     and `method_note`: on JAX, why XLA did not measure the step (`NA` where
#'     it did, or where it cannot: TensorFlow, several inputs or outputs);
#'   * `fixed_mib` and `per_sample_mib`: the plan is `fixed_mib + n x
#'     per_sample_mib` for a batch of n;
#'   * `largest_batch`: the largest batch that fits (`NA` where not known)
#'     and `largest_batch_reason` (why it is `NA` or 0);
#'   * `device`, `device_name`, `free_mib` (`NA` where not known),
#'     `free_source` (where it was read), `backend`, `dtype_policy`;
#'   * `optimizer`: `name` and `counted` (how its slots were counted);
#'   * `uncounted`: parts whose shapes are not known (layers by name, or
#'     `"input batch"`).
#'   * `changes`: a data.frame of the changes that lower the peak at
#'     `batch_size`, with `change`, `setting`, `peak_mib` (the peak expected
#'     by the plan's rules) and `fits` (`NA` where the free memory is not
#'     known): a smaller batch (the largest that fits), mixed precision
#'     (activations in 16 bits), accumulation (`gpu_fit(accumulate = )`, the
#'     smallest factor whose micro-batch fits, paying one more copy of the
#'     gradients) and rematerialization (layers built in
#'     `keras$RematScope(mode = "full")` recompute their outputs in the
#'     backward pass: about the largest layer output is held per sample, an
#'     estimate). An out-of-memory error from [gpu_fit()], [gpu_batch_size()]
#'     or [gpu_tune()] carries the plan as its `plan` field and says these
#'     in its message.
#'   * `precisions`: a data.frame of the peak at `batch_size` by precision
#'     (`"float32"`; `"mixed_bfloat16"`, activations in 16 bits; `"bfloat16"`,
#'     weights, gradients and optimizer slots in 16 bits too, LoRA's adapters
#'     kept in float32 as Keras keeps them) and by `training` (`"full"`: every
#'     weight trains; `"LoRA"`: only the adapters of [gpu_text_classifier()]'s
#'     `lora_rank` and the weights left trainable have gradients and slots;
#'     `"as set"`: frozen layers have none), with `trainable` (weights),
#'     `peak_mib`, `fits` and `largest_batch` (`NA` where the free memory is
#'     not known); an estimate by layer. On a GPU, [gpu_fit()] chooses from it
#'     (see its `settings$precision_choice`);
#'   * `lines` and `plot_title`: the plan in words, as `print()` and `plot()` show it.
#'
#'   It has `format()`, `print()` and `plot()` methods.
#' @seealso [gpu_batch_size()] to find the largest batch by running it.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(784L)),
#'     keras$layers$Dense(512L, activation = "relu"),
#'     keras$layers$Dense(10L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   plan <- gpu_memory_plan(model, batch_size = 256)
#'   print(plan)
#'   plot(plan)
#' }
gpu_memory_plan <- function(model, batch_size, device = NULL, sequence_length = NULL, ...) {
  check_unknown_args("gpu_memory_plan")
  check_python_object(model, "model", "a compiled Keras 3 model")
  check_count(batch_size)
  if (!is.null(device)) check_string(device)
  if (!is.null(sequence_length)) check_count(sequence_length)
  result <- core_call("memory_plan", model = model, batch_size = as.integer(batch_size), device = device,
                      sequence_length = as_integer_or_null(sequence_length))
  new_gpukeras_memory_plan(result)
}

# The gpukeras_memory_plan object from the core's plain data (None as NA).
new_gpukeras_memory_plan <- function(result) {
  structure(list(
    parts = typed_rows(result$parts, c(part = "character", mib = "numeric")), total_mib = as.numeric(result$total_mib),
    batch_size = as.integer(result$batch_size),
    fixed_mib = as.numeric(result$fixed_mib), per_sample_mib = as.numeric(result$per_sample_mib),
    largest_batch = as.integer(result$largest_batch %||% NA_integer_),
    largest_batch_reason = result$largest_batch_reason %||% NA_character_, device = result$device,
    device_name = result$device_name, free_mib = as.numeric(result$free_mib %||% NA_real_),
    free_source = result$free_source %||% NA_character_, backend = result$backend, dtype_policy = result$dtype_policy,
    optimizer = result$optimizer, uncounted = as.character(unlist(result$uncounted)), method = result$method,
    method_note = result$method_note %||% NA_character_, changes = typed_rows(
      result$changes, c(change = "character", setting = "character", peak_mib = "numeric", fits = "logical")
    ), precisions = typed_rows(result$precisions, c(
      precision = "character", training = "character", trainable = "numeric", peak_mib = "numeric",
      fits = "logical", largest_batch = "integer"
    )), lines = as.character(unlist(result$lines)), plot_title = result$plot_title
  ), class = "gpukeras_memory_plan")
}

#' @export
format.gpukeras_memory_plan <- function(x, ...) x$lines

#' @export
print.gpukeras_memory_plan <- print_formatted

#' Plot a memory plan
#'
#' Draws, with base graphics, one horizontal bar per part of a
#' [gpu_memory_plan()] in MiB, the largest on top: the fixed parts
#' (parameters, gradients, optimizer slots) dark, the per-sample ones
#' (input batch, activations) light.
#'
#' @param x A `gpukeras_memory_plan` from [gpu_memory_plan()].
#' @param ... Passed to [graphics::barplot()].
#' @return `x`, invisibly.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(keras$Input(shape = list(32L)), keras$layers$Dense(8L)))
#'   model$compile(optimizer = "sgd", loss = "mse")
#'   plot(gpu_memory_plan(model, batch_size = 64))
#' }
plot.gpukeras_memory_plan <- function(x, ...) {
  parts <- x$parts[rev(seq_len(nrow(x$parts))), , drop = FALSE]
  fixed <- parts$part %in% c("parameters", "gradients", "optimizer slots")
  old <- graphics::par(mar = c(4.5, min(20, 1 + 0.55 * max(nchar(parts$part))), 3, 1))
  on.exit(graphics::par(old))
  graphics::barplot(
    parts$mib,
    names.arg = parts$part, horiz = TRUE, las = 1, cex.names = 0.8,
    col = ifelse(fixed, "steelblue4", "lightskyblue"), xlab = "MiB",
    main = x$plot_title,
    ...
  )
  graphics::legend(
    "bottomright", c("fixed", "per sample x batch"),
    fill = c("steelblue4", "lightskyblue"), bty = "n", cex = 0.8
  )
  invisible(x)
}
