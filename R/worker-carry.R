# What gpu_cv() and gpu_search() share before any worker starts: the model function
# (checked, and made to carry what it uses), gpu_fit()'s arguments in their `...`, the
# data (R data, carried once as .npy files), and the seeds.

# `model_fn` checked: a function taking `arity` arguments (0 for gpu_cv(), the params
# for gpu_search()), made ready for a worker process (carry_function()).
check_model_fn <- function(model_fn, arity, call = caller_env()) {
  usage <- if (arity == 0L) {
    "e.g. model_fn = function() { model <- keras$Sequential(...); model$compile(...); model }"
  } else {
    "e.g. model_fn = function(params) { ... keras$layers$Dense(params$units) ... ; model$compile(...); model }"
  }
  # a Keras model is callable, so R takes it for a function: it is the model itself
  if (!is.function(model_fn) || inherits(model_fn, "python.builtin.object")) {
    given <- if (inherits(model_fn, "python.builtin.object")) sprintf("a model itself (%s)", class(model_fn)[1]) else
      describe(model_fn)
    abort_bad_argument(
      c(sprintf("`model_fn` must be an R function that builds and compiles the model, not %s.", given),
        "Each fit calls it in a fresh process, so every fit starts from fresh weights.", usage),
      call = call
    )
  }
  # (arity 0 or 1: `...` takes the one argument)
  params <- formals(model_fn)
  if (sum(vapply(params, rlang::is_missing, logical(1)) & names(params) != "...") > arity || length(params) < arity) {
    abort_bad_argument(c(
      sprintf(
        "`model_fn` must take %s, but it takes %s.",
        if (arity == 0L) "no arguments" else "one argument (the trial's parameters)",
        if (length(params)) paste0("`", names(params), "`", collapse = ", ") else "none"
      ),
      usage
    ), call = call)
  }
  carry_function(model_fn, call = call)
}

# `fn` as a worker process can run it: a function finds its variables in the global
# environment, which does not travel with it (saveRDS() writes a closure's environment,
# but not the global one), and the Python objects among them would arrive dead. So the
# variables it uses (its closure's, and the global ones), and those of the user's
# functions it calls (global ones, and helpers made beside it), go with it in one
# environment of their own, as the future package carries globals (found by the globals
# package, as future finds them: `x <- x` uses a global `x`); its Python objects are
# made again there (carry_python()). Also for a function made inside another one
# (lapply()'s over configurations, a package's): the variables it takes from there
# travel, not the rest of that frame; a package's own come from its namespace, loaded
# there. A name two of these functions find bound to different values cannot share that
# environment: an error, not a silent mix-up. The packages attached here are attached
# there. A package's function is left as it is, and so is one carried already (a
# background search's process gets it so).
carry_function <- function(fn, call = caller_env()) {
  top <- topenv(environment(fn))
  if (is.null(attr(fn, "gpukeras_packages")) && (identical(top, globalenv()) || !identical(environment(fn), top))) {
    globals <- new.env(parent = top)
    # a function's own variables first, then those of the functions it calls: a clash is
    # then found in the function called, which it names
    collect <- function(f, label) {
      added <- character()
      for (name in globals::findGlobals(f)) {
        where <- user_binding(name, environment(f), top)
        if (is.null(where)) next
        value <- get(name, envir = where)
        if (exists(name, envir = globals, inherits = FALSE)) {
          if (!identical(get(name, envir = globals), value)) carry_clash(name, label, call)
          next
        }
        assign(name, value, envir = globals)
        added <- c(added, name)
      }
      for (name in added) if (users_function(globals[[name]])) collect(globals[[name]], name)
    }
    collect(fn, "model_fn")
    # each without its source references: a function made by source() or in a package's
    # tests keeps the lines of its whole file, which would travel with it (a password
    # written there too, into the file callr writes for each call)
    for (name in ls(globals, all.names = TRUE)) {
      if (users_function(globals[[name]])) {
        globals[[name]] <- utils::removeSource(globals[[name]])
        environment(globals[[name]]) <- globals
      }
    }
    fn <- utils::removeSource(fn)
    environment(fn) <- globals
    fn <- carry_python(fn, call)
  }
  attr(fn, "gpukeras_packages") <- attr(fn, "gpukeras_packages") %||% setdiff(.packages(), c(base_packages, "gpukeras"))
  fn
}

