# The training encoding where new data meets it: files, a fit's, validation data, `like =`.

# The plain form as the core gives it (data/encoding.py data_encoding, normalized(): every
# field present, in order), which reticulate reads with levels, shapes and names as vectors.
encoding_from_plain <- function(plain) structure(plain, class = "gpukeras_encoding")

# The encoding in words, as the core writes it (data/encoding.py encoding_lines), each line
# after `prefix`: `form` "print", "fit" (the fit report's line) or "columns" (each data.frame
# input's columns); none for no encoding (NULL).
encoding_lines <- function(encoding, form = "print", prefix = "") {
  unlist(core_call("encoding_lines", encoding = encoding, form = form, prefix = prefix))
}

#' @export
format.gpukeras_encoding <- function(x, ...) encoding_lines(x)

#' @export
print.gpukeras_encoding <- print_formatted

# The encoding of gpu_fit()'s training data (as fit_data() read it): R data's, recorded
# from it (once: kept as `data$recorded`); a gpu_dataset()'s own; NULL for NumPy arrays
# alone (the model's inputs and outputs as they are) and other datasets.
fit_encoding <- function(data, call = caller_env()) {
  if (!is.null(data$recorded)) return(data$recorded)
  if (data$kind == "python") return(attr(data$dataset, "gpukeras")$encoding)
  parts <- if (is.list(data$x) && !is.data.frame(data$x)) data$x else list(data$x)
  if (is_numpy_part(data$y) || is.null(data$y) && any(vapply(parts, is_numpy_part, logical(1)))) return(NULL)
  data_encoding(data$x, data$y, "error", call)
}

# What each data.frame input becomes, "5 columns: income, region (4 levels, one-hot)" (its
# name first when there are several), each after `prefix`; none without a data.frame input.
encoding_columns_lines <- function(encoding, prefix = "") encoding_lines(encoding, "columns", prefix)

# Whether `encoding` (NULL too) has a data.frame input.
has_frames <- function(encoding) any(vapply(encoding$inputs, function(part) identical(part$type, "data.frame"), TRUE))

# A model whose input takes another number of columns than a data.frame of `encoding` gives
# it, or whose output has another width than the labels' `levels`: the core's classed error
# (serve/scoring.py check_widths), in one call where there is something to check (gpu_fit()
# calls the core once to train: test-fit.R).
check_widths <- function(model, encoding = NULL, levels = NULL, call = caller_env()) {
  if (!has_frames(encoding) && length(levels) < 2L) return(invisible())
  invisible(core_call("check_widths", model = model, encoding = encoding, levels = as.list(levels), error_call = call))
}

# A gpu_dataset() `arg` made without `like = ` codes factors by its own levels: refused when
# its encoding is not the training data's (data/encoding.py check_same_encoding).
check_dataset_encoding <- function(dataset, encoding, arg, call = caller_env()) {
  core_call("check_same_encoding", given = attr(dataset, "gpukeras")$encoding, wanted = encoding, arg = arg,
            error_call = call)
}

# gpu_fit()'s validation data (as fit_data() read it) encoded as its training data (`data`,
# whose encoding the fit or search recorded once: data$recorded) is: R data gets the training
# encoding, a gpu_dataset() of other levels is refused.
with_training_encoding <- function(validation, data, call = caller_env()) {
  if (is.null(validation)) return(NULL)
  if (validation$kind == "python") check_dataset_encoding(validation$dataset, data$recorded, "validation_data", call)
  validation$encoding <- data$recorded
  validation
}
