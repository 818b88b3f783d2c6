.onLoad <- function(libname, pkgname) {
  # Declares gpukeras' Python needs where reticulate manages environments, as
  # reticulate loads (it must before any Python starts); never starts Python
  # (GPU settings must come first). library(gpukeras) alone loads neither
  # reticulate nor the Matrix it loads, which an R process that needs no
  # Python would pay for at start.
  when_loaded("reticulate", declare_python_requirements)
  # keras3's evaluate() masks gpukeras' when attached after it: its generic
  # must find gpukeras' methods too (see ?evaluate.gpukeras_fit).
  register_on_load("keras3", "evaluate", "gpukeras_fit", evaluate.gpukeras_fit)
  register_on_load("keras3", "evaluate", "gpukeras_model", evaluate.gpukeras_model)
}

# Run `fn()` now if `package` is loaded, and whenever it is loaded later.
when_loaded <- function(package, fn) {
  if (isNamespaceLoaded(package)) fn()
  setHook(packageEvent(package, "onLoad"), function(...) fn())
}

# Register `method` for `generic` of package `package` now if it is loaded,
# and whenever it is loaded later.
register_on_load <- function(package, generic, class, method) {
  when_loaded(package, function() {
    namespace <- asNamespace(package)
    if (exists(generic, envir = namespace, inherits = FALSE)) {
      registerS3method(generic, class, method, envir = namespace)
    }
  })
}