# A function of the user's, whose variables travel with model_fn: made in the global
# environment or in a function called from there, not a package's.
users_function <- function(value) {
  is.function(value) && !is.primitive(value) && identical(topenv(environment(value)), globalenv())
}

carry_clash <- function(name, label, call) {
  abort_bad_argument(c(
    sprintf(paste(
      "`model_fn` and the function `%s` it calls find `%s` bound to different values, which a worker process",
      "cannot tell apart."
    ), label, name),
    "i" = paste(
      "The variables of model_fn and of the functions it calls travel together: give one of the two another name,",
      "or pass it as an argument."
    )
  ), call = call)
}

# The environment from `env` up to `top` that binds `name`, or NULL: the global
# environment is searched (it does not travel), a namespace is not (it loads there).
user_binding <- function(name, env, top) {
  repeat {
    if (identical(env, top) && !identical(top, globalenv())) return(NULL)
    if (exists(name, envir = env, inherits = FALSE)) return(env)
    if (identical(env, top) || identical(env, emptyenv())) return(NULL)
    env <- parent.env(env)
  }
}

# A Python object cannot travel to another process: the one a worker received would be
# a dead pointer (`keras$Sequential` NULL there: "attempt to apply non-function"). The
# carried variables that hold gpu_keras()'s `keras` or a Python module leave the carried
# environment and are made again in the worker (worker_function(): gpu_keras(),
# python_module()). Any other Python object (a layer, an optimizer, an array) is an
# error: it would also carry its state from one fit to the next.
carry_python <- function(fn, call) {
  env <- environment(fn)
  remade <- list()
  for (name in ls(env, all.names = TRUE)) {
    value <- env[[name]]
    found <- python_in(value)
    if (!length(found)) next
    remade[[name]] <- if (inherits(value, "gpukeras.core.keras_api.KerasNamespace")) {
      list(keras = TRUE)
    } else if (inherits(value, "python.builtin.module")) {
      list(module = python_module_name(value))
    } else {
      what <- sprintf(
        "%s made in this session (%s)", if (is.list(value)) "a list holding a Python object" else "a Python object",
        class(found[[1]])[1]
      )
      abort_bad_argument(c(
        sprintf("`model_fn` uses `%s`, %s, which a worker process cannot receive.", name, what),
        "i" = sprintf("Make `%s` inside `model_fn`: each fit then gets its own, with fresh weights.", name),
        "i" = paste0(
          "gpu_keras()'s `keras` and Python modules (reticulate::import()) made outside are made again in each ",
          "worker."
        )
      ), call = call)
    }
    rm(list = name, envir = env)
  }
  if (length(remade)) attr(fn, "gpukeras_python") <- remade
  fn
}

# The Python objects in `x`: itself, or those in a plain list, at any depth.
python_in <- function(x) {
  if (inherits(x, "python.builtin.object")) {
    list(x)
  } else if (is.list(x) && !is.object(x)) {
    unlist(lapply(x, python_in), recursive = FALSE)
  } else {
    list()
  }
}

base_packages <- c("base", "stats", "graphics", "grDevices", "utils", "datasets", "methods")

# In a worker: gpukeras and the packages attached where the function was made, attached
# (a worker loads gpukeras' namespace alone: model_fn may call gpu_keras() unqualified).
worker_function <- function(fn) {
  if (!"package:gpukeras" %in% search()) attachNamespace("gpukeras")
  for (package in rev(attr(fn, "gpukeras_packages"))) {
    try(suppressPackageStartupMessages(library(package, character.only = TRUE)), silent = TRUE)
  }
  remade <- attr(fn, "gpukeras_python")
  for (name in names(remade)) {
    value <- if (isTRUE(remade[[name]]$keras)) gpu_keras() else python_module(remade[[name]]$module)
    assign(name, value, envir = environment(fn))
  }
  fn
}

# gpu_cv()'s and gpu_search()'s arguments that moved into gpu_workers().
moved_many_args <- c(
  devices = "workers = gpu_workers(devices = )", workers_per_device = "workers = gpu_workers(per_device = )"
)

