# gpu_cv(): folds made as R users expect, each fold trained in a fresh worker process,
# the same as separate gpu_fit() calls on the same rows with the same seeds.

test_that("stratified folds keep each class's share, grouped folds keep groups whole", {
  # each row's fold, from the folds' held-out rows
  fold_of <- function(split) rep(seq_along(split$held_out), lengths(split$held_out))[order(unlist(split$held_out))]
  classes <- rep(c("a", "b", "c"), c(60, 30, 9))
  fold <- fold_of(fold_split(list(kind = "r", x = matrix(0, 99, 1), y = classes), 3L, 1L))
  shares <- table(fold, classes)
  # every fold has a third of each class, within one row
  expect_true(all(abs(shares - rep(c(20, 10, 3), each = 3)) <= 1))
  expect_setequal(unique(fold), 1:3)

  group <- rep(sprintf("patient%02d", 1:20), times = c(rep(5, 10), rep(1, 10)))
  split <- fold_split(list(kind = "r", x = matrix(0, 60, 1)), 4L, 2L, group)
  expect_identical(split$kind, "grouped")
  fold <- fold_of(split)
  # every group in one fold
  expect_true(all(tapply(fold, group, function(f) length(unique(f))) == 1))
  sizes <- as.vector(table(fold))
  expect_lte(max(sizes) - min(sizes), 5)

  data <- list(kind = "r", x = as.matrix(iris[, 1:4]), y = iris$Species)
  split <- cv_split(5, NULL, data, 7L, current_env())
  expect_identical(split$kind, "stratified by the labels")
  expect_setequal(unlist(split$held_out), 1:150)
  expect_identical(anyDuplicated(unlist(split$held_out)), 0L)
  for (i in 1:5) expect_setequal(c(split$train[[i]], split$held_out[[i]]), 1:150)
  # the same seed, the same folds, and R's own random numbers untouched
  set.seed(99)
  before <- .Random.seed
  expect_identical(cv_split(5, NULL, data, 7L, current_env())$held_out, split$held_out)
  expect_identical(.Random.seed, before)
  # numbers are not classes: random folds
  expect_identical(
    cv_split(3, NULL, list(kind = "r", x = matrix(1:20, 10), y = seq(0.5, 5, by = 0.5)), 1L, current_env())$kind,
    "random"
  )
})

test_that("an rsample resampling gives its analysis rows to train and its assessment rows to hold out", {
  skip_if_not_installed("rsample")
  df <- iris
  folds <- withr::with_seed(3, rsample::vfold_cv(df, v = 4))
  split <- cv_split(folds, NULL, list(kind = "r", x = as.matrix(df[, 1:4]), y = df$Species), 1L, current_env())
  expect_identical(split$held_out[[2]], rsample::complement(folds$splits[[2]]))
  expect_identical(split$train[[2]], folds$splits[[2]]$in_id)
  expect_error(
    cv_split(folds, NULL, list(kind = "r", x = matrix(1:20, 10), y = 1:10), 1L, current_env()),
    class = "gpukeras_error_bad_argument"
  )
})

