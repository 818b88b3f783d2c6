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

load_hook_prefix <- "reticulate::"
load_hook_suffix <- "::load"

# The names of the load hooks registered now.
load_hook_names <- function() {
  # R keeps user hooks in one environment; reading it is the only way to list them.
  hooks <- get(".userHooksEnv", envir = baseenv())
  names <- ls(hooks, all.names = TRUE)
  names[startsWith(names, load_hook_prefix) & endsWith(names, load_hook_suffix)]
}

# Evaluate `code` with every registered load hook held back; afterwards run the
# hooks whose module is now loaded and register the others again.
with_load_hooks_held <- function(code) {
  names <- load_hook_names()
  held <- lapply(names, getHook)
  names(held) <- names
  for (name in names(held)) {
    setHook(name, NULL, action = "replace")
  }
  on.exit(release_load_hooks(held), add = TRUE)
  code
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
        warning(sprintf("A load hook for Python module '%s' failed: %s", module, conditionMessage(e)), call. = FALSE)
      })
    }
  }
}

# Whether Python has imported `module`; never starts Python.
python_module_loaded <- function(module) {
  if (!reticulate::py_available(initialize = FALSE)) {
    return(FALSE)
  }
  modules <- reticulate::import("sys", convert = FALSE)$modules
  reticulate::py_to_r(modules$`__contains__`(module))
}
