# What a GPU user gets by default, from R (issue #58, items 1 and 5): gpu_setup() with its
# "auto" precision (mixed_bfloat16 on compute capability >= 8.0), gpu_check(), then a model
# whose softmax output follows the global policy, as most models do: gpu_fit(), predict()
# (probabilities and classes), evaluate() and a 3-fold gpu_cv(). Each step's value, time
# and any error go to a Markdown file; the script exits non-zero when a step failed.
#
# On a GPU machine, through the bundle of bench/gpu_r_bundle.sh (bench/gpu_verify.sh visit):
#   KERAS_BACKEND=jax .gpu-r/Rscript bench/gpu_visit.R --out FILE
# --smoke: tiny sizes, with this machine's R (its file in GPUKERAS_BENCH_OUT). The installed
# gpukeras is used, as an R user has it.
suppressPackageStartupMessages(library(gpukeras))
source("bench/lib/common.R")
mode <- bench_mode()
out <- markdown_out("gpu-visit-r", mode)

lines <- c(
  "# What a GPU user gets by default, from R", "",
  sprintf("`%s`, %s; gpukeras %s, reticulate %s, R %s.", bench_command("bench/gpu_visit.R", mode),
          format(Sys.time(), "%Y-%m-%d %H:%M"), utils::packageVersion("gpukeras"),
          utils::packageVersion("reticulate"), getRversion())
)
failed <- character()
# One step: its code, its printed value (or error) and seconds, into the file as it goes.
step <- function(title, expr) {
  code <- deparse(substitute(expr), width.cutoff = 100L)
  started <- Sys.time()
  warnings <- character()
  value <- withCallingHandlers(
    tryCatch(expr, error = function(e) e),
    warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    }
  )
  seconds <- as.numeric(difftime(Sys.time(), started, units = "secs"))
  ok <- !inherits(value, "error")
  if (!ok) failed <<- c(failed, title)
  shown <- if (ok) utils::capture.output(print(value)) else c(class(value)[1], conditionMessage(value))
  lines <<- c(
    lines, "", sprintf("## %s: %s (%.1f s)", title, if (ok) "ok" else "FAILED", seconds), "",
    "```r", code, "```", "", "```", shown, if (length(warnings)) paste("Warning:", warnings), "```"
  )
  writeLines(lines, out)
  cat(sprintf("%-28s %s (%.1f s)\n", title, if (ok) "ok" else "FAILED", seconds))
  invisible(if (ok) value else NULL)
}

rows <- if (mode$smoke) 600L else 20000L
set.seed(1)
x <- matrix(rnorm(rows * 20), rows, 20)
y <- factor(c("low", "mid", "high")[1 + (x[, 1] > -0.5) + (x[, 1] + x[, 2] > 0.5)])
model_fn <- function() {
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = 20),
    keras$layers$Dense(128, activation = "relu"),
    keras$layers$Dense(128, activation = "relu"),
    keras$layers$Dense(3, activation = "softmax") # left at the global policy, as most are
  ))
  model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
  model
}

setup <- step("gpu_setup()", gpu_setup(memory_growth = TRUE))
step("gpu_check()", gpu_check())
fit <- step("gpu_fit()", gpu_fit(model_fn(), list(x = x, y = y), epochs = 3, batch_size = 256, verbose = 0))
if (!is.null(fit)) {
  step("predict() probabilities", {
    p <- predict(fit, x[1:6, ])
    stopifnot(is.double(p), nrow(p) == 6L, all(abs(rowSums(p) - 1) < 0.02))
    p
  })
  step("predict() classes", predict(fit, x[1:6, ], type = "class"))
  step("evaluate()", evaluate(fit, x, y))
}
step("gpu_cv(), 3 folds", {
  cv <- gpu_cv(model_fn, list(x = x, y = y), folds = 3, epochs = 3, batch_size = 256)
  stopifnot(is.double(cv$predictions[[1]]), nrow(cv$predictions) == rows)
  cv
})
cat("written to", out, "\n")
if (length(failed)) {
  cat("failed:", paste(failed, collapse = ", "), "\n")
  quit(status = 1)
}