test_that("a model function carries the global variables and functions it uses", {
  env <- globalenv()
  assign("gpukeras_test_units", 7L, envir = env)
  assign("gpukeras_test_layer", eval(quote(function() gpukeras_test_units * 2L), env), envir = env)
  withr::defer(rm(list = c("gpukeras_test_units", "gpukeras_test_layer"), envir = env))
  fn <- eval(quote(function() gpukeras_test_layer() + 1L), env)
  carried <- check_model_fn(fn, 0L)
  # in a fresh process, where the global environment has neither
  expect_identical(callr::r(function(f) f(), list(carried)), 15L)
  # made inside a function (a loop's, lapply()'s) that calls a global one: its own
  # variables and the global ones travel, not the rest of where it was made
  made <- eval(quote(lapply(1:2, function(i) {
    unused <- numeric(1e6)
    function() gpukeras_test_layer() + i
  })), env)
  carried <- lapply(made, check_model_fn, 0L)
  expect_identical(callr::r(function(fs) vapply(fs, function(f) f(), 1L), list(carried)), c(15L, 16L))
  expect_setequal(ls(environment(carried[[1]])), c("gpukeras_test_layer", "gpukeras_test_units", "i"))
  # the function as it was made in the session is left as it was
  expect_true(exists("unused", envir = environment(made[[1]]), inherits = FALSE))
  expect_identical(parent.env(environment(made[[1]])), env)
  # a helper made beside it, which calls a global function: the helper's variables and
  # that function's travel too
  beside <- eval(quote((function(k) {
    unused <- numeric(1e6)
    build <- function() gpukeras_test_layer() * k
    function() build() + 1L
  })(3L)), env)
  carried <- check_model_fn(beside, 0L)
  expect_identical(callr::r(function(f) f(), list(carried)), 43L)
  expect_setequal(ls(environment(carried)), c("build", "gpukeras_test_layer", "gpukeras_test_units", "k"))
  # made by source() with its source kept (an interactive session's default): it travels
  # without the lines of its file, a password written there among them
  lines <- c('password <- "F1le-S3cret"', "function() gpukeras_test_layer() + 1L")
  sourced <- eval(parse(text = lines, srcfile = srcfilecopy("model.R", lines))[[2]], env)
  holds_secret <- function(f) length(grepRaw("F1le-S3cret", serialize(f, NULL), fixed = TRUE)) > 0L
  expect_true(holds_secret(sourced))
  carried <- check_model_fn(sourced, 0L)
  expect_false(holds_secret(carried))
  expect_identical(callr::r(function(f) f(), list(carried)), 15L)
  # a name model_fn and a function it calls find bound to different values: an error,
  # where one environment for both would give the global function the local value
  clash <- eval(quote(local({
    gpukeras_test_units <- 100L
    function() gpukeras_test_layer() + gpukeras_test_units
  })), env)
  expect_snapshot(error = TRUE, check_model_fn(clash, 0L))
})

test_that(paste(
  "gpu_keras()'s keras and Python modules a model function uses are made again in the worker; other Python objects are",
  "refused"
), {
  skip_if_no_python()
  env <- globalenv()
  assign("gpukeras_test_keras", gpu_keras(), envir = env)
  assign("gpukeras_test_dense", eval(quote(function(units) gpukeras_test_keras$layers$Dense(units)), env), envir = env)
  withr::defer(rm(list = c("gpukeras_test_keras", "gpukeras_test_dense"), envir = env))
  top <- eval(quote(function() {
    model <- gpukeras_test_keras$Sequential(list(gpukeras_test_keras$Input(shape = 3L), gpukeras_test_dense(2L)))
    model$compile(optimizer = "sgd", loss = "mse")
    length(model$layers)
  }), env)
  json <- reticulate::import("json")
  closure <- local(function() json$dumps(list(1L, 2L)))
  # the session's objects are not in what travels: a fresh R process, which never saw them
  # (one for both functions, each made again there on its own)
  in_a_worker <- function(...) {
    callr::r(function(fs) {
      library(gpukeras)
      lapply(fs, function(f) gpukeras:::worker_function(f)())
    }, list(lapply(list(...), check_model_fn, 0L)),
    env = c(callr::rcmd_safe_env(), GPUKERAS_PYTHON = reticulate::py_config()$python))
  }
  expect_identical(in_a_worker(top, closure), list(1L, "[1, 2]"))
  # the session's own are left as they were
  expect_s3_class(get("gpukeras_test_keras", envir = env), "gpukeras.core.keras_api.KerasNamespace")
  expect_identical(environment(get("gpukeras_test_dense", envir = env)), env)

  layer <- gpukeras_test_keras$layers$Dense(2L)
  data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  expect_error(gpu_cv(function() layer, data), class = "gpukeras_error_bad_argument")
  # what model_fn returns is checked in the worker: its error is the parent of the fold's
  returned <- expect_error(gpu_cv(function() 1, data, folds = 2, epochs = 1), class = "gpukeras_error_cv_fold")
  expect_s3_class(returned$parent, "gpukeras_error_bad_model")
  expect_match(conditionMessage(returned$parent), "must return a compiled Keras model, not `1`", fixed = TRUE)
  # its worker failed and ended: the pool left a spare started ahead in its slot, which
  # loads itself meanwhile, and the next gpu_cv()'s fold runs there
  withr::defer(worker_spares_end())
  spare <- the$spares[[length(the$spares)]]
  expect_identical(spare$state, "starting")
  spare <- spare$session$get_pid()
  returned <- expect_error(
    gpu_cv(function() Sys.getpid(), data, folds = 2, epochs = 1), class = "gpukeras_error_cv_fold"
  )
  expect_match(conditionMessage(returned$parent), sprintf("not `%d", spare), fixed = TRUE)
  expect_snapshot(error = TRUE, gpu_cv(function() layer, data))
  # in a list too, at any depth
  settings <- list(units = 2L, made = list(optimizer = gpukeras_test_keras$optimizers$SGD()))
  expect_snapshot(error = TRUE, gpu_cv(function() settings$units, data))
})

