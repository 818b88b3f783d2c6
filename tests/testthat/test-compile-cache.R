# gpu_compile_cache(): JAX's compiled programs kept in the user's cache for later sessions.

fit_small_and_say <- quote({
  keras <- gpu_keras()
  model <- keras$Sequential(list(keras$Input(shape = 3), keras$layers$Dense(4), keras$layers$Dense(1)))
  model$compile(optimizer = "adam", loss = "mse")
  x <- matrix(seq_len(48) / 48, ncol = 3)
  fit <- gpu_fit(model, list(x = x, y = x[, 1]), epochs = 1, batch_size = 8, seed = 1, verbose = 0)
  predict(fit, x)
  cache <- gpu_compile_cache()
  kept <- !is.null(cache$folder)
  list(cache = unclass(cache), printed = format(cache),
       mode = if (kept) file.info(cache$folder)$mode, programs = if (kept) length(list.files(cache$folder, "-cache$")))
})

test_that("a second R session compiles nothing: it loads what the first compiled, from the user's cache", {
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  home <- withr::local_tempdir("user-cache-")
  # the default folder: the user's cache (R_USER_CACHE_DIR here), private
  env <- c(KERAS_BACKEND = "jax", R_USER_CACHE_DIR = home)
  first <- eval(bquote(run_in_fresh_r(.(fit_small_and_say), env = env, unset = "GPUKERAS_COMPILE_CACHE")))
  expect_identical(first$cache$folder, file.path(home, "R", "gpukeras", "compiled"))
  expect_identical(first$cache$whose, "gpukeras")
  expect_identical(format(first$mode), "700")
  expect_gt(first$cache$misses, 0)
  expect_identical(first$cache$hits, 0L)
  expect_identical(first$programs, as.integer(first$cache$misses))
  second <- eval(bquote(run_in_fresh_r(.(fit_small_and_say), env = env, unset = "GPUKERAS_COMPILE_CACHE")))
  expect_identical(second$cache$misses, 0L)
  expect_identical(second$cache$hits, first$cache$misses)
  expect_identical(second$programs, first$programs)
  expect_match(second$printed[3], sprintf("this session: 0 compiled, %d loaded from the cache", second$cache$hits),
               fixed = TRUE)
  # clearing removes the programs, and the next session compiles them again
  cleared <- run_in_fresh_r(unclass(gpu_compile_cache(clear = TRUE)), env = env, unset = "GPUKERAS_COMPILE_CACHE")
  expect_identical(cleared$programs, 0L)
  expect_gte(cleared$cleared, first$programs)
  expect_identical(list.files(file.path(home, "R", "gpukeras", "compiled")), character())
})

test_that("the cache can be turned off, or kept in a folder of the user's choosing, and a user's own JAX cache wins", {
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  off <- eval(bquote(run_in_fresh_r(.(fit_small_and_say), env = c(KERAS_BACKEND = "jax"),
                                    options = list(gpukeras.compile_cache = FALSE))))
  expect_null(off$cache$folder)
  expect_identical(off$cache$whose, "off")
  expect_identical(off$printed[1], paste(
    "<gpukeras compile cache> none: turned off (option gpukeras.compile_cache or GPUKERAS_COMPILE_CACHE)"
  ))
  mine <- withr::local_tempdir("mine-")
  env <- c(KERAS_BACKEND = "jax", JAX_COMPILATION_CACHE_DIR = mine)
  theirs <- eval(bquote(run_in_fresh_r(.(fit_small_and_say), env = env,
                                       options = list(gpukeras.compile_cache = file.path(mine, "not-used")))))
  expect_identical(theirs$cache$whose, "user")
  expect_identical(theirs$cache$folder, mine)
  expect_match(theirs$printed[1], "(yours: JAX_COMPILATION_CACHE_DIR)", fixed = TRUE)
  expect_length(list.files(file.path(mine, "not-used")), 0)
})

test_that("a size bound past R's integers (2^31 - 1 bytes) is kept and printed whole", {
  skip_if_no_python()
  folder <- withr::local_tempdir("large-bound-")
  # reticulate wraps a Python int past R's integers around 2^32: 5e9 read as 705,032,704
  large <- run_in_fresh_r(list(cache = unclass(gpu_compile_cache()), printed = format(gpu_compile_cache())),
                          options = list(gpukeras.compile_cache = folder, gpukeras.compile_cache_size = 5e9))
  expect_identical(large$cache$max_bytes, 5e9)
  expect_match(large$printed[2], "(at most 4.7 GiB)", fixed = TRUE)
})

test_that("gpu_compile_cache() refuses a bad argument or option, naming it", {
  skip_if_no_python()
  expect_snapshot(gpu_compile_cache(clear = "yes"), error = TRUE)
  withr::local_options(gpukeras.compile_cache = 3)
  expect_snapshot(gpu_compile_cache(clear = TRUE), error = TRUE)
  withr::local_options(gpukeras.compile_cache = TRUE, gpukeras.compile_cache_size = "lots")
  expect_snapshot(gpu_compile_cache(clear = TRUE), error = TRUE)
  expect_error(gpu_compile_cache(clear = TRUE), class = "gpukeras_error_bad_argument")
})

test_that("a session hands its cache to its workers", {
  skip_if_no_python()
  folder <- withr::local_tempdir("workers-cache-")
  withr::local_options(gpukeras.compile_cache = folder, gpukeras.compile_cache_size = 5e8)
  env <- process_env()
  expect_identical(env[["GPUKERAS_COMPILE_CACHE"]], folder)
  expect_identical(env[["GPUKERAS_COMPILE_CACHE_SIZE"]], "500000000")
  withr::local_options(gpukeras.compile_cache = FALSE)
  expect_identical(process_env()[["GPUKERAS_COMPILE_CACHE"]], "false")
})

test_that("a bad option stops the core's start, classed, until it is mended", {
  skip_if_no_python()
  result <- run_in_fresh_r({
    options(gpukeras.compile_cache = 3)
    first <- tryCatch(gpu_compile_cache(), error = function(e) class(e))
    options(gpukeras.compile_cache = FALSE)
    list(first = first, then = gpu_compile_cache()$whose)
  })
  expect_true("gpukeras_error_bad_argument" %in% result$first)
  expect_identical(result$then, "off")
})
