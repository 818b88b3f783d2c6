.onLoad <- function(libname, pkgname) {
  # Declares gpukeras' Python needs where reticulate manages environments;
  # never starts Python (GPU settings must come first).
  declare_python_requirements()
}
