# Training data as the verbs that train read it (gpu_fit(), gpu_batch_size(),
# gpu_profile(), gpu_quantize()): checked without Python, converted once, and
# described for their reports.

# `data` as the verbs that train read it (fit_data()); a clear error when it
# was not given at all.
read_training_data <- function(data, data_missing, call = caller_env()) {
  if (data_missing) {
    abort_bad_argument("`data` is missing: give a gpu_dataset() or R data as list(x = , y = ).", call = call)
  }
  fit_data(data, "data", call = call)
}

# For a verb that reads one dataset: `data` (from fit_data()) that is not a
# train/validation split; else an error that asks for its `part`.
check_not_split <- function(data, part, call = caller_env()) {
  if (!is.null(data$validation)) {
    abort_bad_argument(
      sprintf("`data` must be one dataset or list(x = , y = ), not a train/validation split: give its %s part.", part),
      call = call
    )
  }
}

# What kind of training data `data` is: a Python dataset (kind "python"), R
# data (kind "r", with x and y), or a train/validation split of datasets.
# Checked without Python; converted later by fit_input().
fit_data <- function(data, arg, call = caller_env()) {
  if (inherits(data, "python.builtin.object")) return(list(kind = "python", dataset = data))
  usage <- sprintf(paste0(
    "Give `%s` as a gpu_dataset(), or R data as list(x = features, y = labels) (for several inputs, x = ",
    "list(input_a = , input_b = ))."
  ), arg)
  if (is.list(data) && !is.data.frame(data)) {
    names <- names(data) %||% rep("", length(data))
    if (identical(names, c("train", "validation")) &&
      all(vapply(data, inherits, logical(1), "python.builtin.object"))) {
      return(list(kind = "python", dataset = data$train, validation = data$validation))
    }
    if (all(names == "") && length(data) %in% 1:3) {
      names(data) <- c("x", "y", "sample_weight")[seq_along(data)]
      names <- names(data)
    }
    if (length(data) %in% 1:3 && "x" %in% names && all(names %in% c("x", "y", "sample_weight")) &&
        !anyDuplicated(names)) {
      if (is.null(data$x) || is.character(data$x) && length(data$x) == 1L) {
        abort_bad_data(
          c(sprintf("`%s$x` must be R data (a matrix, array, data.frame or named list of them).", arg), usage),
          call = call
        )
      }
      return(list(kind = "r", x = data$x, y = data$y, sample_weight = data$sample_weight))
    }
    abort_bad_data(
      c(sprintf("`%s` is a list with names %s, which gpu_fit() cannot read.", arg, describe_names(names)), usage),
      call = call
    )
  }
  if (is.matrix(data) || is.array(data) || is.data.frame(data) || is.numeric(data)) {
    abort_bad_data(
      c(sprintf("`%s` is R data without labels.", arg), usage,
        "A model trained without labels takes list(x = features)."),
      call = call
    )
  }
  abort_bad_data(c(sprintf("`%s` cannot be %s.", arg, describe(data)), usage), call = call)
}

describe_names <- function(names) {
  if (!length(names) || all(names == "")) "none" else paste0("`", names, "`", collapse = ", ")
}

# The rows of R data (NumPy arrays too; of several inputs, the first's).
training_rows <- function(data) count_rows(first_input(data$x))

# The first input of features `x` (a named list of inputs, or one).
first_input <- function(x) if (is.list(x) && !is.data.frame(x)) x[[1]] else x

# What the core gets for `data` as fit_data() read it: a Python dataset as it
# is; R data checked, to be copied once to NumPy by the core in the verb's own
# call (handover_arg(); as gpu_dataset() does), from which the core builds the
# seeded pipeline itself. The core seeds Keras and TensorFlow first, so the shuffle
# order depends on `seed` alone, and a run resumed from a backup sees the
# batches in the same order as the run that was interrupted.
fit_input <- function(data, call = caller_env()) {
  if (data$kind == "python") return(data$dataset)
  if (inherits(data$x, "python.builtin.object") && (is.null(data$y) || inherits(data$y, "python.builtin.object"))) {
    # NumPy arrays already (gpu_as_numpy())
    return(c(list(data$x, data$y), if (!is.null(data$sample_weight)) list(data$sample_weight)))
  }
  handover_arg(as_pipeline_data(
    data$x, data$y, "error",
    call = call, encoding = data$encoding, na_fix = fit_na_fix, sample_weight = data$sample_weight,
    recorded = data$recorded
  ))
}

# gpu_fit() has no `na` argument: gpu_dataset() has.
fit_na_fix <- paste0(
  "Impute or remove those rows before gpu_fit(), or let gpu_dataset() drop them: gpu_fit(model, gpu_dataset(x, y, na ",
  "= \"drop\"))."
)

# fit_input() as NumPy arrays, list(x, y, sample_weight): for what keeps them (a background job's files).
fit_arrays <- function(data, call = caller_env()) {
  input <- fit_input(data, call = call)
  if (!inherits(input, "gpukeras_handover")) return(list(input[[1]], input[[2]], if (length(input) > 2L) input[[3]]))
  converted <- to_numpy(input$gpukeras_handover, call = call)
  list(converted$x, converted$y, converted$sample_weight)
}

# `described`: what the core said of a dataset it trained on (its fit result's data_info),
# or NULL to ask it. `role`: what gpu_fit() uses a gpu_dataset() for ("validation" for one
# given as validation_data, whatever split it was made as).
describe_fit_data <- function(data, input, batch_size, described = NULL, role = "train", call = caller_env()) {
  if (data$kind == "r") {
    numpy <- inherits(first_input(data$x), "python.builtin.object")
    return(sprintf(
      "%s rows of %s%s", format(training_rows(data), big.mark = ","), if (numpy) "NumPy arrays" else "R data",
      if (identical(batch_size, "auto")) " in batches of batch_size = \"auto\"" else
        if (!is.null(batch_size)) sprintf(" in batches of %d", as.integer(batch_size)) else ""
    ))
  }
  info <- attr(input, "gpukeras")
  if (!is.null(info)) {
    noun <- if (length(info$class_names)) "images" else "rows"
    rows <- if (is.null(info$rows)) paste(noun, "not known") else
      sprintf("%s %s", format(info$rows, big.mark = ","), noun)
    return(sprintf("gpu_dataset() %s pipeline from %s: %s", role, info$source, rows))
  }
  dataset <- if (is.null(described)) {
    core_call("describe_dataset", data = input, error_call = call)
  } else {
    described$dataset
  }
  if (is.null(dataset)) return(class(input)[1])
  sprintf(
    "tf.data dataset%s: %s of %s", if (inherits(input, "tf_dataset")) " (tfdatasets)" else "",
    if (is.null(dataset$batches)) "batches not known" else paste(format(dataset$batches, big.mark = ","), "batches"),
    dataset$element
  )
}
