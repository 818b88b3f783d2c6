# gpu_serve()'s requests and answers: JSON into the data predict() takes,
# encoded as the training data's encoding says, and predict()'s results, the
# service's metadata and its refusals back into JSON.

# A refusal of a request: the condition serve_predict() turns into its answer,
# a JSON body list(error = <code>, message = , <details>) with `status`.
serve_reject <- function(status, code, message, ...) {
  rlang::abort(message, class = "gpukeras_serve_reject", status = as.integer(status), problem = serve_problem(code, message, ...))
}

serve_problem <- function(code, message, ...) {
  list(error = code, message = message, ...)
}

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
    gpukeras_abort(
      c(
        sprintf("gpu_serve() serves a model with one input; this one has %d (%s).", length(encoding$inputs), paste(names(encoding$inputs), collapse = ", ")),
        "Score it with predict(fit, list(...)) in R, or build the service with plumber around predict()."
      ),
      "gpukeras_error_bad_argument",
      call = call
    )
  }
  if (is.null(encoding)) list(type = "array", shape = NULL, names = NULL) else encoding$inputs[[1]]
}

# The request's body as jsonlite reads it (records as a data.frame, columns as
# a named list, rows as a matrix).
parse_request_body <- function(raw) {
  if (!length(raw)) {
    serve_reject(400L, "bad_body", "The request has no body: send JSON records, e.g. [{\"income\": 52000, \"region\": \"west\"}].")
  }
  text <- rawToChar(raw)
  Encoding(text) <- "UTF-8"
  tryCatch(
    jsonlite::fromJSON(text, simplifyVector = TRUE),
    error = function(e) serve_reject(400L, "malformed_json", sprintf("The body is not valid JSON: %s", one_line(conditionMessage(e))))
  )
}

# The request's data in the form predict() takes for the served input: a
# data.frame with the training columns (numbers, logicals, strings for
# factors), or a numeric matrix or array of rows.
request_data <- function(body, settings) {
  part <- settings$part
  body <- as_rows(body)
  rows <- if (is.data.frame(body)) nrow(body) else if (is.null(dim(body))) 0L else dim(body)[1]
  if (rows == 0L) {
    serve_reject(400L, "no_rows", "The body holds no rows.")
  }
  if (rows > settings$max_rows) {
    serve_reject(413L, "too_many_rows", sprintf("The body has %d rows; this service takes at most %d per request (max_rows): send them in parts.", rows, settings$max_rows))
  }
  if (identical(part$type, "data.frame")) {
    if (!is.data.frame(body)) {
      serve_reject(400L, "bad_body", sprintf("This model takes named columns: send records, e.g. [{%s}].", example_record(part)))
    }
    return(request_columns(body, part, settings))
  }
  if (is.data.frame(body)) {
    if (is.null(part$names)) {
      serve_reject(400L, "bad_body", "This model takes rows of numbers: send them as arrays, e.g. [[5.1, 3.5], [4.9, 3.0]].")
    }
    check_present(body, part$names)
    body <- body[part$names]
    for (column in part$names) {
      if (!is.numeric(body[[column]]) && !is.logical(body[[column]])) abort_wrong_type(column, body[[column]], "numbers")
    }
    body <- as.matrix(body)
    storage.mode(body) <- "double"
    return(body)
  }
  if (!is.numeric(body) && !is.logical(body)) {
    serve_reject(400L, "wrong_type", "Rows must hold numbers only.")
  }
  if (!is.null(part$names) && length(dim(body)) == 2L && ncol(body) == length(part$names)) colnames(body) <- part$names
  storage.mode(body) <- "double"
  body
}

# Records (a data.frame), columns (a named list of equally long vectors, or of
# single values for one record) as a data.frame; rows (a matrix or array) as
# they are. Anything else is refused.
as_rows <- function(body) {
  form <- "The body must be JSON records [{\"column\": value, ...}, ...], columns {\"column\": [values], ...}, or rows of numbers [[...], ...]."
  if (is.data.frame(body) || (!is.null(dim(body)) && is.atomic(body))) {
    return(body)
  }
  if (is.list(body) && !length(body)) {
    return(data.frame())
  }
  named <- rlang::names2(body)
  if (!is.list(body) || !all(nzchar(named))) {
    serve_reject(400L, "bad_body", form)
  }
  body <- lapply(body, function(values) if (is.null(values)) NA else values)
  flat <- vapply(body, function(values) is.atomic(values) && is.null(dim(values)), logical(1))
  if (!all(flat)) {
    serve_reject(400L, "wrong_type", sprintf("Column `%s` must be an array of values, not nested arrays or objects.", named[!flat][1]), column = named[!flat][1])
  }
  lengths <- lengths(body)
  if (length(unique(lengths)) != 1L) {
    serve_reject(400L, "bad_body", sprintf("The columns have different lengths (%s): each must have one value per row.", paste(sprintf("%s %d", named, lengths), collapse = ", ")))
  }
  data.frame(body, check.names = FALSE, stringsAsFactors = FALSE)
}

