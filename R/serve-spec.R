# The OpenAPI description of POST /predict, from the encoding: what plumber's
# documentation (/openapi.json, the docs page of plumber::pr_run()) shows a
# client. The body's schema names the model's columns with their JSON types
# (a factor's levels as an enum), as records or as columns; or rows of numbers
# for a model trained on a matrix or array.

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
    `200` = list(description = "{\"predictions\": ...}, one entry per row."),
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
    if (is.null(part$names)) {
      return(rows)
    }
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
