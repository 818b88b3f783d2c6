# The gpukeras demo, end to end on real handwritten digits (inst/extdata/digits.csv.gz):
# set up the runtime, check that the GPU does the work, find the fastest sound
# training settings, train a small CNN on an augmented input pipeline with the
# monitor's report, and plot the run to a PNG. About 2 minutes on a 2-core CPU.
# Run with `make demo`, or source(system.file("scripts", "demo.R", package = "gpukeras")).
library(gpukeras)

# Headings and the closing lines go to stdout, with the printed results, in order.
section <- function(title) cat("\n", cli::rule(left = title, line = 2), "\n", sep = "")

# gpu_setup() first: memory growth, devices and precision must be set before
# anything starts TensorFlow's runtime (gpu_check()'s probe does).
section("gpu_setup(): the runtime, before it starts")
print(gpu_setup())

section("gpu_check(): is the GPU really doing the work?")
check <- gpu_check(probe_seconds = 2)
print(check)

digits <- utils::read.csv(system.file("extdata", "digits.csv.gz", package = "gpukeras"), header = FALSE)
# Each row holds an 8 x 8 image row by row; R fills arrays column by column,
# so fill [image, column, row] and swap the last two.
images <- aperm(array(as.matrix(digits[, 1:64]) / 16, c(nrow(digits), 8, 8)), c(1, 3, 2))
dim(images) <- c(dim(images), 1) # one channel
labels <- as.integer(digits[[65]])
set.seed(1)
held_out <- sample(nrow(images), round(0.2 * nrow(images)))
train <- list(x = images[-held_out, , , , drop = FALSE], y = labels[-held_out])
validation <- list(x = images[held_out, , , , drop = FALSE], y = labels[held_out])

keras <- gpu_keras()
build_model <- function() {
  keras$utils$set_random_seed(1L)
  model <- keras$Sequential(list(
    keras$Input(shape = c(8L, 8L, 1L)),
    keras$layers$Conv2D(32L, 3L, padding = "same", activation = "relu"),
    keras$layers$Conv2D(64L, 3L, padding = "same", activation = "relu"),
    keras$layers$MaxPooling2D(2L),
    keras$layers$Flatten(),
    keras$layers$Dropout(0.3),
    keras$layers$Dense(10L, activation = "softmax", dtype = "float32")
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  model
}
model <- build_model()

section("gpu_tune(): the fastest numerically sound settings, on copies of the model")
tune <- gpu_tune(model, train,
  time_budget = 25, batch_sizes = c(32, 128), steps_per_execution = c(1, 8), seed = 1
)
print(tune)
if (tune$recommended$precision != keras$config$dtype_policy()$name) {
  # A built model keeps its dtype policy: build it again under the recommended one.
  keras$config$set_dtype_policy(tune$recommended$precision)
  model <- build_model()
}

section("gpu_dataset(): an augmented input pipeline at the recommended batch size")
pipeline <- gpu_dataset(train$x, train$y,
  batch_size = tune$recommended$batch_size, seed = 1,
  augment = list(rotation = list(factor = 0.03), contrast = list(factor = 0.1))
)
print(pipeline)

section("gpu_fit(): training, measured")
fit <- gpu_fit(model, pipeline, epochs = 12, validation_data = validation, tuned = tune, seed = 1)
print(fit)

png_path <- file.path(dirname(tempdir()), "gpukeras-demo-fit.png")
grDevices::png(png_path, width = 900, height = 600)
plot(fit)
invisible(grDevices::dev.off())

accuracy <- fit$history$val_accuracy
cat(
  "\n", cli::symbol$tick, " ", sprintf(
    "Digits CNN (%d training, %d validation images, %s): final validation accuracy %.3f",
    length(train$y), length(validation$y), check$verdict, accuracy[length(accuracy)]
  ),
  "\n", cli::symbol$info, " plot(fit) written to ", png_path, "\n",
  sep = ""
)
