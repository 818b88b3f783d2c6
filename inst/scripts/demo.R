# The gpukeras demo: is the GPU used? Then train a small CNN on real handwritten
# digits (inst/extdata/digits.csv.gz) and report the validation accuracy.
# Run with `make demo`, or source(system.file("scripts", "demo.R", package = "gpukeras")).
library(gpukeras)

check <- gpu_check()
print(check)

digits <- utils::read.csv(
  system.file("extdata", "digits.csv.gz", package = "gpukeras"),
  header = FALSE
)
pixels <- as.matrix(digits[, 1:64]) / 16
# Each row holds an 8 x 8 image row by row; R fills arrays column by column,
# so fill [image, column, row] and swap the last two.
images <- aperm(array(pixels, c(nrow(pixels), 8, 8)), c(1, 3, 2))
dim(images) <- c(dim(images), 1) # one channel
labels <- digits[[65]]

set.seed(1)
validation <- sample(nrow(images), round(0.2 * nrow(images)))

keras <- gpu_keras()
keras$utils$set_random_seed(1L)
model <- keras$Sequential(list(
  keras$Input(shape = c(8L, 8L, 1L)),
  keras$layers$Conv2D(32L, 3L, padding = "same", activation = "relu"),
  keras$layers$Conv2D(64L, 3L, padding = "same", activation = "relu"),
  keras$layers$MaxPooling2D(2L),
  keras$layers$Flatten(),
  keras$layers$Dropout(0.3),
  keras$layers$Dense(10L, activation = "softmax")
))
model$compile(
  optimizer = "adam",
  loss = "sparse_categorical_crossentropy",
  metrics = list("accuracy")
)
history <- model$fit(
  gpu_as_numpy(images[-validation, , , , drop = FALSE]),
  gpu_as_numpy(as.integer(labels[-validation])),
  validation_data = reticulate::tuple(
    gpu_as_numpy(images[validation, , , , drop = FALSE]),
    gpu_as_numpy(as.integer(labels[validation]))
  ),
  epochs = 15L,
  batch_size = 64L,
  verbose = 2L
)
accuracy <- unlist(history$history$val_accuracy)
cat(sprintf(
  "\nDigits CNN (%d training, %d validation images, %s): final validation accuracy %.3f\n",
  nrow(images) - length(validation), length(validation),
  check$verdict, accuracy[length(accuracy)]
))