# gpu_fit()'s arguments given in `...` of `verb`: named, gpu_fit()'s own, and ones a
# worker can take. The worker sets the data, seed, verbose and callbacks itself.
check_fit_args <- function(args, verb, call = caller_env()) {
  names <- rlang::names2(args)
  if (any(names == "")) {
    abort_bad_argument(
      c(sprintf("%s() takes gpu_fit()'s arguments in `...` by name.", verb), "e.g. epochs = 10, batch_size = 64."),
      call = call
    )
  }
  moved <- intersect(names, names(moved_many_args))
  if (length(moved)) {
    abort_bad_argument(
      sprintf("%s() has no argument `%s` any more: give %s.", verb, moved[1], moved_many_args[[moved[1]]]),
      call = call
    )
  }
  own <- c(setdiff(names(formals(gpu_fit)), "..."), names(deprecated_fit_args))
  unknown <- setdiff(names, own)
  if (length(unknown)) {
    # the verb's own arguments too: gpu_cv(grup = 2) means `group`
    verb_own <- setdiff(names(formals(get(verb, mode = "function"))), "...")
    meant <- lapply(unknown, function(name) {
      closest <- closest_argument(name, c(own, verb_own))
      if (length(closest)) sprintf("Did you mean `%s` for `%s`?", closest, name)
    })
    abort_bad_argument(c(
      sprintf("%s() has no argument%s %s, nor has gpu_fit().", verb, if (length(unknown) > 1L) "s" else "",
              paste0("`", unknown, "`", collapse = ", ")),
      unlist(meant),
      sprintf("?%s and ?gpu_fit list the arguments.", verb)
    ), call = call)
  }
  set_by_worker <- c(
    model = "model_fn makes the model in each worker", data = "`data` is the verb's own argument",
    seed = sprintf("%s(seed = ) seeds each fit", verb), verbose = "workers train silently",
    background = if (verb == "gpu_search") "use gpu_search(background = TRUE)" else
      "each fit is already in a process of its own",
    strategy = "each worker has its own device",
    backup = "each fit is short-lived in its worker, and workers are ended by the session",
    callbacks = "Python callbacks cannot be carried to the workers"
  )
  refused <- intersect(names, names(set_by_worker))
  if (length(refused)) {
    abort_bad_argument(
      c(sprintf("`%s` cannot be given to %s(): %s.", refused[1], verb, set_by_worker[[refused[1]]])),
      call = call
    )
  }
  if (identical(args$batch_size, "auto")) {
    abort_bad_argument(c(
      paste(
        sprintf("`batch_size = \"auto\"` cannot be given to %s():", verb),
        "it fits one fit to a GPU's free memory, and workers share GPUs."
      ),
      paste(
        "Give `batch_size` as a number;",
        "gpu_memory_plan(model, batch_size)$precisions gives the largest batch a device fits."
      )
    ), call = call)
  }
  python <- names[vapply(args, inherits, logical(1), "python.builtin.object")]
  if (length(python)) {
    not_carriable(
      sprintf("`%s` (a Python object)", python[1]),
      "Give it as R values (a schedule from lr_exponential() and friends), or make it inside model_fn.", call = call
    )
  }
  args
}

# R data (as read_training_data() read it) for workers: the encoding, the rows, the
# labels to stratify by, and the .npy files carry_data() writes in `dir`.
many_data <- function(data, dir, verb, call = caller_env()) {
  if (data$kind != "r") {
    abort_bad_data(c(
      sprintf("%s() needs the rows in memory, to split them: give R data, list(x = , y = ), not a dataset.", verb),
      "A gpu_dataset() of files cannot be split by rows; read the data into R first."
    ), call = call)
  }
  data$recorded <- fit_encoding(data, call = call) # once: carry_data() converts the data by it
  list(
    encoding = data$recorded, rows = training_rows(data), y = data$y, levels = data$recorded$y$levels,
    files = carry_data(data, dir, "data", call = call)
  )
}

# The seed of a fold or a trial, from the run's seed and its number (the core's rule,
# the same on every machine).
derived_seed <- function(seed, number) {
  as.integer(core_call("search_seed", seed = as.integer(seed), number = as.integer(number)))
}

# A seed for a run given none: chosen here (from the clock, leaving R's random numbers as
# they are) and recorded, so any fit can be repeated.
chosen_seed <- function(seed) seed %||% as.integer((as.numeric(Sys.time()) * 1000) %% .Machine$integer.max)
