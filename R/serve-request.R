# gpu_serve()'s requests and answers: JSON into the data predict() takes,
# encoded as the training data's encoding says, and predict()'s results, the
# service's metadata and its refusals back into JSON.

# A refusal of a request: the condition serve_predict() turns into its answer,
# a JSON body list(error = <code>, message = , <details>) with `status`. A base
# condition: it never reaches a user, and rlang's backtrace would cost 1.7 ms of
# every refusal (the service answers one request at a time).
serve_reject <- function(status, code, message, ...) {
  stop(errorCondition(
    message, class = "gpukeras_serve_reject", status = as.integer(status), problem = serve_problem(code, message, ...)
  ))
}

serve_problem <- function(code, message, ...) Filter(Negate(is.null), list(error = code, message = message, ...))

as_json <- function(value) {
  as.character(jsonlite::toJSON(value, auto_unbox = TRUE, null = "null", na = "null", digits = NA))
}

# A condition message as one line of plain text (no colours, no bullets).
one_line <- function(message) {
  lines <- strsplit(cli::ansi_strip(message), "\n", fixed = TRUE)[[1]]
  lines <- sub("^[^[:alnum:][:punct:]]+ ", "", trimws(lines))
  paste(lines[nzchar(lines)], collapse = " ")
}

# The input a model is served with: its one input's spec from the encoding, or
# rows of numbers when no encoding was recorded.
served_input <- function(encoding, call) {
  if (isTRUE(encoding$several) || length(encoding$inputs) > 1L) {
    abort_bad_argument(c(
      sprintf(
        "gpu_serve() serves a model with one input; this one has %d (%s).", length(encoding$inputs),
        paste(names(encoding$inputs), collapse = ", ")
      ),
      "Score it with predict(fit, list(...)) in R, or build the service with plumber around predict()."
    ), call = call)
  }
  if (is.null(encoding)) list(type = "array", shape = NULL, names = NULL) else encoding$inputs[[1]]
}

# The most bytes a request's body may have by default: `max_rows` rows of the
# input as JSON records (a number 24 characters at most, a level each character
# escaped as \uXXXX, each name quoted), twice over for spaces and ignored
# fields, and at least 64 KiB.
request_byte_limit <- function(part, max_rows) {
  named <- function(names, values) sum(nchar(names, type = "bytes") + 4) + sum(values)
  row <- if (identical(part$type, "data.frame")) {
    named(names(part$columns), vapply(part$columns, function(spec) {
      if (identical(spec$type, "factor")) 6 * max(nchar(spec$levels, type = "bytes"), 1L) + 2 else 24
    }, numeric(1)))
  } else {
    named(part$names %||% character(), 25 * prod(part$shape))
  }
  max(64 * 1024, 2 * max_rows * (row + 2))
}

# The request's body parsed as JSON with nothing simplified (arrays as unnamed
# lists, objects as named ones; parsing makes no table, whatever the keys):
# list(text, value). Records that cannot hold the input's columns are refused
# before they are parsed, or even made text.
parse_request_body <- function(raw, part) {
  if (!length(raw)) {
    serve_reject(
      400L, "bad_body", sprintf("The request has no body: send JSON records, e.g. %s.", example_request(part))
    )
  }
  check_named_in_body(raw, served_columns(part))
  malformed <- function(e) {
    serve_reject(
      400L, "malformed_json",
      sprintf("The body is not valid JSON: %s", client_text(one_line(conditionMessage(e)), 200L))
    )
  }
  text <- tryCatch(rawToChar(raw), error = malformed)
  Encoding(text) <- "UTF-8"
  list(text = text, value = tryCatch(jsonlite::parse_json(text, simplifyVector = FALSE), error = malformed))
}

# Records or columns (the body begins with `[{` or `{`) in which the first
# column's name is nowhere, as a JSON string, lack that column: the answer a
# parse would give, for searches of the bytes (grepRaw(): 0.09 ms each in 95 KB,
# a third of grepl()'s time on the text; then every column's name is searched
# for, to name all those absent). A body of 8,000 records each with a key of its
# own is refused so in about 1 ms, in 11 ms through the parse. Only valid UTF-8
# without a backslash: with no escape, a key is written as it is (jsonlite
# refuses invalid text, as "malformed_json").
check_named_in_body <- function(raw, columns) {
  named <- function(column) length(grepRaw(charToRaw(enc2utf8(sprintf("\"%s\"", column))), raw, fixed = TRUE)) > 0L
  # text for validUTF8() and grepl(), NULL for bytes that cannot be (a NUL)
  as_text <- function(bytes) tryCatch(rawToChar(bytes), error = function(e) NULL)
  if (is.null(columns) || named(columns[1]) ||
      !isTRUE(grepl("^\\s*(\\[\\s*)?\\{", as_text(utils::head(raw, 64L)), useBytes = TRUE))) {
    return(invisible())
  }
  if (length(grepRaw("\\", raw, fixed = TRUE)) || !isTRUE(validUTF8(as_text(raw)))) return(invisible())
  check_present(columns[vapply(columns, named, logical(1))], columns)
}

