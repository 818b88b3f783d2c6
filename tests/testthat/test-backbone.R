# Keras' image backbones from R: gpu_image_backbone() and gpu_fine_tune() on a folder of
# images the test writes, with random weights (weights = NULL: nothing is downloaded).

test_that("gpu_image_backbone() and gpu_fine_tune() refuse bad arguments before Python starts", {
  expect_snapshot(error = TRUE, {
    gpu_image_backbone(50, 2)
    gpu_image_backbone("ResNet50", 1)
    gpu_image_backbone("ResNet50", 2, image_size = 224)
    gpu_image_backbone("ResNet50", 2, dropout = 1)
    gpu_fine_tune(list(), "images")
    gpu_fine_tune(iris, "images")
  })
  expect_error(gpu_image_backbone("ResNet50", 2, learning_rate = -1), class = "gpukeras_error_bad_argument")
  expect_error(gpu_image_backbone("ResNet50", 2, weights = 1), class = "gpukeras_error_bad_argument")
})

mark_slow()
skip_if_no_python()

# Four images of each class, drawn by R: dark and light squares of a shade each.
shapes_folder <- function() {
  skip_if_not(capabilities("png"), "R cannot write PNG files here")
  folder <- tempfile("gpukeras-shapes-")
  for (class in c("dark", "light")) {
    dir.create(file.path(folder, class), recursive = TRUE)
    for (i in 1:4) {
      grDevices::png(file.path(folder, class, sprintf("%s%d.png", class, i)), width = 32, height = 32)
      graphics::par(mar = rep(0, 4))
      graphics::plot.new()
      graphics::rect(0, 0, 1, 1, col = grDevices::grey(if (class == "dark") i / 20 else 1 - i / 20), border = NA)
      grDevices::dev.off()
    }
  }
  folder
}

test_that("a backbone's head trains on an image folder, then its top layers, and predicts new files", {
  folder <- shapes_folder()
  images <- gpu_dataset(folder, image_size = c(32, 32), batch_size = 4, seed = 1)
  model <- gpu_image_backbone("MobileNetV3Small", classes = 2, image_size = c(32, 32), weights = NULL)
  backbone <- model$get_layer("backbone")
  expect_false(backbone$trainable)
  head <- gpu_fit(model, images, epochs = 1, verbose = 0, seed = 1)
  expect_s3_class(head, "gpukeras_fit")
  frozen <- vapply(backbone$layers, function(layer) isTRUE(layer$trainable), logical(1))
  expect_false(any(frozen))

  tuned <- gpu_fine_tune(head, images, layers = 10, learning_rate = 1e-5, epochs = 1, verbose = 0, seed = 1)
  expect_s3_class(tuned, "gpukeras_fit")
  expect_identical(nrow(tuned$history), 1L)
  opened <- vapply(backbone$layers, function(layer) isTRUE(layer$trainable), logical(1))
  kinds <- vapply(backbone$layers, function(layer) class(layer)[1], "")
  top <- seq_along(opened) > length(opened) - 10
  expect_identical(opened, top & !grepl("BatchNormalization", kinds))
  expect_equal(as.numeric(tuned$model$optimizer$learning_rate$numpy()), 1e-5, tolerance = 1e-6)

  # new, unlabelled files: probabilities named by the folder's classes and the files
  scored <- predict(tuned, file.path(folder, "light"))
  expect_identical(colnames(scored), c("dark", "light"))
  expect_identical(basename(rownames(scored)), sprintf("light%d.png", 1:4))
  expect_equal(unname(rowSums(scored)), rep(1, 4), tolerance = 1e-5)
  expect_s3_class(predict(tuned, file.path(folder, "light"), type = "class"), "factor")
})