test_that("workers_per_device = \"auto\" adds workers on a GPU as far as a fit's memory plan allows", {
  skip_if_no_python()
  gpu <- list(device = "GPU 0", visible = "GPU-aaaa", memory_total_mib = 81559)
  pool <- new_worker_pool(list(slots = list(gpu), reason = "1 worker on 1 GPU"), tempdir())
  ended <- list(slot = 1L, task = list(plan_memory = TRUE))
  many_grow(pool, ended, list(peak_mib = 30000))
  # two fits of 30,000 MiB fit in 80 % of the GPU's memory (and a worker a core: 2 or more
  # here): one more worker there (the core's grow(), python/tests/test_workers.py, for the rest)
  expect_identical(vapply(pool$slots, `[[`, "", "visible"), c("GPU-aaaa", "GPU-aaaa"))
  expect_length(pool$busy, 2L)
  expect_match(pool$plan$reason[2], "^2 workers per GPU")
  # once per GPU
  many_grow(pool, ended, list(peak_mib = 1000))
  expect_length(pool$slots, 2L)
  # a fit with no plan (the CPU, or a number given) adds nothing
  many_grow(pool, list(slot = 2L, task = list(plan_memory = FALSE)), list(peak_mib = 1000))
  expect_length(pool$slots, 2L)
})

