#' Fine-tune a pretrained image backbone on a folder of images
#'
#' `gpu_image_backbone()` builds the model of Keras' transfer-learning guide from
#' one of Keras' image backbones (`keras.applications`: ResNet50,
#' EfficientNetV2S, MobileNetV3Small, ConvNeXtTiny, ...): the backbone without
#' its top, frozen, then global average pooling, dropout and a new softmax head
#' of one unit per class, compiled with Adam. Train the head with [gpu_fit()] on
#' a [gpu_dataset()] of an image folder; then `gpu_fine_tune()` opens the
#' backbone's top layers and trains again at a lower learning rate, the guide's
#' second stage.
#'
#' The backbone's own preprocessing (ResNet50's mean subtraction, MobileNetV2's
#' \[-1, 1\], or none for the families that carry it as layers) is the model's
#' first operation: read the folder without `rescale`, in pixels of 0 to 255,
#' and every way of scoring with the model ([predict()], predictions to a file,
#' [gpu_serve()], [gpu_export()]) applies it alike. The backbone runs in
#' inference mode, so its BatchNormalization layers keep their statistics, and
#' `gpu_fine_tune()` keeps them frozen.
#'
#' `backbone` can also be a KerasHub image classifier preset (ResNet,
#' EfficientNet, ViT, ...): a name such as `"resnet_50_imagenet"`, downloaded
#' from Kaggle (or Hugging Face, `"hf://..."`) as KerasHub's
#' `ImageClassifier$from_preset()` does, or a folder its `save_to_preset()`
#' wrote. The model is then KerasHub's own image classifier with a new head
#' (pooling, dropout and a Dense layer of logits; `predict()` gives
#' probabilities), its backbone frozen, and the same two stages train it. Its
#' preprocessing is the preset's image converter (resizing to the preset's
#' image size, rescaling), applied as KerasHub applies it: in the input
#' pipeline of the model's `fit()` and `predict()`, not inside the model;
#' [gpu_save()] keeps it with the model, [gpu_serve()] applies it, and
#' [gpu_export()]'s SavedModel applies it, and the softmax, in its served
#' function. KerasHub is imported at the first
#' such call (`install_gpukeras(extras = "hub")`), as for
#' [gpu_text_classifier()].
#'
#' @param backbone The backbone's name in `keras.applications`, e.g.
#'   `"ResNet50"` or `"EfficientNetV2S"`; or a KerasHub image classifier
#'   preset: a name in lower case (`"resnet_50_imagenet"`) or the path of a
#'   preset folder. A folder that is no image classifier's preset is an error
#'   of class `gpukeras_error_bad_preset`.
#' @param classes A factor, the class names or their number (at least 2): the
#'   class sub-folders of the image folder.
#' @param image_size `c(height, width)` of the images, as [gpu_dataset()]
#'   reads them (in colour: `color_mode = "rgb"`). A preset's image converter
#'   resizes them to its own size.
#' @param weights `"imagenet"` (Keras downloads them once), `NULL` for random
#'   weights, or the path of a weights file of the backbone without its top.
#'   Not used for a preset, which has its own.
#' @param dropout The dropout rate before the head, in \[0, 1).
#' @param learning_rate Adam's learning rate: the head's for
#'   `gpu_image_backbone()`, the fine-tuning's (lower) for `gpu_fine_tune()`.
#' @param fit A [gpu_fit()] result of a model `gpu_image_backbone()` built, or
#'   that model.
#' @param data The training data, as [gpu_fit()] takes it (the same image
#'   folder's [gpu_dataset()]).
#' @param layers The number of the backbone's top layers to train
#'   (BatchNormalization layers among them stay frozen).
#' @param epochs The fine-tuning's epochs.
#' @param ... For `gpu_fine_tune()`: more [gpu_fit()] arguments
#'   (`validation_data`, `callbacks`, `backup_dir`, ...). Not used by
#'   `gpu_image_backbone()`.
#' @return `gpu_image_backbone()`: a compiled Keras model that takes images
#'   of `image_size` in pixels of 0 to 255 (for a preset, KerasHub's
#'   `ImageClassifier`). `gpu_fine_tune()`: a
#'   `gpukeras_fit`, as [gpu_fit()] returns.
#' @seealso [gpu_dataset()] for the image folder, [gpu_text_classifier()] for KerasHub's text models.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   # random weights here (weights = "imagenet" downloads them once)
#'   model <- gpu_image_backbone(
#'     "MobileNetV3Small", classes = 2, image_size = c(32, 32), weights = NULL
#'   )
#'   model$get_layer("backbone")$trainable # FALSE: the head trains first
#' }
#' \dontrun{
#' # a folder with a sub-folder of images per class, read in pixels of 0 to 255
#' images <- gpu_dataset("pictures/", image_size = c(224, 224))
#' model <- gpu_image_backbone("EfficientNetV2S", classes = 5)
#' head <- gpu_fit(model, images, epochs = 5)
#' tuned <- gpu_fine_tune(head, images, layers = 20, learning_rate = 1e-5, epochs = 5)
#' predict(tuned, "new-pictures/")
#'
#' # the same with a KerasHub preset: a name, or a folder save_to_preset() wrote
#' model <- gpu_image_backbone("resnet_50_imagenet", classes = 5)
#' }
gpu_image_backbone <- function(backbone, classes, image_size = c(224, 224), weights = "imagenet", dropout = 0.2,
                               learning_rate = 1e-3, ...) {
  check_unknown_args("gpu_image_backbone")
  check_string(backbone)
  classes <- class_count(classes)
  if (!is.numeric(image_size) || length(image_size) != 2L || anyNA(image_size) || any(image_size < 1)) {
    abort_bad_argument(sprintf("`image_size` must be c(height, width), not %s.", describe(image_size)))
  }
  if (!is.null(weights)) check_string(weights)
  check_number_in(dropout, "[0, 1)")
  check_learning_rate(learning_rate)
  built <- core_call(
    "image_backbone",
    backbone = backbone, num_classes = classes, image_size = as.list(as.integer(image_size)),
    weights = if (!is.null(weights) && weights != "imagenet") path.expand(weights) else weights,
    dropout = dropout, learning_rate = learning_rate
  )
  built$model
}

#' @rdname gpu_image_backbone
#' @export
gpu_fine_tune <- function(fit, data, layers = 20, learning_rate = 1e-5, epochs = 5, ...) {
  # `...` go to gpu_fit(): what it does not take is refused here, before the backbone opens
  given <- rlang::names2(match.call(expand.dots = FALSE)$...)
  unknown <- given[!given %in% names(formals(gpu_fit))]
  if (length(unknown)) abort_unused_args(unknown, gpu_fit, "gpu_image_backbone", "gpu_fine_tune()")
  model <- if (inherits(fit, c("gpukeras_fit", "gpukeras_model"))) fit$model else fit
  if (!inherits(model, "python.builtin.object")) {
    abort_bad_argument(sprintf(
      "`fit` must be a gpu_fit() result of a gpu_image_backbone() model, or that model, not %s.", describe(fit)
    ))
  }
  if (missing(data)) abort_bad_argument("`data` is missing: give the training data, as to gpu_fit().")
  check_whole_number(layers)
  check_learning_rate(learning_rate)
  core_call("backbone_unfreeze", model = model, layers = as.integer(layers), learning_rate = learning_rate)
  gpu_fit(model, data, epochs = epochs, ...)
}
