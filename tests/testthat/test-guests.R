# Other packages in the same session. keras3 registers reticulate load hooks
# (its `keras` hook makes a tensor, which starts TensorFlow's devices) and
# sets Keras' global dtype policy; gpukeras must work with both. keras3 is not
# installable here, so these tests use its mechanisms: the hook through
# reticulate's own py_register_load_hook(), the policy through Keras.

test_that(paste(
  "gpu_setup() applies every setting although a keras3-like load hook would start TensorFlow; the hooks run once,",
  "after"
), {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      ran <- new.env()
      ran$keras <- 0L
      ran$tensorflow <- 0L
      register <- reticulate:::py_register_load_hook
      register("keras", function() {
        ran$keras <- ran$keras + 1L
        reticulate::import("keras")$ops$convert_to_tensor(array(1L))
        tf <- reticulate::import("tensorflow")
        ran$cpus_seen_by_hook <- length(tf$config$list_logical_devices("CPU"))
      })
      register("tensorflow", function() ran$tensorflow <- ran$tensorflow + 1L)
      register("a_module_never_imported", function() stop("never"))
      setup <- gpu_setup(threads = 2L, cpu_devices = 2L)
      after_setup <- c(keras = ran$keras, tensorflow = ran$tensorflow)
      # Later imports of the same modules run no hook again.
      reticulate::import("keras")
      gpu_devices()
      tf <- reticulate::import("tensorflow")
      list(
        setup = unclass(setup)[c("cpu_devices", "intra_op_threads", "inter_op_threads")],
        tf_threads = c(
          tf$config$threading$get_intra_op_parallelism_threads(),
          tf$config$threading$get_inter_op_parallelism_threads()
        ),
        tf_cpus = length(tf$config$list_logical_devices("CPU")),
        after_setup = after_setup,
        at_end = c(keras = ran$keras, tensorflow = ran$tensorflow),
        cpus_seen_by_hook = ran$cpus_seen_by_hook,
        hooks_left = c(
          keras = length(getHook("reticulate::keras::load")),
          never = length(getHook("reticulate::a_module_never_imported::load"))
        )
      )
    },
    # reticulate 1.28's py_register_load_hook() starts Python to ask whether the
    # module is loaded: it must start gpukeras' Python.
    env = c(KERAS_BACKEND = "tensorflow", RETICULATE_PYTHON = gpukeras_python())
  )
  expect_identical(child$setup, list(cpu_devices = 2L, intra_op_threads = 2L, inter_op_threads = 2L))
  expect_identical(child$tf_threads, c(2L, 2L))
  expect_identical(child$tf_cpus, 2L)
  expect_identical(child$after_setup, c(keras = 1L, tensorflow = 1L))
  expect_identical(child$at_end, c(keras = 1L, tensorflow = 1L))
  # The hook ran once the settings were in force.
  expect_identical(child$cpus_seen_by_hook, 2L)
  # A hook for a module not imported stays registered for when it is.
  expect_identical(child$hooks_left, c(keras = 0L, never = 1L))
})

test_that("a hook that fails is a warning, as in reticulate, and gpu_setup() still succeeds", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      reticulate:::py_register_load_hook("keras", function() stop("the other package's hook failed"))
      warnings <- character()
      setup <- withCallingHandlers(
        gpu_setup(threads = 1L),
        warning = function(w) {
          warnings <<- c(warnings, conditionMessage(w))
          invokeRestart("muffleWarning")
        }
      )
      list(threads = setup$intra_op_threads, warnings = warnings)
    },
    env = c(KERAS_BACKEND = "tensorflow", RETICULATE_PYTHON = gpukeras_python())
  )
  expect_identical(child$threads, 1L)
  expect_identical(child$warnings, "A load hook for Python module 'keras' failed: the other package's hook failed")
})