test_that("a backbone the core cannot build is a classed error that names it", {
  expect_error(
    gpu_image_backbone("Resnet50", 2, image_size = c(32, 32), weights = NULL),
    "Did you mean \"ResNet50\"", class = "gpukeras_error_bad_argument"
  )
  expect_error(
    gpu_image_backbone("ResNet50", 2, image_size = c(32, 32), weights = tempfile(fileext = ".h5")),
    "does not exist", class = "gpukeras_error_missing_files"
  )
  keras <- gpu_keras()
  plain <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(2L)))
  expect_error(gpu_fine_tune(plain, iris), "no backbone", class = "gpukeras_error_bad_argument")
})

test_that("a KerasHub image classifier preset fine-tunes on an image folder, predicts files and round trips", {
  skip_if_not(reticulate::py_module_available("keras_hub"), "no KerasHub (install_gpukeras(extras = \"hub\"))")
  folder <- shapes_folder()
  # a one-block ResNet with random weights, saved by KerasHub's save_to_preset(); its image
  # converter resizes to 24x24 and scales to [0, 1] in KerasHub's own input pipeline
  preset <- reticulate::import_from_path("tiny_preset", test_path("python"))$save_tiny_image_preset(
    file.path(withr::local_tempdir(), "tiny-image")
  )
  images <- gpu_dataset(folder, image_size = c(32, 32), batch_size = 4, seed = 1)
  model <- gpu_image_backbone(preset, classes = 2, image_size = c(32, 32), learning_rate = 1e-2)
  expect_true(inherits(model, "keras_hub.src.models.image_classifier.ImageClassifier"))
  expect_false(model$backbone$trainable)
  head <- gpu_fit(model, images, epochs = 1, verbose = 0, seed = 1)
  tuned <- gpu_fine_tune(head, images, layers = 4, learning_rate = 1e-5, epochs = 1, verbose = 0, seed = 1)
  layers <- model$backbone$layers
  opened <- vapply(layers, function(layer) isTRUE(layer$trainable), logical(1))
  kinds <- vapply(layers, function(layer) class(layer)[1], "")
  expect_identical(opened, seq_along(opened) > length(opened) - 4 & !grepl("BatchNormalization", kinds))

  scored <- predict(tuned, file.path(folder, "light"))
  expect_identical(colnames(scored), c("dark", "light"))
  expect_identical(basename(rownames(scored)), sprintf("light%d.png", 1:4))
  expect_equal(unname(rowSums(scored)), rep(1, 4), tolerance = 1e-5)

  path <- file.path(withr::local_tempdir(), "images.keras")
  gpu_save(tuned, path)
  loaded <- gpu_load(path)
  expect_equal(predict(loaded, file.path(folder, "light")), scored, tolerance = 1e-5)

  # gpu_export()'s SavedModel applies the preset's converter and the softmax as predict() does,
  # to images of the training size in pixels of 0 to 255, read by TensorFlow alone
  x <- array(withr::with_seed(3, stats::runif(3 * 32 * 32 * 3, 0, 255)), c(3, 32, 32, 3))
  exported <- file.path(withr::local_tempdir(), "images-model")
  gpu_export(tuned, exported)
  tf <- reticulate::import("tensorflow")
  serving <- tf$saved_model$load(exported)$signatures[["serving_default"]]
  served <- serving(x = tf$constant(x, dtype = "float32"))
  expect_equal(served$output$numpy(), unname(predict(tuned, x)), tolerance = 1e-5)
})

test_that("a preset folder that is no image classifier's is a classed error naming `backbone`", {
  skip_if_not(reticulate::py_module_available("keras_hub"), "no KerasHub (install_gpukeras(extras = \"hub\"))")
  text <- reticulate::import_from_path("tiny_preset", test_path("python"))$save_tiny_preset(
    file.path(withr::local_tempdir(), "text")
  )
  expect_error(gpu_image_backbone(text, 2), "`backbone`.*image classifier", class = "gpukeras_error_bad_preset")
  empty <- withr::local_tempdir()
  expect_snapshot(error = TRUE, gpu_image_backbone(empty, 2), transform = function(lines) {
    gsub(normalizePath(empty), "<folder>", lines, fixed = TRUE)
  })
})
