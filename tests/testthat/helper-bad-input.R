# The bad-input sweep (issue #7), shared by the test-bad-input-*.R files: each
# holds tables of calls that must fail with a classed gpukeras_error whose
# message says what to do, never with a crash, an unclassed error or a raw
# Python traceback.

# A table of bad calls, written row by row as tibble::tribble() reads:
#   bad_inputs(
#     ~name,          ~code,                       ~class,         ~message,
#     "epochs zero",  gpu_fit(m, d, epochs = 0),   "bad_argument", "`epochs` must be",
#   )
# `code` is kept unevaluated; `class` is the condition's first class without
# its "gpukeras_error_" prefix; `message` a regular expression its message
# must match (one that names the argument or the fix).
bad_inputs <- function(...) {
  cells <- as.list(substitute(list(...)))[-1]
  is_header <- vapply(cells, function(cell) is.call(cell) && identical(cell[[1]], as.name("~")), logical(1))
  columns <- vapply(cells[is_header], function(cell) as.character(cell[[2]]), character(1))
  stopifnot(identical(columns, c("name", "code", "class", "message")), length(cells[!is_header]) %% 4 == 0)
  values <- matrix(cells[!is_header], ncol = 4, byrow = TRUE)
  cases <- lapply(seq_len(nrow(values)), function(i) {
    list(name = values[[i, 1]], code = values[[i, 2]], class = values[[i, 3]], message = values[[i, 4]])
  })
  names <- vapply(cases, `[[`, character(1), "name")
  stopifnot(!anyDuplicated(names))
  cases
}

# An error as plain data: list(class =, message =, python_traceback =), as
# run_in_fresh_r()'s catch_error() returns it; NULL for no error.
error_data <- function(error) {
  if (is.null(error)) {
    return(NULL)
  }
  list(class = class(error), message = conditionMessage(error), python_traceback = error$python_traceback)
}

# The assertions every case makes about the error `error` (error_data()).
expect_bad_input <- function(error, case) {
  call <- paste(deparse(case$code), collapse = " ")
  if (is.null(error)) {
    testthat::fail(sprintf("`%s` gave no error", call))
    return(invisible())
  }
  expected <- paste0("gpukeras_error_", case$class)
  testthat::expect(
    identical(error$class[1], expected) && "gpukeras_error" %in% error$class,
    sprintf(
      "`%s` gave an error of class %s, not %s + gpukeras_error: %s",
      call, paste(error$class, collapse = "/"), expected, error$message
    )
  )
  testthat::expect(
    grepl(case$message, error$message),
    sprintf("`%s`: the message does not match \"%s\": %s", call, case$message, error$message)
  )
  # A raw Python traceback shows as these lines; the core keeps user errors' tracebacks out.
  testthat::expect(
    !grepl("Traceback (most recent call last)", error$message, fixed = TRUE) &&
      !grepl("File \"", error$message, fixed = TRUE) && is.null(error$python_traceback),
    sprintf("`%s` shows or keeps a Python traceback: %s", call, error$message)
  )
}

# The error a case gives when its code is evaluated in `env` (error_data()).
run_bad_input <- function(case, env = parent.frame()) {
  error <- tryCatch(
    {
      eval(case$code, env)
      NULL
    },
    error = identity
  )
  error_data(error)
}

# Cases R rejects before Python starts: all evaluated in one fresh R process
# (with a Python environment configured, as usual), after `setup` (an
# expression making the objects the cases use). One result per case:
# list(case, error, started_python), where `started_python` is TRUE for the
# first case that started Python (only it is to blame).
check_before_python <- function(cases, setup = NULL) {
  codes <- lapply(cases, `[[`, "code")
  results <- do.call(run_in_fresh_r, list(expr = bquote({
    .(setup)
    lapply(.(codes), function(code) {
      list(
        error = catch_error(eval(code)),
        python_started = reticulate::py_available(initialize = FALSE)
      )
    })
  })))
  started <- vapply(results, `[[`, logical(1), "python_started")
  first <- started & !c(FALSE, utils::head(started, -1))
  Map(
    function(case, result, blame) list(case = case, error = result$error, started_python = blame), cases, results, first
  )
}