test_that("a dtype policy set outside gpukeras is kept unless mixed_precision is passed, and gpu_check() names it", {
  skip_if_no_python()
  child <- run_in_fresh_r(
    {
      keras <- gpu_keras()
      # What keras3's config_set_dtype_policy("mixed_bfloat16") does.
      keras$config$set_dtype_policy("mixed_bfloat16")
      kept <- gpu_setup(threads = 1L)
      check <- gpu_check(probe_seconds = 0.2)
      refused <- catch_error(gpu_setup(mixed_precision = "float16", cpu_devices = 3L))
      after_refused <- keras$config$dtype_policy()$name
      asked <- gpu_setup(mixed_precision = "float32", threads = 1L)
      list(
        kept = unclass(kept)[c("dtype_policy", "precision_reason")],
        kept_format = format(kept),
        check_setup = unclass(check$setup)[c("dtype_policy", "precision_reason")],
        check_format = format(check),
        refused = refused$class[1],
        after_refused = after_refused,
        asked = unclass(asked)[c("dtype_policy", "precision_reason")],
        policy_at_end = keras$config$dtype_policy()$name
      )
    },
    env = c(KERAS_BACKEND = "tensorflow")
  )
  outside <- paste0(
    "set outside gpukeras (e.g. keras3's config_set_dtype_policy()); gpu_setup() keeps it unless given mixed_precision"
  )
  expect_identical(child$kept, list(dtype_policy = "mixed_bfloat16", precision_reason = outside))
  expect_true(any(grepl("precision:       mixed_bfloat16 (set outside gpukeras", child$kept_format, fixed = TRUE)))
  expect_identical(child$check_setup, child$kept)
  expect_false(any(grepl("Keras default", child$check_format, fixed = TRUE)))
  expect_true(any(grepl("set outside gpukeras", child$check_format, fixed = TRUE)))
  expect_identical(child$refused, "gpukeras_error_runtime_started")
  expect_identical(child$after_refused, "mixed_bfloat16")
  expect_identical(child$asked, list(dtype_policy = "float32", precision_reason = "asked for float32"))
  expect_identical(child$policy_at_end, "float32")
})

# `lines` run as top-level calls, as typed at the console (a script run by
# Rscript, where R's task callbacks run after each call), after a keras3-like
# load hook that counts its runs in `ran$keras` was registered; its output.
run_top_level <- function(lines) {
  path <- getNamespaceInfo("gpukeras", "path")
  load <- if (is_source_tree(path)) {
    sprintf("pkgload::load_all(%s, quiet = TRUE, helpers = FALSE)", deparse(path))
  } else {
    sprintf("library(gpukeras, lib.loc = %s)", deparse(dirname(path)))
  }
  script <- withr::local_tempfile(fileext = ".R")
  writeLines(c(
    load,
    "ran <- new.env()",
    "ran$keras <- 0L",
    paste0(
      "reticulate:::py_register_load_hook('keras', function() { ran$keras <- ran$keras + 1L; ",
      "reticulate::import('keras')$ops$convert_to_tensor(array(1L)) })"
    ),
    lines
  ), script)
  result <- callr::rscript(
    script,
    env = c(callr::rcmd_safe_env(), KERAS_BACKEND = "tensorflow", RETICULATE_PYTHON = gpukeras_python()),
    libpath = .libPaths(), show = FALSE, fail_on_status = FALSE, timeout = 180
  )
  if (result$status != 0) {
    stop("The script failed: ", result$stderr)
  }
  trimws(strsplit(result$stdout, "\n")[[1]])
}

test_that("after a refused gpu_setup() the hooks stay held, so a corrected call still applies", {
  skip_if_no_python()
  lines <- run_top_level(c(
    "refused <- try(gpu_setup(devices = 'CPU:5'), silent = TRUE)",
    "setup <- gpu_setup(threads = 2L)",
    paste0(
      "cat('refused:', class(attr(refused, 'condition'))[1], '| retried: threads', setup$intra_op_threads, '| hook ",
      "runs:', ran$keras, '\\n')"
    ),
    "cat('at the end, hook runs:', ran$keras, '\\n')"
  ))
  expect_true("refused: gpukeras_error_unknown_device | retried: threads 2 | hook runs: 1" %in% lines)
  expect_true("at the end, hook runs: 1" %in% lines)
})

test_that("after a refused gpu_setup(), the next top-level call that is not gpu_setup() runs the held hooks", {
  skip_if_no_python()
  lines <- run_top_level(c(
    "refused <- try(gpu_setup(devices = 'CPU:5'), silent = TRUE)",
    "cat('held, hook runs:', ran$keras, '\\n')",
    "cat('released, hook runs:', ran$keras, '\\n')"
  ))
  # The first `cat` prints before its call completes, the second after.
  expect_true("held, hook runs: 0" %in% lines)
  expect_true("released, hook runs: 1" %in% lines)
})
