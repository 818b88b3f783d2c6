# Issue #76's goal "R's encoding code at most 150 lines", counted: the code lines of
# R/encoding*.R, and of the encoding functions elsewhere in R/ (by name, below: a name no
# longer defined counts nothing). A line counts when it holds a parse token that is not a
# comment (blank lines, comment lines and roxygen blocks do not).
# Usage (from the repository root): Rscript bench/encoding_lines.R [--smoke] [function names...]
# Prints each file's and function's count and the total; writes bench/results/encoding-lines.json
# (a smoke run: see bench/lib/common.R).
source("bench/lib/common.R")
mode <- bench_mode()
args <- grep("^--", commandArgs(trailingOnly = TRUE), value = TRUE, invert = TRUE)
funs <- if (length(args)) args else c(
  "gpu_as_numpy", "as_pipeline_data", "warn_empty_levels", "check_no_levels", "coded_columns",
  "check_pixel_range", "output_classes", "label_levels", "check_class_weight", "fold_split"
)
code_lines <- function(pd, from = 1L, to = .Machine$integer.max) {
  pd <- pd[pd$terminal & pd$token != "COMMENT" & pd$line1 >= from & pd$line2 <= to, ]
  length(unique(unlist(Map(seq, pd$line1, pd$line2))))
}
counts <- list()
for (file in list.files("R", "\\.R$", full.names = TRUE)) {
  pd <- utils::getParseData(parse(file, keep.source = TRUE), includeText = TRUE)
  if (startsWith(basename(file), "encoding")) {
    counts[[basename(file)]] <- code_lines(pd)
    next
  }
  top <- pd[pd$parent == 0 & pd$token == "expr", ]
  for (i in seq_len(nrow(top))) {
    children <- pd[pd$parent == top$id[i], ]
    symbol <- pd[pd$parent %in% children$id & pd$token == "SYMBOL", ]
    name <- if (nrow(symbol)) symbol$text[1] else ""
    if (name %in% funs && grepl("<-\\s*function", top$text[i])) {
      counts[[sprintf("%s (%s)", name, basename(file))]] <- code_lines(pd, top$line1[i], top$line2[i])
    }
  }
}
total <- sum(unlist(counts))
cat(sprintf("%-40s %4d\n", c(names(counts), "total"), c(unlist(counts), total)), sep = "")
write_result(
  list(
    command = bench_command("bench/encoding_lines.R", mode), code = code_state(), functions = funs,
    lines = counts, total = total, goal = 150L
  ),
  "encoding-lines", mode
)
