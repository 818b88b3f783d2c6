# Plotting a gpukeras_fit: the metrics per epoch and the GPU and host CPU timelines.

#' Plot a gpu_fit() run
#'
#' Draws, with base graphics, the loss and each metric per epoch (with its
#' validation counterpart, dashed), and, when a GPU was monitored, a panel of
#' GPU utilization (%, left axis) and memory used (MiB, right axis) over the
#' training time, and one of the host's CPU load (% of all cores busy) when it
#' was sampled (on a GPU as on a CPU: a busy host starves the device).
#'
#' @param x A `gpukeras_fit` from [gpu_fit()].
#' @param metrics The metrics to draw (names of history columns without
#'   `val_`); `NULL` for all.
#' @param timeline Draw the timeline panels (GPU, host CPU) that have samples.
#' @param ... Passed to the per-epoch [graphics::plot()] calls.
#' @return `x`, invisibly.
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   keras <- gpu_keras()
#'   model <- keras$Sequential(list(keras$Input(shape = list(2L)), keras$layers$Dense(1L)))
#'   model$compile(optimizer = "sgd", loss = "mse")
#'   x <- matrix(runif(200), ncol = 2)
#'   fit <- gpu_fit(model, list(x = x, y = x %*% c(1, -1)), epochs = 4, verbose = 0)
#'   plot(fit)
#' }
plot.gpukeras_fit <- function(x, metrics = NULL, timeline = TRUE, ...) {
  check_flag(timeline)
  history <- x$history
  available <- setdiff(names(history), "epoch")
  base <- unique(sub("^val_", "", available))
  base <- base[order(base != "loss")]
  if (!is.null(metrics)) {
    unknown <- setdiff(metrics, base)
    if (!is.character(metrics) || length(unknown)) {
      abort_bad_argument(
        sprintf(
          "`metrics` must name history columns (%s), not %s.",
          paste0("\"", base, "\"", collapse = ", "), describe(if (length(unknown)) unknown else metrics)
        )
      )
    }
    base <- metrics
  }
  gpu <- x$timeline$gpu
  host <- x$timeline$host
  draw_gpu <- timeline && isTRUE(nrow(gpu) > 0)
  draw_host <- timeline && isTRUE(nrow(host) > 0)
  panels <- length(base) + draw_gpu + draw_host
  if (panels == 0L) abort_bad_argument("There is nothing to plot: the history has no epochs or metrics.")
  layout <- if (panels <= 3) c(panels, 1) else c(ceiling(panels / 2), 2)
  old <- graphics::par(mfrow = layout, mar = c(4, 4.5, 2.5, if (draw_gpu) 4.5 else 1))
  on.exit(graphics::par(old), add = TRUE)
  for (metric in base) {
    validation <- history[[paste0("val_", metric)]]
    plot_curves(
      list(epoch = history$epoch, value = history[[metric]] %||% rep(NA_real_, nrow(history))),
      if (!is.null(validation)) list(epoch = history$epoch, value = validation),
      c("train", "validation"), metric, ...
    )
  }
  if (draw_gpu) plot_gpu_timeline(gpu)
  if (draw_host) plot_host_timeline(host)
  invisible(x)
}

# One metric by epoch in a panel: `first` (epoch, value) solid, `second` (or NULL) dashed,
# with the legend `labels` in the corner the curves leave free.
plot_curves <- function(first, second, labels, metric, ...) {
  values <- c(first$value, second$value)
  ylim <- if (all(is.na(values))) c(0, 1) else range(values, na.rm = TRUE)
  graphics::plot(
    first$epoch, first$value, type = "b", pch = 19, ylim = ylim, xlab = "epoch", ylab = metric, main = metric,
    xaxt = "n", ...
  )
  graphics::axis(1, at = unique(round(pretty(c(first$epoch, second$epoch)))))
  if (!is.null(second)) {
    graphics::lines(second$epoch, second$value, type = "b", pch = 1, lty = 2, col = "firebrick")
    graphics::legend(legend_corner(c(right_third(first$value), right_third(second$value)), ylim),
      labels, lty = c(1, 2), pch = c(19, 1),
      col = c("black", "firebrick"), bty = "n", cex = 0.8)
  }
}

right_third <- function(x) if (length(x)) x[seq_along(x) > 2 * length(x) / 3] else x

# The right-hand corner with fewer of `values` near it: top when the curves
# end in the lower half of the panel, bottom otherwise.
legend_corner <- function(values, ylim) {
  values <- values[!is.na(values)]
  if (!length(values) || diff(ylim) == 0) return("topright")
  if (mean((values - ylim[1]) / diff(ylim)) > 0.5) "bottomright" else "topright"
}

# Utilization (solid, left axis) and memory used (dashed, right axis) over time, a colour a GPU.
plot_gpu_timeline <- function(gpu) {
  indices <- sort(unique(gpu$nvml_index))
  colours <- grDevices::hcl.colors(max(2L, length(indices)), "Dark 3")[seq_along(indices)]
  per_gpu <- function(column, lty, top, ...) {
    graphics::plot(range(gpu$time_s, na.rm = TRUE), c(0, top), type = "n", ...)
    for (i in seq_along(indices)) {
      rows <- gpu[gpu$nvml_index == indices[i], , drop = FALSE]
      graphics::lines(rows$time_s, rows[[column]], col = colours[i], lty = lty)
    }
  }
  per_gpu("utilization", 1, 100, xlab = "seconds", ylab = "GPU utilization (%)", main = "GPU utilization and memory")
  if (any(!is.na(gpu$memory_used_mib))) {
    graphics::par(new = TRUE)
    per_gpu("memory_used_mib", 2, max(gpu$memory_used_mib, na.rm = TRUE), axes = FALSE, xlab = "", ylab = "")
    graphics::axis(4)
    graphics::mtext("memory used (MiB)", side = 4, line = 3, cex = 0.7)
  }
  graphics::legend(
    "bottomright", c(sprintf("GPU %d utilization", indices), sprintf("GPU %d memory", indices)),
    col = rep(colours, 2), lty = rep(1:2, each = length(indices)), bty = "n", cex = 0.8
  )
}

plot_host_timeline <- function(host) {
  graphics::plot(
    host$time_s, host$cpu_percent,
    type = "l", ylim = range(0, 100, host$cpu_percent, na.rm = TRUE), xlab = "seconds",
    ylab = "host CPU (% of all cores)",
    main = "Host CPU load"
  )
}
