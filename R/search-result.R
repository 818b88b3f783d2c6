# What gpu_search() returns: the trials as a table, the best trial and its model, with
# format(), print() and plot().

new_gpukeras_search <- function(trials, names, storage, study, seed, objective, validation, plan, population = NULL) {
  table <- data.frame(number = as.integer(unlist(trials$number)))
  columns <- c(trials$params[names], trials[c("value", "state", "reason", "seconds", "device", "seed", "epochs")])
  for (i in seq_along(columns)) table[[names(columns)[i]]] <- unlist(lapply(columns[[i]], `%||%`, NA))
  best <- NULL
  if (!is.null(trials$best)) {
    row <- which(table$number == trials$best)
    path <- file.path(storage$models, sprintf("trial-%d.keras", trials$best))
    best <- list(
      number = trials$best, params = as.list(table[row, names, drop = FALSE]), value = table$value[row],
      path = if (file.exists(path)) path else NA_character_
    )
  }
  structure(list(
    trials = table, best = best, objective = objective, direction = trials$direction,
    storage = storage$folder %||% trials$storage, study = study, seed = seed,
    validation = validation$description, validation_rows = validation$rows,
    interrupted = as.integer(unlist(trials$interrupted)), workers = plan,
    trained = if (isTRUE(population$population)) "populations" else "processes", trained_why = population$reason
  ), class = "gpukeras_search")
}

#' @export
format.gpukeras_search <- function(x, ...) {
  states <- table(factor(x$trials$state, levels = c("complete", "pruned", "failed", "running", "waiting")))
  states <- states[states > 0]
  best <- if (is.null(x$best)) {
    "Best:       none yet (no trial completed)"
  } else {
    c(
      sprintf("Best:       trial %d, %s = %.5g", x$best$number, x$objective, x$best$value),
      sprintf(
        "            %s",
        paste(
          sprintf("%s = %s", names(x$best$params), vapply(x$best$params, function(v) format(v, digits = 4), "")),
          collapse = ", "
        )
      ),
      if (!is.na(x$best$path)) sprintf("            model: %s (gpu_load() it)", x$best$path)
    )
  }
  c(
    sprintf(
      "<gpukeras_search> %d trials (%s), %s %s", nrow(x$trials),
      paste(sprintf("%d %s", as.integer(states), names(states)), collapse = ", "), x$direction, x$objective
    ),
    best,
    sprintf("Validation: %s", x$validation),
    sprintf("Study:      '%s' in %s, seed %d", x$study, x$storage, x$seed),
    paste0(
      "Trained:    ",
      if (identical(x$trained, "populations")) "in batches, as populations" else "a fit per trial, in worker processes",
      if (length(x$trained_why)) sprintf(" (%s)", x$trained_why)
    ),
    if (length(x$interrupted)) sprintf("Resumed:    %d interrupted trial(s) run again", length(x$interrupted))
  )
}

#' @export
print.gpukeras_search <- function(x, ...) print_formatted(x, ...)

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