# A data.frame input's columns, checked and typed as the encoding says.
request_columns <- function(body, part, settings) {
  columns <- names(part$columns)
  check_present(body, columns)
  body <- body[columns]
  for (column in columns) {
    spec <- part$columns[[column]]
    values <- body[[column]]
    if (is.list(values) || !is.null(dim(values))) abort_wrong_type(column, values, wanted_values(spec))
    if (all(is.na(values))) values <- as.vector(values, mode = if (identical(spec$type, "factor")) "character" else "double")
    if (identical(spec$type, "numeric") && !is.numeric(values)) abort_wrong_type(column, values, "numbers")
    if (identical(spec$type, "logical") && !is.logical(values) && !is.numeric(values)) abort_wrong_type(column, values, "true or false")
    if (identical(spec$type, "factor")) {
      if (!is.character(values) && !is.numeric(values)) abort_wrong_type(column, values, "strings")
      values <- as.character(values)
      unseen <- setdiff(values[!is.na(values)], spec$levels)
      if (length(unseen) && identical(settings$unknown, "error")) {
        serve_reject(
          400L, "unseen_level",
          sprintf(
            "Column `%s` has level(s) the model was not trained on: %s. It knows %s.", column,
            paste0("\"", utils::head(unseen, 10), "\"", collapse = ", "), paste0("\"", utils::head(spec$levels, 20), "\"", collapse = ", ")
          ),
          column = column, levels = I(unseen)
        )
      }
    }
    body[[column]] <- values
    missing <- which(is.na(values))
    if (length(missing) && identical(settings$encoding$na %||% "error", "error")) {
      serve_reject(
        400L, "missing_value",
        sprintf("Column `%s` is null (NA) in %d row(s) (first: %d); the model was trained without NA.", column, length(missing), missing[1]),
        column = column, rows = I(utils::head(missing, 100))
      )
    }
  }
  body
}

check_present <- function(body, columns) {
  absent <- setdiff(columns, names(body))
  if (length(absent)) {
    serve_reject(
      400L, "missing_column",
      sprintf("The request lacks column(s) the model was trained on: %s. Every row needs %s.", paste(absent, collapse = ", "), paste(columns, collapse = ", ")),
      columns = I(absent)
    )
  }
}

abort_wrong_type <- function(column, values, wanted) {
  given <- if (is.character(values)) "strings" else if (is.logical(values)) "true/false" else if (is.numeric(values)) "numbers" else "nested values"
  serve_reject(400L, "wrong_type", sprintf("Column `%s` must hold %s, not %s.", column, wanted, given), column = column)
}

wanted_values <- function(spec) {
  switch(spec$type, numeric = "numbers", logical = "true or false", "strings")
}

example_record <- function(part) {
  values <- vapply(part$columns, function(spec) {
    switch(spec$type, numeric = "1.5", logical = "true", sprintf("\"%s\"", spec$levels[1]))
  }, character(1))
  paste(sprintf("\"%s\": %s", names(values), values), collapse = ", ")
}

# predict()'s result as the JSON answer {"predictions": ...}.
predictions_json <- function(predicted) {
  sprintf("{\"predictions\":%s}", output_json(predicted))
}

output_json <- function(output) {
  to_json <- function(value, ...) as.character(jsonlite::toJSON(value, digits = NA, na = "null", rownames = FALSE, ...))
  if (is.factor(output)) {
    return(to_json(as.character(output)))
  }
  if (is.list(output)) {
    parts <- vapply(output, output_json, character(1))
    if (is.null(names(output))) {
      return(sprintf("[%s]", paste(parts, collapse = ",")))
    }
    return(sprintf("{%s}", paste(sprintf("%s:%s", vapply(names(output), to_json, character(1), auto_unbox = TRUE), parts), collapse = ",")))
  }
  if (is.null(dim(output))) {
    return(to_json(unname(output)))
  }
  if (length(dim(output)) == 2L && !is.null(colnames(output))) {
    return(to_json(as.data.frame(output, optional = TRUE), dataframe = "rows"))
  }
  if (length(dim(output)) == 2L && ncol(output) == 1L) {
    return(to_json(unname(output[, 1])))
  }
  to_json(unname(output), matrix = "rowmajor")
}

# What GET /metadata answers: the input, the outputs, the rules and the versions.
serve_metadata <- function(fit, model, settings) {
  part <- settings$part
  inputs <- if (identical(part$type, "data.frame")) {
    unname(Map(function(spec, name) {
      c(list(name = name, type = spec$type), if (identical(spec$type, "factor")) list(levels = I(spec$levels)))
    }, part$columns, names(part$columns)))
  } else if (!is.null(part$names)) {
    lapply(part$names, function(name) list(name = name, type = "numeric"))
  }
  keras <- gpu_keras()
  list(
    input = Filter(Negate(is.null), list(
      form = if (identical(part$type, "data.frame")) "records" else if (!is.null(part$names)) "records or rows" else "rows",
      columns = inputs, shape = if (is.null(part$names) && !is.null(part$shape)) I(part$shape)
    )),
    outputs = model_output_shapes(model),
    classes = if (!is.null(fit$encoding$y$levels)) I(fit$encoding$y$levels),
    na = settings$encoding$na %||% "error",
    unknown_levels = settings$unknown,
    max_rows = settings$max_rows,
    token_required = !is.null(settings$token),
    versions = list(
      gpukeras = as.character(utils::packageVersion("gpukeras")),
      R = paste(R.version$major, R.version$minor, sep = "."),
      plumber = as.character(utils::packageVersion("plumber")),
      python = reticulate::py_config()$version,
      keras = as.character(keras$version()),
      backend = as.character(keras$backend$backend())
    )
  )
}

# Each output of the model: its name and shape (null for the rows, and for any
# size not fixed).
model_output_shapes <- function(model) {
  as_r <- function(value) if (inherits(value, "python.builtin.object")) reticulate::py_to_r(value) else value
  tryCatch(
    lapply(as_r(model$outputs), function(tensor) {
      shape <- lapply(as_r(tensor$shape), function(size) if (is.null(size)) NA_integer_ else as.integer(size))
      list(name = as.character(as_r(tensor$name)), shape = I(unlist(shape)))
    }),
    error = function(e) list()
  )
}
