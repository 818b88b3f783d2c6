# Other packages' reticulate load hooks, held back while gpukeras starts the
# runtime.
#
# reticulate runs the R hooks registered for a Python module (R hooks named
# "reticulate::<module>::load", set by reticulate::py_register_load_hook())
# right after that module is first imported, from Python too. keras3 registers
# one on `keras` that makes a tensor, and importing TensorFlow imports keras:
# the hook would start TensorFlow's devices in the middle of gpu_setup(),
# before memory growth, device choice or threads could be applied. So
# gpu_setup() holds the hooks back and runs them once its settings are in
# force, as reticulate would have: each once, an error in one a warning.
#
# When gpu_setup() fails, running the hooks would start TensorFlow, and a
# corrected gpu_setup() could no longer apply. They stay held until a
# gpu_setup() succeeds or a top-level R call that does not call gpu_setup()
# completes (an R task callback), whichever comes first: a retry still works
# (also as try(gpu_setup(...))), and the other package has its hooks run
# before the user's next other command.

load_hook_prefix <- "reticulate::"
load_hook_suffix <- "::load"

# The names of the load hooks registered now.
load_hook_names <- function() {
  # R keeps user hooks in one environment; reading it is the only way to list them.
  hooks <- get(".userHooksEnv", envir = baseenv())
  names <- ls(hooks, all.names = TRUE)
  names[startsWith(names, load_hook_prefix) & endsWith(names, load_hook_suffix)]
}

# Evaluate `code` with every registered load hook held back (and any still
# held from a failed call); on success run the hooks whose module is now
# loaded and register the others again, on failure keep holding them.
with_load_hooks_held <- function(code) {
  held <- merge_hooks(take_held_hooks(), lift_load_hooks())
  succeeded <- FALSE
  on.exit(if (succeeded) release_load_hooks(held) else keep_held(held), add = TRUE)
  value <- code
  succeeded <- TRUE
  value
}

lift_load_hooks <- function() {
  names <- load_hook_names()
  hooks <- lapply(names, getHook)
  names(hooks) <- names
  for (name in names) {
    setHook(name, NULL, action = "replace")
  }
  hooks
}

merge_hooks <- function(held, more) {
  for (name in names(more)) {
    held[[name]] <- c(held[[name]], more[[name]])
  }
  held
}

held_hooks_task <- "gpukeras: run held reticulate load hooks"

keep_held <- function(held) {
  the$held_hooks <- held
  if (length(held) && !held_hooks_task %in% getTaskCallbackNames()) {
    addTaskCallback(function(expr, ...) {
      if ("gpu_setup" %in% all.names(expr)) {
        return(TRUE) # wait for the retry or the next other call
      }
      release_load_hooks(take_held_hooks())
      FALSE # done: remove this callback
    }, name = held_hooks_task)
  }
}

take_held_hooks <- function() {
  held <- the$held_hooks %||% list()
  the$held_hooks <- NULL
  held
}

release_load_hooks <- function(held) {
  for (name in names(held)) {
    # Hooks registered while held (none in practice) run after the held ones.
    hooks <- c(held[[name]], getHook(name))
    module <- substr(name, nchar(load_hook_prefix) + 1L, nchar(name) - nchar(load_hook_suffix))
    if (!python_module_loaded(module)) {
      setHook(name, hooks, action = "replace")
      next
    }
    setHook(name, NULL, action = "replace")
    for (hook in hooks) {
      tryCatch(hook(), error = function(e) {
        gpukeras_warn(
          sprintf("A load hook for Python module '%s' failed: %s", module, conditionMessage(e)),
          "gpukeras_warning_load_hook"
        )
      })
    }
  }
}