# The request's data in the form predict() takes for the served input: a
# data.frame with the training columns (numbers, logicals, strings for
# factors), or a numeric matrix or array of rows. Its rows are counted before
# anything is built, and only the model's columns are taken.
request_data <- function(body, settings) {
  part <- settings$part
  if (is.list(body$value) && !length(body$value)) check_row_count(0L, settings$max_rows)
  form <- body_form(body$value)
  columns <- served_columns(part)
  if (form %in% c("records", "columns") && !is.null(columns)) {
    values <- named_values(body$value, form, columns, settings$max_rows)
    if (identical(part$type, "data.frame")) return(request_columns(values, part, settings))
    # predict() refuses what a matrix of numbers holds (prediction_refused()), not what it cannot
    for (column in columns) {
      if (!is.numeric(values[[column]]) && !is.logical(values[[column]])) {
        abort_wrong_type(column, typeof(values[[column]]), "numbers")
      }
    }
    return(matrix(as.double(unlist(values, use.names = FALSE)), ncol = length(columns), dimnames = list(NULL, columns)))
  }
  if (identical(form, "rows") && !identical(part$type, "data.frame")) return(request_rows(body, part, settings))
  serve_reject(400L, "bad_body", switch(form,
    rows = sprintf("This model takes named columns: send records, e.g. [{%s}].", example_record(part)),
    records = ,
    columns = "This model takes rows of numbers: send them as arrays, e.g. [[5.1, 3.5], [4.9, 3.0]].",
    paste0(
      "The body must be JSON records [{\"column\": value, ...}, ...], columns {\"column\": [values], ...}, or rows of ",
      "numbers [[...], ...]."
    )
  ))
}

# Which of the forms the body's JSON has: "records" (an array of objects),
# "columns" (one object: columns of values, or one record), "rows" (an array
# of arrays), or "other". The first item tells records from rows (a record
# that is an array has no keys; a row that is an object, the wrong width).
body_form <- function(value) {
  if (!is.list(value)) return("other")
  if (!is.null(names(value))) return("columns")
  if (!all(vapply(value, is.list, logical(1)))) return("other")
  if (is.null(names(value[[1]]))) "rows" else "records"
}

# The rows of the body counted: none, or more than max_rows, are refused.
check_row_count <- function(rows, max_rows) {
  if (rows == 0L) serve_reject(400L, "no_rows", "The body holds no rows.")
  if (rows > max_rows) {
    serve_reject(
      413L,
      "too_many_rows",
      sprintf(
        "The body has %d rows; this service takes at most %d per request (max_rows): send them in parts.", rows,
        max_rows
      )
    )
  }
}

# The model's `columns` from records or columns, each a vector (null as NA; a
# column absent from a record is NA in its row), as a data.frame. The rows are
# counted first; other keys are never read.
named_values <- function(value, form, columns, max_rows) {
  if (identical(form, "records")) {
    check_row_count(length(value), max_rows)
    keys <- lapply(value, names)
    all_keys <- unlist(keys, use.names = FALSE)
    check_present(unique(all_keys), columns)
    return(as_frame(Map(json_vector, stats::setNames(record_cells(value, keys, all_keys, columns), columns), columns)))
  }
  check_present(names(value), columns)
  cells <- lapply(value[columns], function(cells) if (is.list(cells) && is.null(names(cells))) cells else list(cells))
  lengths <- lengths(cells)
  if (length(unique(lengths)) != 1L) {
    serve_reject(
      400L,
      "bad_body",
      sprintf(
        "The columns have different lengths (%s): each must have one value per row.",
        paste(sprintf("%s %d", columns, lengths), collapse = ", ")
      )
    )
  }
  check_row_count(lengths[[1]], max_rows)
  as_frame(Map(json_vector, cells, columns))
}

