#' Groups of gpu_fit() options: the training step, backups, a background process
#'
#' Options that belong together travel as one object, as httr2's retry
#' policies do: `gpu_fit(step = gpu_step(...), backup = gpu_backup(...),
#' background = gpu_background(...))`. Each constructor checks its arguments
#' at once, so a mistake fails before any data is converted or Python starts.
#'
#' * `gpu_step()`: how Keras compiles and runs the training step, and whether
#'   it keeps a moving average of the weights (`ema`). These are the options
#'   that change the traced step: Keras builds it again when one changes.
#' * `gpu_backup()`: where and how often training state is backed up, and the
#'   signals that stop training cleanly with a backup (see [gpu_fit()]'s
#'   sections on backups and on stopping at a scheduler's signal).
#' * `gpu_background()`: train in a supervised child R process and return a
#'   `gpukeras_job` at once (see [gpu_job_status()]); `background = TRUE` is
#'   `gpu_background()` with its defaults.
#'
#' @param steps_per_execution Batches run per call into the compiled train
#'   step: `"auto"` keeps what the model was compiled with (Keras' default is
#'   1; the monitor's advice says when raising it would pay), except that on
#'   JAX with the data on the device a model compiled with Keras' default
#'   runs as many steps per call as take about 20 ms on the device (a step
#'   timed on a copy of the training state before the fit; 8 steps, untimed,
#'   for a state over 1% of the device's free memory, whose copy would raise
#'   the fit's peak memory by that state), unless one of
#'   [gpu_fit()]'s `callbacks` acts on each batch (Keras calls batch hooks once
#'   per call, so they would see every k-th batch): then 1. Or a number
#'   (larger values cut the per-step overhead of small models; batch hooks
#'   then run once per call). Set on the compiled model, keeping its loss and
#'   metrics.
#' @param jit_compile Compile the train step with XLA: `TRUE`, `FALSE` or
#'   `"auto"` (the default set by [gpu_setup()], else Keras' own choice: XLA
#'   on a GPU and on JAX, not for TensorFlow on the CPU). A model XLA cannot
#'   compile falls back to `FALSE`.
#' @param remat Rematerialization (gradient checkpointing): `TRUE` makes every
#'   layer recompute its outputs in the backward pass instead of keeping them,
#'   for the length of the fit, trading compute for memory where even
#'   accumulation cannot reach the batch (see [gpu_memory_plan()]'s changes).
#'   The updates are the same. On JAX every layer is recomputed (Keras'
#'   `RematScope(mode = "full")`); on TensorFlow only the activation functions
#'   (`mode = "activations"`: Keras' full mode fails in TensorFlow graphs).
#'   `settings$remat` of the fit says which.
#' @param ema `NULL`, or a momentum in (0, 1) such as `0.999`: train with an
#'   exponential moving average of the weights (Keras' optimizer EMA: after each
#'   update, average = ema x average + (1 - ema) x weights). Validation (the
#'   `val_` history), the best models of `gpu_backup(keep_best = )` and the
#'   model gpu_fit() returns use the averaged weights (`settings$ema` and the
#'   print say so). The averages are optimizer state, so a backup keeps them
#'   and a resumed fit ends with exactly those of an unbroken run. The model's
#'   optimizer goes on averaging afterwards, as one compiled with `use_ema =
#'   TRUE` does (`NULL` keeps what the optimizer does).
#' @param dir A folder where training state is backed up: an interrupted
#'   `gpu_fit()` called again (in a fresh R session) with the same arguments
#'   and folder resumes where it stopped, with the full history, and ends with
#'   the weights an uninterrupted run would have. Give gpu_fit() a `seed` too,
#'   so the resumed run sees the batches in the same order. `NULL` keeps no
#'   backup (the signals still stop training cleanly). A KerasHub preset
#'   fine-tuned with LoRA (`lora_rank`) is backed up with its adapters apart,
#'   beside each backup's weights (`.lora.h5`), so it resumes with them
#'   trainable, as an unbroken run.
#'
#'   The folder must be your own and writable by you alone (or your private
#'   group): another user's folder, or one others may write to (such as `/tmp`
#'   itself), is refused (`gpukeras_error_backup_dir_unsafe`), since they could
#'   plant links or backups there; one you cannot write to fails before
#'   training (`gpukeras_error_bad_argument`). Each backup is synced to disk
#'   before it is committed, and the one before it kept until the next is: a
#'   backup whose weights a crash or a power cut emptied or cut short is
#'   passed over for the one before (`settings$resumed_from$fallback` says
#'   so). A disk that fills up during training stops it with
#'   `gpukeras_error_backup_write`, saying what to free and where the last good
#'   backup is. Training that completes removes exactly the files its backups
#'   wrote (and the folder, if that leaves it empty), never your other files.
#'   Not protected: a crash while a backup is written can leave that one
#'   weights file (`gpukeras-weights-*.weights.h5`, and its `.lora.h5`) behind; a disk that loses
#'   data it said was synced can lose both backups.
#'
#'   One folder, one fit: a fit locks the folder for its life
#'   (`gpukeras-backup.lock`, which the kernel frees if the process dies), and
#'   another fit given it meanwhile stops with `gpukeras_error_backup_in_use`
#'   naming the process. A backup is resumed only by the same request: the same
#'   model (its layers and input shapes), loss, optimizer, batches, seed,
#'   learning rate, clipping, accumulation and class weights; another one is
#'   `gpukeras_error_backup_mismatch`, saying what differs (multi-worker fits
#'   check their own list, and take no lock).
#' @param every When to back up: `"epoch"` (at the end of every epoch) or a
#'   whole number of batches (every that many batches, and at every epoch's
#'   end), so a long epoch killed in the middle loses at most that many
#'   batches. A backup writes the weights and optimizer state, so very
#'   frequent backups of a large model slow training.
#' @param signals Names of the signals that stop training cleanly: `"SIGTERM"`
#'   (the default) and any of `"SIGHUP"`, `"SIGQUIT"`, `"SIGUSR1"`,
#'   `"SIGUSR2"`, `"SIGXCPU"` (with or without `"SIG"`); `NULL` leaves every
#'   signal to R. In a background job the child handles SIGTERM.
#' @param keep_best `NULL`, or a whole number k: besides the backup, keep the
#'   k best models by `monitor` in `dir`, each a `.keras` file named by its
#'   epoch and value (`gpukeras-best-epoch-0007-val_loss-0.3412.keras`; with
#'   `gpu_step(ema = )`, the averaged weights; saved as [gpu_save()] saves them,
#'   a KerasHub preset's with its preset and its LoRA adapters kept apart, so
#'   that [gpu_load()] gives it back with LoRA at the same rank), and their list in
#'   `gpukeras-best.json`; they stay when training completes, and
#'   `fit$settings$best` lists them, best first. Better is as Keras' callbacks
#'   infer it (`mode = "auto"`: a loss is better low, a compiled metric such as
#'   accuracy or AUC goes its own way); a tie keeps the earlier epoch. The list
#'   is part of each committed backup, so after a kill and resume the k best
#'   are exactly those an unbroken run keeps: a resumed run never replaces a
#'   better model with a worse one. With tracking on ([gpu_track()]), they are
#'   the run's artifacts (`best/`).
#' @param monitor The logged value `keep_best` ranks by: `"val_loss"` (needs
#'   validation data), `"loss"`, `"val_accuracy"`, ...
#' @param max_restarts How often a crashed child is started again (from its
#'   backup: the run ends with the weights of an unbroken one) before the job
#'   fails with `gpukeras_error_job_failed`.
#' @param ... Nothing: an argument these functions do not have is an error
#'   naming it, with the one most likely meant.
#' @return An option object: `gpukeras_step`, `gpukeras_backup` or
#'   `gpukeras_background`, a list of the checked values with `format()` and
#'   `print()` methods.
#' @seealso [gpu_fit()], which takes them.
#' @export
#' @examples
#' gpu_step(steps_per_execution = 8, jit_compile = TRUE)
#' gpu_step(ema = 0.999)
#' gpu_backup(file.path(tempdir(), "run-1"), every = 500, signals = c("SIGTERM", "SIGUSR1"))
#' gpu_backup(file.path(tempdir(), "run-2"), keep_best = 3, monitor = "val_accuracy")
#' gpu_background(max_restarts = 5)
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(
#'     keras$Input(shape = list(4L)),
#'     keras$layers$Dense(3L, activation = "softmax")
#'   ))
#'   model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
#'   fit <- gpu_fit(model, list(x = as.matrix(iris[, 1:4]), y = iris$Species), epochs = 2,
#'                  step = gpu_step(steps_per_execution = 4), verbose = 0, monitor = FALSE)
#'   fit$settings$steps_per_execution
#' }
gpu_step <- function(steps_per_execution = "auto", jit_compile = "auto", remat = FALSE, ema = NULL, ...) {
  check_unknown_args("gpu_step")
  steps_per_execution <- check_auto_count(steps_per_execution)
  jit_compile <- check_auto_flag(jit_compile)
  check_flag(remat)
  ema <- check_ema(ema)
  fit_option(
    list(steps_per_execution = steps_per_execution, jit_compile = jit_compile, remat = remat, ema = ema), "step"
  )
}

#' @rdname gpu_step
#' @export
gpu_backup <- function(dir, every = "epoch", signals = "SIGTERM", keep_best = NULL, monitor = "val_loss", ...) {
  check_unknown_args("gpu_backup", "gpu_step")
  if (missing(dir)) {
    abort_bad_argument(c(
      "`dir` is missing: the folder to back up to.",
      "For example gpu_backup(\"checkpoints/run-1\"), or gpu_backup(NULL) for the signals alone."
    ))
  }
  if (!is.null(dir)) {
    check_string(dir)
    dir <- normalizePath(path.expand(dir), mustWork = FALSE)
  }
  every <- check_auto_count(every, auto = "epoch")
  signals <- check_signals(signals)
  keep_best <- check_count(keep_best, allow_null = TRUE)
  monitor <- monitor %||% "val_loss"
  check_string(monitor)
  if (!is.null(keep_best) && is.null(dir)) {
    abort_bad_argument(c(
      "`keep_best` needs a folder to keep the best models in.",
      "For example gpu_backup(\"checkpoints/run-1\", keep_best = 3)."
    ))
  }
  fit_option(list(dir = dir, every = every, signals = signals, keep_best = keep_best, monitor = monitor), "backup")
}

#' @rdname gpu_step
#' @export
gpu_background <- function(max_restarts = 2, ...) {
  check_unknown_args("gpu_background", "gpu_step")
  fit_option(list(max_restarts = check_whole_number(max_restarts, 0, 1000)), "background")
}

fit_option <- function(values, kind) structure(values, class = c(paste0("gpukeras_", kind), "gpukeras_fit_option"))

#' @export
format.gpukeras_fit_option <- function(x, ...) {
  kind <- sub("^gpukeras_", "", class(x)[1])
  shown <- vapply(unclass(x), function(value) {
    if (is.null(value) ||
        length(value) == 0L) "NULL" else paste(if (is.character(value)) dQuote(value, FALSE) else
          format(value), collapse = ", ")
  }, character(1))
  c(sprintf("<gpukeras %s option>", kind), sprintf("  %s: %s", format(names(shown)), shown))
}

#' @export
print.gpukeras_fit_option <- print_formatted

# `x`, given to gpu_fit(arg = ) (not NULL: gpu_fit() says what NULL is), as the option object
# `kind` makes; TRUE/FALSE too where `flag` (background = TRUE is `constructor()`, FALSE none).
check_fit_option <- function(x, kind, constructor, arg = caller_arg(x), flag = FALSE, call = caller_env()) {
  if (inherits(x, paste0("gpukeras_", kind))) return(x)
  if (flag && is.logical(x) && length(x) == 1L && !is.na(x)) return(if (x) constructor() else NULL)
  abort_bad_argument(sprintf(
    "`%s` must be %s(...)%s, not %s.", arg, paste0("gpu_", kind), if (flag) ", TRUE or FALSE" else " or NULL",
    describe(x)
  ), call = call)
}

# gpu_fit()'s arguments that became option objects: where each one now goes.
moved_fit_args <- c(
  backup_dir = "backup = gpu_backup(dir = )", backup_freq = "backup = gpu_backup(dir, every = )",
  signals = "backup = gpu_backup(dir, signals = ) (gpu_backup(NULL, signals = ) without a backup)",
  max_restarts = "background = gpu_background(max_restarts = )"
)
# Still taken, with a gpukeras_warning_deprecated: the option object's field each one sets.
deprecated_fit_args <- c(
  steps_per_execution = "step = gpu_step(steps_per_execution = )", jit_compile = "step = gpu_step(jit_compile = )",
  remat = "step = gpu_step(remat = )", settings = "tuned = "
)

# Taken by gpu_fit()'s `...` as the gpu_step() field of the same name, with no warning:
# gpu_fit(..., ema = 0.999) reads as Keras users write it (gpu_fit() keeps to 20 formals).
step_shorthand_args <- "ema"

# gpu_fit()'s `...`: an argument that moved into an option object is an error showing the
# new form; a deprecated one is returned (by name) with a warning; a step shorthand is
# returned as it is; any other is an error.
fit_dots <- function(dots, call = caller_env()) {
  given <- rlang::names2(dots)
  moved <- intersect(given, names(moved_fit_args))
  if (length(moved)) {
    abort_bad_argument(c(
      sprintf("gpu_fit() has no argument `%s` any more: give %s.", moved[1], moved_fit_args[[moved[1]]]),
      "gpu_backup() and gpu_background() hold the options that belong together (?gpu_step)."
    ), call = call)
  }
  taken <- c(names(deprecated_fit_args), step_shorthand_args)
  unknown <- setdiff(given, taken)
  if (length(unknown) || any(given == "")) abort_unused_fit_args(given[!given %in% taken], call = call)
  for (name in intersect(given, names(deprecated_fit_args))) {
    gpukeras_warn(
      sprintf("gpu_fit(%s = ) is deprecated: give %s.", name, deprecated_fit_args[[name]]),
      "gpukeras_warning_deprecated"
    )
  }
  dots
}
