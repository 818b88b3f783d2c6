.onLoad <- function(libname, pkgname) {
  # Declares gpukeras' Python needs where reticulate manages environments;
  # never starts Python (GPU settings must come first).
  declare_python_requirements()
  # keras3's evaluate() masks gpukeras' when attached after it: its generic
  # must find gpukeras' methods too (see ?evaluate.gpukeras_fit).
  register_on_load("keras3", "evaluate", "gpukeras_fit", evaluate.gpukeras_fit)
  register_on_load("keras3", "evaluate", "gpukeras_model", evaluate.gpukeras_model)
}

# Register `method` for `generic` of package `package` now if it is loaded,
# and whenever it is loaded later.
register_on_load <- function(package, generic, class, method) {
  register <- function(...) {
    namespace <- asNamespace(package)
    if (exists(generic, envir = namespace, inherits = FALSE)) {
      registerS3method(generic, class, method, envir = namespace)
    }
  }
  if (isNamespaceLoaded(package)) register()
  setHook(packageEvent(package, "onLoad"), register)
}