# Each column's cells across the records (NULL where a record lacks it). When
# every record has the same keys in the same order, as writers make them, cut
# from all the records' values at once (a tenth of the time of looking each
# record up).
record_cells <- function(records, keys, all_keys, columns) {
  first <- keys[[1]]
  if (identical(all_keys, rep(first, length(records))) &&
      identical(lengths(keys), rep(length(first), length(records)))) {
    cells <- unlist(records, recursive = FALSE, use.names = FALSE)
    return(lapply(
      match(columns, first), function(at) cells[seq.int(at, by = length(first), length.out = length(records))]
    ))
  }
  lapply(columns, function(column) lapply(records, .subset2, column))
}

as_frame <- function(columns) structure(columns, class = "data.frame", row.names = .set_row_names(length(columns[[1]])))

# JSON values (parse_json()'s: a scalar, NULL, or a list for an array or an
# object) as one vector, null as NA; a nested value is refused.
json_vector <- function(cells, column) {
  empty <- lengths(cells) == 0L
  nested <- any(vapply(cells[empty], is.list, logical(1)))
  cells[empty] <- list(NA)
  values <- unlist(cells, recursive = FALSE, use.names = FALSE)
  if (nested || is.list(values)) {
    serve_reject(
      400L, "wrong_type", sprintf("Column `%s` must hold single values, not nested arrays or objects.", column),
      column = column
    )
  }
  values
}

# Rows of numbers as a numeric array: counted, then simplified by jsonlite (a
# matrix, or an array for rows of more dimensions) and checked against the
# shape the model takes.
request_rows <- function(body, part, settings) {
  check_row_count(length(body$value), settings$max_rows)
  shape <- part$shape
  if (length(shape) == 1L) {
    widths <- lengths(body$value)
    if (any(widths != shape)) {
      first <- which(widths != shape)[1]
      serve_reject(400L, "bad_data", sprintf(
        "Each row must hold %d numbers%s; row %d holds %d.", shape,
        if (!is.null(part$names)) sprintf(" (%s)", paste(part$names, collapse = ", ")) else "", first, widths[first]
      ))
    }
  }
  rows <- jsonlite::fromJSON(body$text, simplifyVector = TRUE, simplifyDataFrame = FALSE)
  if (!is.numeric(rows) && !is.logical(rows)) {
    serve_reject(400L, "wrong_type", "Rows must hold numbers only, each row of the same shape.")
  }
  if (!is.null(shape) && !identical(as.integer(dim(rows)[-1]), as.integer(shape))) {
    serve_reject(400L, "bad_data", sprintf(
      "Each row must have shape (%s); these have (%s).", paste(shape, collapse = ", "),
      paste(dim(rows)[-1], collapse = ", ")
    ))
  }
  storage.mode(rows) <- "double"
  # jsonlite reads the string "NaN" as NaN, which predict() would take for NA (a null)
  nan <- is.nan(rows)
  if (any(nan)) {
    bad <- which(rowSums(matrix(nan, nrow = dim(nan)[1])) > 0)
    columns <- if (length(dim(nan)) == 2L) part$names[colSums(nan) > 0] %||% as.character(which(colSums(nan) > 0))
    abort_bad_numbers(columns, utils::head(bad, 100), length(bad))
  }
  if (!is.null(part$names)) colnames(rows) <- part$names
  rows
}

# Numbers the model cannot take (Inf, NaN, or beyond float32's range: they
# become infinite in the float32 copy it reads) in `columns` (none: "The rows"),
# the first of `rows`, `n_rows` in all: a 400 naming the columns.
abort_bad_numbers <- function(columns, rows, n_rows) {
  where <- if (!length(columns)) "The rows" else sprintf("Column %s", paste0("`", columns, "`", collapse = ", "))
  serve_reject(
    400L, "bad_data",
    sprintf(paste0(
      "%s has Inf, NaN or numbers beyond float32's range (about 3.4e+38) in %d row(s) (first: %d): the model cannot ",
      "take them; send finite numbers within it."
    ), where, n_rows, rows[1]),
    column = if (length(columns)) columns[1], rows = I(rows)
  )
}

# A data.frame input's columns as JSON gives them, typed where JSON cannot say:
# a column of nulls, numbers for a factor's levels. Wrong types, numbers the
# model cannot take, levels training did not have and NA where the NA rule is
# "error" are predict()'s to refuse (prediction_refused()).
request_columns <- function(body, part, settings) {
  for (column in names(part$columns)) {
    factor <- identical(part$columns[[column]]$type, "factor")
    values <- body[[column]]
    if (all(is.na(values))) values <- as.vector(values, mode = if (factor) "character" else "double")
    if (factor && is.numeric(values)) values <- as.character(values)
    body[[column]] <- values
  }
  body
}

