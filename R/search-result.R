# What gpu_search() returns: the trials as a table, the best trial and its model, with
# format(), print() and plot().

new_gpukeras_search <- function(trials, names, storage, study, seed, objective, validation, plan, population = NULL) {
  table <- data.frame(number = as.integer(unlist(trials$number)))
  columns <- c(trials$params[names], trials[c("value", "state", "reason", "seconds", "device", "seed", "epochs")])
  for (i in seq_along(columns)) table[[names(columns)[i]]] <- unlist(lapply(columns[[i]], `%||%`, NA))
  best <- trials$best
  if (!is.null(best)) best$path <- best$path %||% NA_character_
  structure(list(
    trials = table, best = best, objective = objective, direction = trials$direction,
    storage = storage$folder %||% trials$storage, study = study, seed = seed,
    validation = validation$description, validation_rows = validation$rows,
    interrupted = as.integer(unlist(trials$interrupted)), workers = plan,
    trained = population$trained %||% if (isTRUE(population$population)) "populations" else "processes",
    trained_why = population$reason
  ), class = "gpukeras_search")
}

# The lines, written by the core from the result's fields.
#' @export
format.gpukeras_search <- function(x, ...) {
  fields <- x[c("objective", "direction", "validation", "study", "storage", "seed", "trained", "trained_why", "best")]
  unlist(do.call(core_call, c(
    list("search_lines", states = as.list(x$trials$state), interrupted = length(x$interrupted)), fields
  )))
}

#' @export
print.gpukeras_search <- print_formatted

#' @export
plot.gpukeras_search <- function(x, ...) {
  trials <- x$trials[order(x$trials$number), ]
  done <- trials$state %in% c("complete", "pruned") & is.finite(trials$value)
  if (!any(done)) {
    graphics::plot.new()
    graphics::title(main = "No trial has a value yet")
    return(invisible(x))
  }
  values <- ifelse(trials$state == "complete", trials$value, NA)
  best <- if (x$direction == "maximize") cummax(ifelse(is.na(values), -Inf, values)) else
    cummin(ifelse(is.na(values), Inf, values))
  best[!is.finite(best)] <- NA
  values <- trials$value[done]
  # room above the points for the legend
  ylim <- range(values) + c(0, 0.3 * max(diff(range(values)), abs(max(values)) * 0.1, 1e-8))
  graphics::plot(
    trials$number[done], values, pch = ifelse(trials$state[done] == "pruned", 1, 19), ylim = ylim, xaxt = "n",
    xlab = "trial", ylab = x$objective, main = sprintf("%s over the trials", x$objective), ...
  )
  graphics::axis(1, at = unique(round(pretty(trials$number))))
  graphics::lines(trials$number, best, type = "s", lty = 1)
  legend <- search_plot_legend(trials$state[done])
  graphics::legend("top", legend$label, pch = legend$pch, lty = legend$lty, bty = "n", horiz = TRUE, cex = 0.8)
  invisible(x)
}

# The plot's legend for the `states` of the trials it shows: the states that occurred,
# and the best so far once a trial completed.
search_plot_legend <- function(states) {
  legend <- data.frame(
    label = c("complete", "pruned (its last epoch)", "best so far"), pch = c(19, 1, NA), lty = c(0, 0, 1)
  )
  legend[c("complete" %in% states, "pruned" %in% states, "complete" %in% states), ]
}