test_that("workers are callr sessions of the session's own, each readied ahead, lost with their cause", {
  skip_if_no_python()
  dir <- withr::local_tempdir()
  pool <- new_worker_pool(worker_plan("all", 1, 1), dir)
  withr::defer(worker_spares_end()) # after the pool's close, which leaves a spare per slot
  withr::defer(worker_close(pool))
  workers <- list(worker_start(pool, 1L), worker_start(pool, 1L))
  deadline <- Sys.time() + 180
  while (!all(vapply(workers, function(w) w$state == "ready", logical(1))) && Sys.time() < deadline) {
    processx::poll(lapply(workers, function(w) w$session$get_poll_connection()), 1000L)
    for (worker in workers) worker_step(worker)
  }
  expect_identical(vapply(workers, `[[`, "", "state"), c("ready", "ready"))
  # loaded, with no outcome (a failed loading is the task's error), and each a child of this session
  expect_true(all(vapply(workers, function(w) is.null(w$outcome), logical(1))))
  pids <- vapply(workers, function(w) w$session$get_pid(), integer(1))
  parent_of <- function(pid) {
    as.integer(strsplit(sub(".*[)] ", "", readLines(sprintf("/proc/%d/stat", pid))), " ")[[1]][2])
  }
  expect_identical(vapply(pids, parent_of, integer(1)), rep(Sys.getpid(), 2L))
  expect_false(anyDuplicated(c(pids, Sys.getpid())) > 0)
  # its temporary folder is its own, in the session's, not the pool's (a spare outlives it)
  tmp <- workers[[2]]$session$run(function() Sys.getenv("TMPDIR"))
  expect_identical(normalizePath(tmp), normalizePath(workers[[2]]$dir))
  expect_identical(normalizePath(dirname(tmp)), normalizePath(tempdir()))
  # one killed while it waits is `ended`, and lost with its cause
  tools::pskill(pids[1], tools::SIGKILL)
  deadline <- Sys.time() + 10
  while (workers[[1]]$state != "ended" && Sys.time() < deadline) {
    processx::poll(list(workers[[1]]$session$get_poll_connection()), 1000L)
    worker_step(workers[[1]])
  }
  expect_identical(workers[[1]]$state, "ended")
  expect_match(conditionMessage(worker_crash(workers[[1]])), "its worker process was killed by signal 9")
  expect_true(workers[[2]]$session$is_alive())
  # the pool closed, its ready worker is the session's spare (the slot's: none is started
  # ahead), which the next pool with the same slots takes (alive, loaded: no start), and the
  # session's end ends
  worker_end(workers[[1]])
  pool$ready <- list(workers[[2]])
  worker_close(pool)
  expect_false(dir.exists(pool$dir))
  expect_true(workers[[2]]$session$is_alive())
  expect_identical(the$spares, list(workers[[2]]))
  again <- new_worker_pool(worker_plan("all", 1, 1), withr::local_tempdir())
  expect_identical(worker_start(again, 1L), workers[[2]])
  expect_length(the$spares, 0L)
  # not one whose slots differ (another device, another gpu_setup())
  the$spares <- list(workers[[2]])
  again$setup <- list(cpu_devices = 2)
  other <- worker_start(again, 1L)
  expect_false(identical(other, workers[[2]]))
  worker_end(other)
  expect_false(dir.exists(other$dir))
  worker_spares_end()
  expect_false(workers[[2]]$session$is_alive())
  expect_false(dir.exists(workers[[2]]$dir))
})

test_that("gpu_setup(workers_ahead = ) starts the first gpu_cv()'s worker ahead: \"auto\" none on a CPU", {
  skip_if_no_python()
  skip_if_not(dir.exists("/proc/self"), "reads the session's child processes from /proc")
  skip_if(has_nvidia_gpu(), "asserts that \"auto\" starts no worker where no GPU is visible")
  result <- run_in_fresh_r({
    children <- function() {
      pids <- list.files("/proc", pattern = "^[0-9]+$")
      parents <- vapply(pids, function(pid) {
        stat <- tryCatch(readLines(file.path("/proc", pid, "stat"), warn = FALSE), error = function(e) "")
        as.integer(strsplit(sub(".*[)] ", "", stat), " ")[[1]][2])
      }, integer(1))
      as.integer(pids[parents %in% Sys.getpid()])
    }
    auto <- gpu_setup(workers_ahead = "auto")
    after_auto <- list(spares = length(the$spares), children = children())
    one <- gpu_setup(workers_ahead = 1)
    gpu_setup(workers_ahead = 1) # the same again: the one started fits its slot
    spare <- the$spares[[1]]
    ahead <- list(
      spares = length(the$spares), state = spare$state, pid = spare$session$get_pid(), children = children()
    )
    data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
    failed <- tryCatch(gpu_cv(function() Sys.getpid(), data, folds = 2, epochs = 1), error = identity)
    left <- the$spares[[1]]$session
    gpu_setup(seed = 5) # another setup: no pool can take the spares made for the last one
    list(
      auto = unclass(auto), after_auto = after_auto, one = unclass(one), ahead = ahead,
      failed = conditionMessage(failed$parent), left_alive = left$is_alive(), spares = length(the$spares)
    )
  }, unset = "GPUKERAS_SIMULATE_GPU", timeout = 240)
  # no GPU: "auto" started no process, and the print says so
  expect_identical(result$auto$workers_ahead, character())
  expect_identical(result$after_auto, list(spares = 0L, children = integer()))
  expect_match(result$auto$lines, "^  workers ahead: +none \\(no GPU is visible", all = FALSE)
  # a number: that many, in the background (gpu_setup() has returned; the worker is loading),
  # and asked again, no more
  expect_identical(result$one$workers_ahead, "CPU")
  expect_match(result$one$lines, "^  workers ahead: +1 on CPU, loading for the first gpu_cv\\(\\)", all = FALSE)
  expect_identical(result$ahead[c("spares", "state", "children")], list(spares = 1L, state = "starting",
                                                                        children = result$ahead$pid))
  # the first gpu_cv()'s fold ran in it: model_fn returned that process's id
  expect_match(result$failed, sprintf("must return a compiled Keras model, not `%d`", result$ahead$pid), fixed = TRUE)
  # the spare its pool left in the failed worker's slot ended with a gpu_setup() of other settings
  expect_false(result$left_alive)
  expect_identical(result$spares, 0L)
})

