#' A pretrained text classifier from a KerasHub preset
#'
#' Loads a KerasHub preset's text classifier with a new head for `classes`,
#' compiled for [gpu_fit()]: the preset's own tokenizer is part of the model,
#' so it takes texts ([gpu_text_data()]), and R never tokenizes. A preset name
#' is downloaded from Kaggle (or Hugging Face, `"hf://..."`) as KerasHub's
#' `from_preset()` does; a folder is one KerasHub's `save_to_preset()` wrote.
#'
#' KerasHub comes with `install_gpukeras(extras = "hub")`. It is imported at
#' the first call (about 15 s: it imports TensorFlow through tensorflow-text),
#' never by gpukeras otherwise.
#'
#' @param preset A KerasHub preset: a name such as `"bert_tiny_en_uncased"`,
#'   or the path of a preset folder.
#' @param classes The classes to predict: a factor (its levels), their names,
#'   or their number (at least 2).
#' @param lora_rank `NULL` (default) to train every weight, or LoRA's rank: the
#'   backbone's weights are frozen and low-rank adapters added to them, as
#'   KerasHub's `enable_lora(rank)` does; the new head trains too.
#' @param sequence_length `NULL` (default: the preset's) or the number of
#'   tokens each text is cut or padded to.
#' @param learning_rate Adam's learning rate; 5e-5, KerasHub's default for
#'   fine-tuning.
#' @param ... Not used: an argument gpu_text_classifier() does not have is an
#'   error naming it.
#' @return The compiled Keras model (a KerasHub `TextClassifier`), with
#'   sparse categorical cross-entropy on logits and accuracy. `predict()` of
#'   its fit takes new texts as a character vector (or [gpu_text_data()]) and
#'   gives each class's probability (the softmax of the model's logits), a
#'   column per level of the labels it was fit on; with `type = "class"`, a
#'   factor of those levels. [gpu_save()] keeps the levels; [gpu_load()]
#'   compiles the classifier again as here (a new optimizer, at 5e-5).
#' @seealso [gpu_text_data()] for its texts and labels.
#' @export
#' @examples
#' \donttest{
#' # A folder that save_to_preset() wrote; a name such as "bert_tiny_en_uncased" loads
#' # from Kaggle the same way where it can be reached.
#' preset <- Sys.getenv("GPUKERAS_EXAMPLE_PRESET")
#' if (nzchar(preset) && dir.exists(preset)) {
#'   labels <- factor(c("good", "bad", "good", "bad"))
#'   model <- gpu_text_classifier(preset, labels, lora_rank = 4)
#'   texts <- c("great movie", "awful movie", "fine", "poor")
#'   fit <- gpu_fit(model, gpu_text_data(texts, labels), epochs = 2)
#'   predict(fit, c("good movie", "bad movie"))
#'   predict(fit, c("good movie", "bad movie"), type = "class")
#' }
#' }
gpu_text_classifier <- function(preset, classes, lora_rank = NULL, sequence_length = NULL, learning_rate = 5e-5,
                                ...) {
  check_unknown_args("gpu_text_classifier")
  check_string(preset)
  classes <- class_count(classes)
  check_whole_number(lora_rank, allow_null = TRUE)
  check_whole_number(sequence_length, allow_null = TRUE)
  check_learning_rate(learning_rate)
  loaded <- core_call(
    "text_classifier",
    preset = preset, num_classes = classes, lora_rank = as_integer_or_null(lora_rank),
    sequence_length = as_integer_or_null(sequence_length), learning_rate = learning_rate
  )
  loaded$model
}

# The number of classes `classes` names: a factor's levels, names, or a count >= 2.
class_count <- function(classes, call = caller_env()) {
  count <- if (is.factor(classes)) nlevels(classes) else if (is.character(classes)) length(unique(classes))
  if (is.null(count) && is_whole_number(classes, min = 2)) count <- classes
  if (is.null(count) || anyNA(classes) || count < 2L) {
    abort_bad_argument(sprintf(
      "`classes` must be a factor, the class names or their number, with at least 2 classes, not %s.",
      describe(classes)
    ), call = call)
  }
  as.integer(count)
}

