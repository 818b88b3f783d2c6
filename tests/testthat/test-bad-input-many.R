# Bad inputs to the many-fits functions: gpu_cv(), gpu_search() and the search space
# (search_int(), search_float(), search_choice()). Each row must fail with a classed
# error whose message says what to do (see helper-bad-input.R), before Python starts and
# before any worker does.

# nolint start: line_length_linter. One case a row, its columns aligned.
checked <- check_before_python(bad_inputs(
  ~name,                                   ~code,                                                                       ~class,         ~message,
  "search_int: lower above upper",         search_int(5, 1),                                                            "bad_argument", "^`lower` \\(5\\) is above `upper` \\(1\\)",
  "search_int: not whole",                 search_int(1.5, 4),                                                          "bad_argument", "^`lower` must be one finite whole number, not `1.5`",
  "search_int: log from 0",                search_int(0, 10, log = TRUE),                                               "bad_argument", "^A log scale needs bounds above 0, and `lower` is 0",
  "search_float: log of a negative",       search_float(-1, 1, log = TRUE),                                             "bad_argument", "^A log scale needs bounds above 0",
  "search_float: a string bound",          search_float("a", 1),                                                        "bad_argument", "^`lower` must be one finite number, not `a`",
  "search_float: Inf",                     search_float(0, Inf),                                                        "bad_argument", "^`upper` must be one finite number, not `Inf`",
  "search_float: log NA",                  search_float(0, 1, log = NA),                                                "bad_argument", "^`log` must be TRUE or FALSE",
  "search_choice: nothing",                search_choice(),                                                             "bad_argument", "^search_choice\\(\\) needs at least one value",
  "search_choice: a vector",               search_choice(c(16, 32)),                                                    "bad_argument", "^Each value of search_choice\\(\\) must be one string.*do.call\\(search_choice",
  "search_choice: twice",                  search_choice("adam", "adam"),                                               "bad_argument", "^search_choice\\(\\) was given adam twice",
  "search_choice: NA",                     search_choice("adam", NA),                                                   "bad_argument", "^Each value of search_choice\\(\\) must be one string",
  "gpu_search: space missing",             gpu_search(search_fn, iris_data),                                            "bad_argument", "^`space` is missing",
  "gpu_search: space not a list",          gpu_search(search_fn, iris_data, space = 3),                                 "bad_argument", "^`space` must be a named list",
  "gpu_search: space unnamed",             gpu_search(search_fn, iris_data, space = list(search_int(1, 2))),            "bad_argument", "^Every element of `space` needs a name",
  "gpu_search: space of a fixed value",    gpu_search(search_fn, iris_data, space = list(units = 8)),                   "bad_argument", "^`space\\$units` is `8`, not a search_int",
  "gpu_search: space empty",               gpu_search(search_fn, iris_data, space = list()),                            "bad_argument", "^`space` is empty",
  "gpu_search: searched twice",            gpu_search(search_fn, iris_data, list(batch_size = search_choice(8, 16)), batch_size = search_choice(8)), "bad_argument", "^`batch_size` is searched twice, in `space` and in `...`",
  "gpu_search: space not read by model_fn", gpu_search(search_fn, iris_data, space = list(unit = search_int(1, 2))), "bad_argument", "^`space\\$unit` is a name that model_fn never reads.*Did you mean `units`",
  "gpu_search: model_fn not a function",   gpu_search("model", iris_data, units_space),                                 "bad_argument", "^`model_fn` must be an R function that builds and compiles the model",
  "gpu_search: model_fn of two arguments", gpu_search(function(a, b) NULL, iris_data, units_space),                     "bad_argument", "^`model_fn` must take one argument \\(the trial's parameters\\), but it takes `a`, `b`",
  "gpu_search: trials zero",               gpu_search(search_fn, iris_data, units_space, trials = 0),                   "bad_argument", "^`trials` must be one whole number >= 1",
  "gpu_search: sampler unknown",           gpu_search(search_fn, iris_data, units_space, sampler = "bayes"),            "bad_argument", "^`sampler` must be one of \"tpe\", \"random\", \"grid\"",
  "gpu_search: pruner unknown",            gpu_search(search_fn, iris_data, units_space, pruner = "mean"),              "bad_argument", "^`pruner` must be one of \"median\", \"hyperband\", \"asha\", \"none\"",
  "gpu_search: direction unknown",         gpu_search(search_fn, iris_data, units_space, direction = "up"),             "bad_argument", "^`direction` must be one of \"auto\", \"minimize\", \"maximize\"",
  "gpu_search: objective not a string",    gpu_search(search_fn, iris_data, units_space, objective = 1),                "bad_argument", "^`objective` must be one non-empty string",
  "gpu_search: misspelt fit argument",     gpu_search(search_fn, iris_data, units_space, epoch = 2),                    "bad_argument", "^gpu_search\\(\\) has no argument `epoch`, nor has gpu_fit\\(\\).*Did you mean `epochs` for `epoch`",
  "gpu_search: misspelt own argument",     gpu_search(search_fn, iris_data, units_space, trails = 5),                   "bad_argument", "^gpu_search\\(\\) has no argument `trails`, nor has gpu_fit\\(\\).*Did you mean `trials` for `trails`",
  "gpu_search: a fit argument by position", gpu_search(search_fn, iris_data, units_space, 20, "val_loss", "auto", "tpe", "median", NULL, "gpukeras", 1, 1, FALSE, 3), "bad_argument", "^gpu_search\\(\\) takes gpu_fit\\(\\)'s arguments in `...` by name",
  "gpu_search: verbose for the workers",   gpu_search(search_fn, iris_data, units_space, verbose = 2),                  "bad_argument", "^`verbose` cannot be given to gpu_search\\(\\): workers train silently",
  "gpu_search: seed negative",             gpu_search(search_fn, iris_data, units_space, seed = -1),                    "bad_argument", "^`seed` must be one whole number >= 0",
  "gpu_search: devices a word",            gpu_search(search_fn, iris_data, units_space, workers = gpu_workers("gpu")), "bad_argument", "^`devices` must be \"all\" or GPU indices",
  "gpu_search: devices moved",             gpu_search(search_fn, iris_data, units_space, devices = 0),                  "bad_argument", "^gpu_search\\(\\) has no argument `devices` any more: give workers = gpu_workers\\(devices = \\)",
  "gpu_search: workers a word",            gpu_search(search_fn, iris_data, units_space, workers = "all"),              "bad_argument", "^`workers` must be gpu_workers\\(...\\) or a number of workers, not `all`",
  "gpu_search: workers zero",              gpu_search(search_fn, iris_data, units_space, workers = 0),                  "bad_argument", "^`workers` must be one whole number >= 1",
  "gpu_search: background NA",             gpu_search(search_fn, iris_data, units_space, background = NA),              "bad_argument", "^`background` must be gpu_background\\(...\\), TRUE or FALSE, not `NA`",
  "gpu_search: data missing",              gpu_search(search_fn, space = units_space),                                  "bad_argument", "^`data` is missing",
  "gpu_cv: model_fn with an argument",     gpu_cv(function(units) NULL, iris_data),                                     "bad_argument", "^`model_fn` must take no arguments, but it takes `units`",
  "gpu_cv: misspelt own argument",         gpu_cv(cv_fn, iris_data, grup = 2),                                          "bad_argument", "^gpu_cv\\(\\) has no argument `grup`, nor has gpu_fit\\(\\).*Did you mean `group` for `grup`",
  "gpu_cv: one fold",                      gpu_cv(cv_fn, iris_data, folds = 1),                                         "bad_argument", "^`folds` must be a whole number from 2 to the rows \\(150\\)",
  "gpu_cv: more folds than rows",          gpu_cv(cv_fn, iris_data, folds = 151),                                       "bad_argument", "^`folds` must be a whole number from 2 to the rows",
  "gpu_cv: folds a word",                  gpu_cv(cv_fn, iris_data, folds = "five"),                                    "bad_argument", "^`folds` must be a whole number .*rsample::vfold_cv",
  "gpu_cv: group of the wrong length",     gpu_cv(cv_fn, iris_data, group = 1:3),                                       "bad_argument", "^`group` must have one group per row of `data` \\(150\\)",
  "gpu_cv: group naming no column",        gpu_cv(cv_fn, iris_data, group = "patient"),                                 "bad_argument", "^`group` names the column \"patient\", but `data\\$x` is not a data.frame",
  "gpu_cv: fewer groups than folds",       gpu_cv(cv_fn, iris_data, folds = 5, group = rep(1:2, 75)),                   "bad_argument", "^`group` has 2 groups, fewer than the 5 folds",
  "gpu_cv: validation_data",               gpu_cv(cv_fn, iris_data, validation_data = iris_data),                       "bad_argument", "^`validation_data` cannot be given to gpu_cv\\(\\)",
  "gpu_cv: background",                    gpu_cv(cv_fn, iris_data, background = TRUE),                                 "bad_argument", "^`background` cannot be given to gpu_cv\\(\\): each fit is already in a process of its own",
  "gpu_cv: per_device zero",               gpu_cv(cv_fn, iris_data, workers = gpu_workers(per_device = 0)),             "bad_argument", "^`per_device` must be \"auto\" or one whole number >= 1",
  "gpu_cv: workers_per_device moved",      gpu_cv(cv_fn, iris_data, workers_per_device = 2),                            "bad_argument", "^gpu_cv\\(\\) has no argument `workers_per_device` any more: give workers = gpu_workers\\(per_device = \\)",
  "gpu_cv: a dataset",                     gpu_cv(cv_fn, list(train = 1, validation = 2)),                              "bad_data",     "^`data` is a list with names `train`, `validation`"
), setup = quote({
# nolint end
  iris_data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  search_fn <- function(params) params$units
  cv_fn <- function() NULL
  units_space <- list(units = search_int(4, 16))
}))

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}

test_that("the space's and the many-fits functions' messages read as they should", {
  expect_snapshot(error = TRUE, {
    search_int(5, 1)
    search_float(0, 1, log = TRUE)
    search_choice()
    gpu_search(function(params) NULL, list(x = matrix(1:4, 2), y = 1:2), space = list(units = 8))
    gpu_cv(function() NULL, list(x = matrix(1:4, 2), y = 1:2), epoch = 3)
    gpu_cv(function() NULL, list(x = as.matrix(iris[, 1:4]), y = iris$Species), group = rep(1:2, 75))
  })
})

test_that("gpu_cv() and gpu_search() suggest their own argument for a misspelt one", {
  expect_snapshot(error = TRUE, {
    gpu_cv(function() NULL, list(x = matrix(1:4, 2), y = 1:2), grup = 2)
    gpu_search(function(params) NULL, list(x = matrix(1:4, 2), y = 1:2), list(units = search_int(1, 4)), trails = 5)
  })
})
