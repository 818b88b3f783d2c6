# The OpenAPI description of POST /predict, from the encoding: what plumber's
# documentation (/openapi.json, the docs page of plumber::pr_run()) shows a
# client. The body's schema names the model's columns with their JSON types
# (a factor's levels as an enum), as records or as columns; or rows of numbers
# for a model trained on a matrix or array. And what GET /metadata answers.

# `spec` (plumber's, for the whole router) with /predict's request body, its
# `type` query and its answers described at `path`.
predict_api_spec <- function(spec, path, settings) {
  post <- spec$paths[[path]]$post %||% list()
  post$parameters <- list(list(
    name = "type", `in` = "query", required = FALSE,
    description = "\"raw\": the model's outputs; \"class\": the classes (see predict()'s type).",
    schema = list(type = "string", enum = c("raw", "class"), default = "raw")
  ))
  body <- list(`application/json` = list(schema = request_schema(settings)))
  post$requestBody <- list(required = TRUE, content = body)
  post$responses <- list(
    `200` = list(
      description = "{\"predictions\": ...}, one entry per row (and \"warnings\": [...] where predict() warned)."
    ),
    `400` = list(description = "A body the model cannot score: {\"error\", \"message\"}, and the column or levels."),
    `401` = list(description = "A missing or wrong bearer token."),
    `413` = list(description = sprintf("More than %d rows, or %.0f bytes.", settings$max_rows, settings$max_bytes))
  )
  spec$paths[[path]]$post <- post
  spec
}

# The JSON schema of a request's body for the served input.
request_schema <- function(settings) {
  part <- settings$part
  max_rows <- settings$max_rows
  nullable <- !identical(settings$encoding$na %||% "error", "error")
  numbers <- list(type = "number")
  if (!identical(part$type, "data.frame")) {
    row <- list(type = "array", items = numbers)
    rows <- list(type = "array", items = row, minItems = 1L, maxItems = max_rows)
    if (is.null(part$names)) return(rows)
    columns <- stats::setNames(rep(list(numbers), length(part$names)), part$names)
  } else {
    columns <- lapply(part$columns, column_schema, nullable = nullable)
  }
  record <- list(type = "object", properties = columns, required = I(names(columns)))
  arrays <- lapply(columns, function(cell) list(type = "array", items = cell))
  by_column <- list(type = "object", properties = arrays, required = I(names(columns)))
  forms <- list(list(type = "array", items = record, minItems = 1L, maxItems = max_rows), by_column)
  if (!identical(part$type, "data.frame")) forms <- c(forms, list(rows))
  list(oneOf = forms)
}

# One column's cell as JSON: a number, true/false, or a string among the levels;
# null (NA) too where the NA rule takes it (`nullable`).
column_schema <- function(spec, nullable) {
  cell <- switch(spec$type,
    numeric = list(type = "number"),
    logical = list(type = "boolean"),
    list(type = "string", enum = I(spec$levels))
  )
  if (nullable) c(cell, list(nullable = TRUE)) else cell
}

# What GET /metadata answers: the input, the outputs, the rules and the versions.
serve_metadata <- function(fit, outputs, settings) {
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
      form = if (identical(part$type, "data.frame")) "records" else if (!is.null(part$names)) "records or rows" else
        "rows",
      columns = inputs, shape = if (is.null(part$names) && !is.null(part$shape)) I(part$shape)
    )),
    outputs = lapply(outputs, function(output) list(name = output$name, shape = I(output$shape))),
    classes = if (!is.null(fit$encoding$y$levels)) I(fit$encoding$y$levels),
    na = settings$encoding$na %||% "error",
    unknown_levels = settings$unknown,
    max_rows = settings$max_rows,
    max_bytes = settings$max_bytes,
    token_required = !is.null(settings$token),
    versions = list(
      gpukeras = as.character(utils::packageVersion("gpukeras")),
      R = paste(R.version$major, R.version$minor, sep = "."), plumber = as.character(utils::packageVersion("plumber")),
      python = as.character(reticulate::py_config()$version), keras = as.character(keras$version()),
      backend = as.character(keras$backend$backend())
    )
  )
}

# The shape of the rows a model's (one) input takes, for a model served without an
# encoding; NULL where it has several inputs or a size is not fixed.
served_row_shape <- function(inputs) {
  dims <- if (length(inputs) == 1L) inputs[[1]]$shape[-1] else NA
  if (length(dims) && !anyNA(dims)) dims
}