# The served input's column names (a data.frame's, or those of rows of numbers),
# and where predict()'s names for them (x$column) are among them.
served_columns <- function(part) if (identical(part$type, "data.frame")) names(part$columns) else part$names

served_column_at <- function(column, part) match(column, paste0("x$", served_columns(part)))

# NA in `columns` (none: rows of numbers without names) where the NA rule is
# "error", from predict()'s error: the first of `rows`, `n_rows` in all.
abort_missing_value <- function(columns, rows, n_rows) {
  where <- if (!length(columns)) {
    "The data is"
  } else if (length(columns) == 1L) {
    sprintf("Column `%s` is", columns)
  } else {
    sprintf("Columns %s are", paste0("`", columns, "`", collapse = ", "))
  }
  serve_reject(
    400L, "missing_value",
    sprintf("%s null (NA) in %d row(s) (first: %d); the model was trained without NA.", where, n_rows, rows[1]),
    column = if (length(columns)) columns[1], rows = I(rows)
  )
}

# Levels of `column` training did not have: a few of them echoed, each cut short.
abort_unseen_levels <- function(column, unseen, known = NULL) {
  shown <- client_text(utils::head(unseen, 5))
  serve_reject(
    400L, "unseen_level",
    sprintf(
      "Column `%s` has level(s) the model was not trained on: %s%s.%s", column,
      paste0("\"", shown, "\"", collapse = ", "),
      if (length(unseen) > 5L) sprintf(" and %d more", length(unseen) - 5L) else "",
      if (!is.null(known)) sprintf(" It knows %s.", paste0("\"", utils::head(known, 20), "\"", collapse = ", ")) else ""
    ),
    column = column, levels = I(shown)
  )
}

# Text a client sent, as an answer may echo it: valid UTF-8 (other bytes as
# "?"), no control characters, at most `width` characters.
client_text <- function(text, width = 40L) {
  text <- iconv(as.character(text), "UTF-8", "UTF-8", sub = "?")
  text <- gsub("[[:cntrl:]]", "?", text)
  long <- nchar(text) > width
  text[long] <- paste0(substr(text[long], 1L, width - 3L), "...")
  text
}

check_present <- function(present, columns) {
  absent <- setdiff(columns, present)
  if (length(absent)) {
    serve_reject(
      400L, "missing_column",
      sprintf(
        "The request lacks column(s) the model was trained on: %s. Every row needs %s.", paste(absent, collapse = ", "),
        paste(columns, collapse = ", ")
      ),
      columns = I(absent)
    )
  }
}

# `column` holds values of `type` (their typeof()) where it wants `wanted`.
abort_wrong_type <- function(column, type, wanted) {
  given <- switch(type, character = "strings", logical = "true/false", double = , integer = "numbers", "nested values")
  serve_reject(400L, "wrong_type", sprintf("Column `%s` must hold %s, not %s.", column, wanted, given), column = column)
}

wanted_values <- function(spec) switch(spec$type, numeric = "numbers", logical = "true or false", "strings")

example_record <- function(part) {
  values <- vapply(part$columns, function(spec) {
    switch(spec$type, numeric = "1.5", logical = "true", sprintf("\"%s\"", spec$levels[1]))
  }, character(1))
  paste(sprintf("\"%s\": %s", names(values), values), collapse = ", ")
}

# predict()'s result as the JSON answer {"predictions": ...}, with "warnings": [...] where
# predict() warned.
predictions_json <- function(predicted, warnings = character()) {
  said <- if (length(warnings)) sprintf(",\"warnings\":%s", jsonlite::toJSON(warnings)) else ""
  sprintf("{\"predictions\":%s%s}", output_json(predicted), said)
}

output_json <- function(output) {
  to_json <- function(value, ...) as.character(jsonlite::toJSON(value, digits = NA, na = "null", rownames = FALSE, ...))
  if (is.factor(output)) return(to_json(as.character(output)))
  if (is.list(output)) {
    parts <- vapply(output, output_json, character(1))
    if (is.null(names(output))) return(sprintf("[%s]", paste(parts, collapse = ",")))
    return(sprintf(
      "{%s}",
      paste(sprintf("%s:%s", vapply(names(output), to_json, character(1), auto_unbox = TRUE), parts), collapse = ",")
    ))
  }
  if (is.null(dim(output))) return(to_json(unname(output)))
  if (length(dim(output)) == 2L && !is.null(colnames(output))) {
    return(to_json(as.data.frame(output, optional = TRUE), dataframe = "rows"))
  }
  if (length(dim(output)) == 2L && ncol(output) == 1L) return(to_json(unname(output[, 1])))
  to_json(unname(output), matrix = "rowmajor")
}