as_integer_or_null <- function(x) if (is.null(x)) NULL else as.integer(x)

#' Texts (and their classes) for a KerasHub text model
#'
#' Hands R character vectors to a model of [gpu_text_classifier()] as the
#' batched tf.data dataset its `fit()` and `predict()` run through the
#' preset's tokenizer: give it to [gpu_fit()] as `x` (with no `y`), or to
#' `predict()` as `newdata`.
#'
#' @param x A character vector of texts, none `NA`.
#' @param y `NULL` (texts to predict), or a factor of their classes, as long
#'   as `x` and without `NA`: level k is class k - 1, as in
#'   [gpu_text_classifier()]'s `classes`.
#' @param batch_size Texts per batch.
#' @param shuffle Reshuffle the texts every epoch (by default, when `y` is
#'   given: for training).
#' @param seed `NULL` or a seed for the shuffling.
#' @param ... Not used: an argument gpu_text_data() does not have is an
#'   error naming it.
#' @return A Python tf.data dataset of batches of texts (and class codes);
#'   `attr(, "gpukeras")$encoding` records that its inputs are texts, and the
#'   levels of `y`, which [gpu_fit()] keeps for `predict()` and [gpu_save()].
#' @export
#' @examples
#' \donttest{
#' if (reticulate::py_module_available("keras_hub")) {
#'   texts <- gpu_text_data(c("a good movie", "a bad one"), factor(c("good", "bad")))
#' }
#' }
gpu_text_data <- function(x, y = NULL, batch_size = 32, shuffle = !is.null(y), seed = NULL, ...) {
  check_unknown_args("gpu_text_data")
  check_count(batch_size)
  check_flag(shuffle)
  check_seed(seed)
  text_dataset(x, y, batch_size, shuffle, seed)
}

# Texts `x` (and their classes `y`) as gpu_text_data() makes them, with their encoding (type
# "text", the levels of `y`) in attr(, "gpukeras"): gpu_fit() records it, so that predict() names
# its columns by the levels. `levels`: the training labels' levels, to code a new `y` by (predict()
# and evaluate() on texts); `args`: the names the errors give `x` and `y`.
text_dataset <- function(x, y = NULL, batch_size = 32, shuffle = FALSE, seed = NULL, levels = NULL,
                         args = c("x", "y"), call = caller_env()) {
  if (!is.character(x) || length(x) == 0L || !is.null(dim(x))) {
    abort_bad_argument(
      sprintf("`%s` must be a character vector of texts, not %s.", args[[1]], describe(x)), call = call
    )
  }
  abort_missing(
    rlang::set_names(list(x), args[[1]]),
    fix = "Remove them, or replace them with \"\" where an empty text is meant.", call = call
  )
  if (!is.null(y) && !is.null(levels)) y <- factor(as.character(y), levels = levels)
  if (!is.null(y) && (!is.factor(y) || length(y) != length(x) || anyNA(y))) {
    abort_bad_argument(sprintf(
      "`%s` must be NULL or a factor without NA, one class per text (%d), not %s.", args[[2]], length(x), describe(y)
    ), call = call)
  }
  made <- core_call(
    "text_dataset",
    texts = as.list(x), labels = if (!is.null(y)) as.list(as.integer(y) - 1L),
    levels = if (!is.null(y)) as.list(levels(y)), batch_size = as.integer(batch_size), shuffle = shuffle,
    seed = as_integer_or_null(seed), error_call = call
  )
  dataset <- made$dataset
  attr(dataset, "gpukeras") <- list(
    encoding = encoding_from_plain(made$encoding), source = "R texts", rows = length(x), role = "train"
  )
  dataset
}

# Whether `encoding` (a fit's) is of texts: gpu_text_data()'s, for a KerasHub model.
is_text_encoding <- function(encoding) identical(encoding$inputs$x$type, "text")