test_that("a busy worker ends with the session that started it, even a killed one", {
  skip_on_os("windows")
  folder <- withr::local_tempdir()
  pid_file <- file.path(folder, "pid")
  session <- start_in_fresh_r(
    {
      pool <- new_worker_pool(worker_plan("all", 1, 1), Sys.getenv("POOL_DIR"))
      worker <- worker_start(pool, 1L)
      while (!worker$state %in% c("ready", "ended")) {
        processx::poll(list(worker$session$get_poll_connection()), 1000L)
        worker_step(worker)
      }
      worker$session$call(function() Sys.sleep(300)) # busy, as with a fit
      writeLines(as.character(worker$session$get_pid()), Sys.getenv("PID_FILE"))
      Sys.sleep(600)
    },
    env = c(POOL_DIR = folder, PID_FILE = pid_file)
  )
  withr::defer(session$kill())
  deadline <- Sys.time() + 120
  while (!file.exists(pid_file) && session$is_alive() && Sys.time() < deadline) Sys.sleep(0.2)
  expect_true(file.exists(pid_file))
  pid <- as.integer(readLines(pid_file))
  expect_true(process_running(pid))
  session$kill() # as a crash would end it: no chance to clean up
  deadline <- Sys.time() + 15
  while (process_running(pid) && Sys.time() < deadline) Sys.sleep(0.2)
  expect_false(process_running(pid))
})

mark_slow()
skip_if_no_python()

iris_data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)

test_that("a worker that died is lost with its cause and the last lines it wrote, and no warning", {
  skip_on_os("windows")
  process <- processx::process$new("sh", c("-c", "kill -9 $$"))
  process$wait()
  worker <- new.env()
  worker$session <- process
  worker$outcome <- list(stderr = "first\nlast words\n")
  expect_no_warning(lost <- worker_crash(worker))
  expect_s3_class(lost, "gpukeras_error_worker_lost")
  expect_true(lost$crashed)
  expect_match(conditionMessage(lost), "its worker process was killed by signal 9")
  expect_match(conditionMessage(lost), "last words", fixed = TRUE)
})

