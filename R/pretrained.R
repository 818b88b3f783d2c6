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
  classes <- class_count(classes)
  load_preset("text_classifier", preset, lora_rank, sequence_length, learning_rate, num_classes = classes)
}

#' A pretrained causal language model from a KerasHub preset
#'
#' Loads a KerasHub preset's causal language model (GPT-2, Gemma, Llama, ...)
#' compiled for [gpu_fit()]: fine-tune it on texts alone ([gpu_text_data()]
#' without `y`: each text is its own next-token targets, through the preset's
#' own tokenizer), then write with [gpu_generate()]. A preset is a name or a
#' folder as for [gpu_text_classifier()], and KerasHub is imported at the first
#' call the same way.
#'
#' A tracked fit ([gpu_track()]) of this model, or of [gpu_text_classifier()]'s,
#' records the preset (its name, or the folder's absolute path) and the LoRA
#' rank (`"none"` for a full fine-tune) as params `preset` and `lora_rank`.
#'
#' @inheritParams gpu_text_classifier
#' @param sequence_length `NULL` (default: the preset's) or the number of
#'   tokens each training text is cut or padded to.
#' @param ... Not used: an argument gpu_causal_lm() does not have is an error
#'   naming it.
#' @return The compiled Keras model (a KerasHub `CausalLM`), with KerasHub's
#'   own loss for it (sparse categorical cross-entropy of each next token, the
#'   padding left out) and Adam at `learning_rate`. [gpu_save()] and
#'   [gpu_load()] keep it (compiled again by gpu_load() at 5e-5).
#' @seealso [gpu_generate()] to write with it.
#' @export
#' @examples
#' \donttest{
#' # A folder that save_to_preset() wrote; a name such as "gemma3_1b" loads from
#' # Kaggle the same way where it can be reached.
#' preset <- Sys.getenv("GPUKERAS_EXAMPLE_LM_PRESET")
#' if (nzchar(preset) && dir.exists(preset)) {
#'   model <- gpu_causal_lm(preset, lora_rank = 4)
#'   texts <- rep(c("the movie was good", "the film was fine"), 8)
#'   fit <- gpu_fit(model, gpu_text_data(texts, shuffle = TRUE), epochs = 1)
#'   gpu_generate(fit, c("the movie", "the film"), max_length = 16)
#'   gpu_generate(fit, "the movie", sampler = "top_k")
#' }
#' }
gpu_causal_lm <- function(preset, lora_rank = NULL, sequence_length = NULL, learning_rate = 5e-5, ...) {
  check_unknown_args("gpu_causal_lm")
  load_preset("causal_lm", preset, lora_rank, sequence_length, learning_rate)
}

# The model the core's `verb` loads from `preset` (gpu_text_classifier(), gpu_causal_lm()), its
# arguments checked; `...`: the verb's own arguments, checked.
load_preset <- function(verb, preset, lora_rank, sequence_length, learning_rate, ..., call = caller_env()) {
  check_string(preset, call = call)
  check_whole_number(lora_rank, allow_null = TRUE, call = call)
  check_whole_number(sequence_length, allow_null = TRUE, call = call)
  check_learning_rate(learning_rate, call = call)
  loaded <- core_call(
    verb,
    preset = preset, lora_rank = as_integer_or_null(lora_rank), sequence_length = as_integer_or_null(sequence_length),
    learning_rate = learning_rate, ..., error_call = call
  )
  loaded$model
}

#' Text written by a causal language model
#'
#' Each prompt followed by what a model of [gpu_causal_lm()] (or its fit, or
#' what [gpu_load()] loaded) writes after it, token by token, until its end
#' token or `max_length` tokens in all. The preset's own tokenizer reads the
#' prompts and writes the text: R never tokenizes.
#'
#' @param object A fit of [gpu_causal_lm()]'s model ([gpu_fit()]), the model
#'   itself, or a model [gpu_load()] loaded.
#' @param prompts A character vector of prompts, none `NA`.
#' @param max_length `NULL` (default: the preset's sequence length) or the
#'   most tokens of each prompt and its continuation together; at most what
#'   the model's backbone takes.
#' @param sampler How each next token is chosen, by one of KerasHub's
#'   samplers: `"greedy"` (default: the likeliest), `"top_k"`, `"top_p"`,
#'   `"random"`, `"beam"` or `"contrastive"`. The model keeps it for the next
#'   call with the same sampler, which then runs without compiling again.
#' @param ... Not used: an argument gpu_generate() does not have is an error
#'   naming it.
#' @return A character vector as long as `prompts`: each prompt and its
#'   continuation.
#' @seealso [gpu_causal_lm()].
#' @export
#' @examples
#' \donttest{
#' preset <- Sys.getenv("GPUKERAS_EXAMPLE_LM_PRESET")
#' if (nzchar(preset) && dir.exists(preset)) {
#'   gpu_generate(gpu_causal_lm(preset), "the movie", max_length = 16)
#' }
#' }
gpu_generate <- function(object, prompts, max_length = NULL, sampler = "greedy", ...) {
  check_unknown_args("gpu_generate")
  check_texts(prompts, "prompts")
  check_count(max_length, allow_null = TRUE)
  check_choice(sampler, c("greedy", "top_k", "top_p", "random", "beam", "contrastive"))
  model <- if (inherits(object, "python.builtin.object")) object else scoring_model(object, current_env())
  generated <- core_call(
    "generate",
    model = model, prompts = as.list(prompts), max_length = as_integer_or_null(max_length), sampler = sampler
  )
  as.character(unlist(generated))
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
#' `predict()` as `newdata`. `gpu_fit(background = TRUE)` carries the texts,
#' classes and options to its child process, which makes the dataset again.
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
  check_texts(x, args[[1]], call)
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
  # what makes it again in gpu_fit(background = TRUE)'s child (carry_data())
  attr(dataset, "gpukeras_recipe") <- list(
    texts = list(x = x, y = y, batch_size = batch_size, shuffle = shuffle, seed = seed)
  )
  dataset
}

# `x`, texts for a KerasHub model: a character vector without NA; `arg` is its name in the errors.
check_texts <- function(x, arg, call = caller_env()) {
  if (!is.character(x) || length(x) == 0L || !is.null(dim(x))) {
    abort_bad_argument(sprintf("`%s` must be a character vector of texts, not %s.", arg, describe(x)), call = call)
  }
  # the core names NA rows (an integer per text: NA for NA)
  if (anyNA(x)) {
    core_call(
      "check_rows", parts = rlang::set_names(list(array(nchar(x, keepNA = TRUE))), arg),
      fix = "Remove them, or replace them with \"\" where an empty text is meant.", error_call = call
    )
  }
}

# Whether `encoding` (a fit's) is of texts: gpu_text_data()'s, for a KerasHub model.
is_text_encoding <- function(encoding) identical(encoding$inputs$x$type, "text")
