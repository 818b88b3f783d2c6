# print() of a class whose format() says it all: its lines. Every such class's print method
# is this function (`print.gpukeras_fit <- print_formatted`), assigned as R loads the files
# in name order: so it lives in the file that comes first.
print_formatted <- function(x, ...) {
  writeLines(format(x, ...))
  invisible(x)
}