test_that("a fit whose process ended before it took its task runs in a fresh one, once", {
  skip_on_os("windows")
  before <- list.files(tempdir(), "^gpukeras-worker-")
  dir <- withr::local_tempdir()
  carried <- many_data(read_training_data(iris_data, FALSE), dir, "gpu_cv")
  model_fn <- check_model_fn(function() {
    keras <- gpu_keras()
    model <- keras$Sequential(list(keras$Input(shape = list(4L)), keras$layers$Dense(3L, activation = "softmax")))
    model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
    model
  }, 0L)
  task <- list(
    number = 1L,
    model_fn = model_fn,
    seed = 1L,
    data = carried$files,
    train_rows = 1:150,
    fit = list(epochs = 2, batch_size = 50L)
  )
  pool <- new_worker_pool(worker_plan("all", 1, 1), dir)
  withr::defer(worker_spares_end())
  withr::defer(worker_close(pool))
  # the slot's waiting process killed (as an out-of-memory killer would)
  # before the task reaches it
  run_after_a_kill <- function(task) {
    if (!is.null(pool$ready[[1]])) worker_end(pool$ready[[1]])
    waiting <- worker_start(pool, 1L)
    pool$ready[[1]] <- waiting
    deadline <- Sys.time() + 120
    while (waiting$state != "ready" && Sys.time() < deadline) worker_wait(pool, 1)
    tools::pskill(waiting$session$get_pid(), tools::SIGKILL)
    while (waiting$session$is_alive() && Sys.time() < deadline) Sys.sleep(0.05)
    ended <- list()
    worker_run(pool, list(task), on_end = function(one) {
      ended[[length(ended) + 1L]] <<- one
      list()
    })
    ended
  }
  ended <- run_after_a_kill(task)
  expect_length(ended, 1L)
  expect_null(ended[[1]]$result$error)
  expect_length(ended[[1]]$result$history$loss, 2L)
  expect_true(ended[[1]]$task$retried)
  # the worker that ran it is the slot's ready worker again, reset for the next task
  expect_identical(pool$ready[[1]]$state, "ready")
  expect_null(pool$ready[[1]]$task)
  # once: a fit whose second process also ended first is lost, with the cause
  task$retried <- TRUE
  ended <- run_after_a_kill(task)
  expect_identical(ended[[1]]$result$error$class[1], "gpukeras_error_worker_lost")
  expect_true(ended[[1]]$result$error$crashed)
  expect_s3_class(ended[[1]]$condition, "gpukeras_error_worker_lost")
  expect_match(ended[[1]]$result$error$message, "killed by signal 9")
  # the workers' folders went with them
  expect_setequal(list.files(tempdir(), "^gpukeras-worker-"), before)
})

test_that("gpu_cv() trains each fold in a fresh process and equals separate gpu_fit() calls", {
  result <- run_in_fresh_r({
    model_fn <- function() {
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = 4), keras$layers$Dense(8, activation = "relu"),
        keras$layers$Dense(3, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy", metrics = list("accuracy"))
      model
    }
    data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
    cv <- gpu_cv(model_fn, data, folds = 3, epochs = 2, batch_size = 16, seed = 11)
    frameworks <- reticulate::py_eval("sorted(set(__import__('sys').modules) & {'tensorflow', 'jax'})")
    # fold 2 by hand, in this process: the seed, a fresh model, gpu_fit() on the fold's rows
    train <- cv$folds
    rows <- setdiff(1:150, cv$folds[[2]])
    gpu_keras()$utils$set_random_seed(cv$seeds[2])
    model <- model_fn()
    fit <- gpu_fit(
      model, list(x = data$x[rows, ], y = data$y[rows]), epochs = 2, batch_size = 16, seed = cv$seeds[2], verbose = 0
    )
    by_hand <- evaluate(fit, data$x[cv$folds[[2]], ], data$y[cv$folds[[2]]])
    grDevices::pdf(NULL)
    plotted <- plot(cv)
    grDevices::dev.off()
    list(
      cv = unclass(cv), frameworks = frameworks, by_hand = by_hand, text = format(cv),
      plotted = inherits(plotted, "gpukeras_cv"), predicted = predict(fit, data$x[cv$folds[[2]], ])
    )
  }, timeout = 240)
  cv <- result$cv
  # the session that ran gpu_cv() started no framework: it held no device memory
  expect_identical(as.character(result$frameworks), character())
  expect_identical(names(cv$metrics), c("fold", "loss", "accuracy"))
  expect_identical(cv$metrics$fold, 1:3)
  expect_setequal(unlist(cv$folds), 1:150)
  expect_identical(dim(cv$predictions), c(150L, 3L))
  expect_identical(colnames(cv$predictions), levels(iris$Species))
  expect_equal(unname(rowSums(cv$predictions)), rep(1, 150), tolerance = 1e-5)
  expect_identical(cv$devices, rep(worker_device(), 3))
  expect_identical(length(unique(cv$seeds)), 3L)
  # fold 2 is the same fit as gpu_fit() by hand: the same metrics and predictions
  expect_equal(cv$metrics$loss[2], unname(result$by_hand[["loss"]]), tolerance = 1e-6)
  expect_equal(cv$metrics$accuracy[2], unname(result$by_hand[["accuracy"]]), tolerance = 1e-6)
  expect_equal(unname(cv$predictions[cv$folds[[2]], ]), unname(result$predicted), tolerance = 1e-6)
  expect_true(result$plotted)
  expect_match(result$text[1], "^<gpukeras_cv> 3 folds \\(stratified by the labels\\), seed 11")
  expect_true(any(grepl("^  loss +[0-9.]+ \\(sd [0-9.e-]+\\)", result$text)))
})

