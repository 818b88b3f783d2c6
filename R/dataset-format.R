# How a gpu_dataset() prints: the lines the core writes (data/pipeline_facts.py
# dataset_lines) of its facts, with its columns from its encoding.

#' @export
format.gpukeras_dataset <- function(x, ...) {
  info <- attr(x, "gpukeras")
  as.character(core_call(
    "dataset_lines",
    info = info[names(info) != "encoding"], input_lines = encoding_columns_lines(info$encoding, "  input:   ")
  ))
}

#' @export
print.gpukeras_dataset <- print_formatted