test_that(paste(
  "gpu_cv() runs on JAX too, with a data.frame of factors and groups, the session's gpu_setup() in its workers; a",
  "second one loads what the first compiled"
), {
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  result <- run_in_fresh_r({
    # Process-local (a JAX config, no variable a child inherits): each worker applies it
    # while it waits for its fold (worker_ready()).
    gpu_setup(cpu_devices = 2)
    seen <- tempfile("setup-seen-")
    dir.create(seen)
    model_fn <- function() {
      writeLines(as.character(length(reticulate::import("jax")$devices())), file.path(seen, Sys.getpid()))
      keras <- gpu_keras()
      model <- keras$Sequential(list(keras$Input(shape = 5), keras$layers$Dense(1, activation = "sigmoid")))
      model$compile(optimizer = "adam", loss = "binary_crossentropy")
      model
    }
    df <- data.frame(income = seq(0, 1, length.out = 40), region = factor(rep(c("n", "s", "e", "w"), 10)),
                     site = rep(1:8, each = 5))
    data <- list(x = df, y = as.numeric(df$income > 0.5))
    cv <- gpu_cv(model_fn, data, folds = 4, group = "site", epochs = 1, seed = 3)
    compiled <- gpu_compile_cache()$folder
    after_first <- list.files(compiled)
    again <- gpu_cv(model_fn, data, folds = 4, group = "site", epochs = 1, seed = 3)
    list(cv = unclass(cv), again = unclass(again), after_first = after_first, after_second = list.files(compiled),
         devices = vapply(list.files(seen, full.names = TRUE), readLines, ""))
  }, env = c(KERAS_BACKEND = "jax", GPUKERAS_COMPILE_CACHE = tempfile("compiled-")), timeout = 240)
  # one worker (its folds trained as one population), with the session's two CPU devices:
  # the first gpu_cv()'s, which the second took as the session's spare
  expect_identical(result$cv$trained, "population")
  expect_identical(unname(result$devices), "2")
  # the session's workers share the user's compilation cache: the second gpu_cv()'s folds,
  # the same model on the same shapes, compile nothing new
  expect_gt(length(result$after_first), 0)
  expect_setequal(result$after_second, result$after_first)
  expect_identical(result$again$metrics, result$cv$metrics)
  cv <- result$cv
  expect_identical(nrow(cv$metrics), 4L)
  expect_identical(names(cv$metrics), c("fold", "loss"))
  expect_identical(cv$split, "grouped")
  site <- rep(1:8, each = 5)
  # a site's rows are held out together
  for (held in cv$folds) expect_true(all(table(site[held]) == 5))
  expect_identical(dim(cv$predictions), c(40L, 1L))
  expect_false(anyNA(cv$predictions))
})
