# Printing a gpukeras_fit.

#' @export
format.gpukeras_fit <- function(x, n = 5, ...) {
  history <- x$history
  settings <- x$settings
  epochs <- nrow(history)
  shown <- utils::tail(history, n)
  table <- if (epochs) utils::capture.output(print(shown, row.names = FALSE, digits = 4)) else "(no epochs ran)"
  where <- c(settings$backend, settings$dtype_policy)
  data <- c(
    settings$data,
    if (!is.null(settings$validation_data)) paste("validation:", settings$validation_data),
    # Which way the data went on JAX (on the device, or streamed from host memory), and why;
    # on TensorFlow it always streams.
    if (identical(settings$backend, "jax")) settings$data_path$why
  )
  c(
    paste0(
      sprintf("<gpukeras fit> %d epoch%s", epochs, if (epochs == 1) "" else "s"),
      if (length(settings$device)) sprintf(" on %s", paste(unlist(settings$device), collapse = ", ")),
      if (length(where)) sprintf(" (%s)", paste(where, collapse = ", ")),
      if (!is.null(settings$seconds)) sprintf(" in %s", format_seconds(settings$seconds))
    ),
    if (!is.null(settings$simulated_gpu)) paste("Auto choices:   for a", settings$simulated_gpu),
    if (length(data)) paste("Data:          ", paste(data, collapse = "; ")),
    format_fit_weights(settings$weights, x$encoding),
    format_fit_encoding(x$encoding),
    if (epochs > n) sprintf("History (last %d of %d epochs):", n, epochs) else "History:",
    paste0("  ", table),
    format_fit_monitor(x$monitor),
    format_fit_settings(settings)
  )
}

#' @export
print.gpukeras_fit <- function(x, ...) print_formatted(x, ...)

# How the losses were weighted (the core's data/weights.py describe()): class weights by the
# labels' names where the encoding has them, and the note on which losses the weights reach.
format_fit_weights <- function(weights, encoding) {
  if (is.null(weights)) return(NULL)
  given <- if (identical(weights$training, "class_weight")) {
    codes <- names(weights$class_weight)
    levels <- if (identical(encoding$y$type, "factor")) encoding$y$levels
    named <- if (length(levels)) levels[as.integer(codes) + 1L] else codes
    named[is.na(named)] <- codes[is.na(named)]
    sprintf(
      "class_weight %s", paste(named, vapply(weights$class_weight, format, character(1)), sep = " = ", collapse = ", ")
    )
  } else {
    "sample weights given with the data"
  }
  c(paste("Weights:       ", given), paste("               ", weights$note))
}

format_fit_monitor <- function(m) {
  if (is.null(m)) return("Monitor: off (monitor = FALSE)")
  throughput <- format_throughput(m)
  input <- format_input(m)
  gpu <- if (is.null(m$gpu_utilization_mean)) {
    sprintf("not measured (%s)", m$gpu_not_measured %||% "no GPU")
  } else {
    gpu_figures(m$gpu_utilization_mean, m$gpu_utilization_p95, m$gpu_memory_used_max_mib)
  }
  each_gpu <- if (length(m$gpus) > 1) format_each_gpu(m)
  compute <- if (!is.null(m$achieved_tflops) || !is.null(m$mfu)) {
    paste(c(
      if (!is.null(m$achieved_tflops)) sprintf("%s achieved", format_flops(m$achieved_tflops)),
      if (!is.null(m$peak_tflops)) sprintf("peak %s (%s)", format_flops(m$peak_tflops), m$peak_source %||% "?"),
      if (!is.null(m$mfu)) sprintf("MFU %s", format_percent(m$mfu, 1))
    ), collapse = "; ")
  }
  c(
    sprintf("Throughput:     %s", throughput),
    if (!is.null(m$wall_samples_per_second)) {
      sprintf(
        "                %s samples/s over the epochs' wall time (compiling and stalls included)",
        format(round(m$wall_samples_per_second), big.mark = ",")
      )
    },
    paste0(c("Input pipeline: ", rep("                ", length(input) - 1L)), input),
    sprintf("GPU:            %s", gpu),
    each_gpu,
    if (!is.null(m$host_cpu_percent_mean)) sprintf("Host CPU:       mean %.0f%%", m$host_cpu_percent_mean),
    if (!is.null(compute)) sprintf("Compute:        %s", compute),
    if (length(m$advice)) c("Advice:", paste(" ", arrow(), m$advice)),
    # findings to know, not to act on (a short or CPU run's input verdict): no arrow
    if (length(m$notes)) c("Notes:", paste("  -", m$notes))
  )
}

# Samples/s and the time per training step (one batch); with several batches per call, also
# the time of a call, whose spread is the one measured.
format_throughput <- function(m) {
  per_call <- m$steps_per_execution %||% 1
  step_ms <- if (per_call > 1) m$batch_time_mean_ms else m$step_time_mean_ms
  step <- if (!is.null(step_ms)) {
    if (per_call > 1 && !is.null(m$step_time_mean_ms)) {
      sprintf(
        "step %.2f ms (%d steps a call: %.2f ms, sd %.2f ms)", step_ms, as.integer(per_call),
        m$step_time_mean_ms, m$step_time_sd_ms %||% NA_real_
      )
    } else {
      sprintf("step %.2f ms (sd %.2f ms)", step_ms, m$step_time_sd_ms %||% NA_real_)
    }
  }
  rate <- if (!is.null(m$samples_per_second)) {
    sprintf("%s samples/s", format(round(m$samples_per_second), big.mark = ","))
  } else if (!is.null(step)) {
    "samples/s not known (rows per batch not seen)"
  }
  if (is.null(rate)) "not measured" else paste(c(rate, step), collapse = "; ")
}

# The input verdict and what it rests on: the wait timed (with its margin, and the line of
# the verdict it is near), none by construction (batches on the device), or the pipeline
# timed alone where Keras takes batches inside its graph loop. One line, or two where the
# second says why the wait was not timed.
format_input <- function(m) {
  if (isTRUE(m$input_on_device)) return("on the device (no wait by construction)")
  if (!is.null(m$input_wait_share)) {
    # Say why a share over 5 % can still be "not input-bound" (the core's input_verdict()).
    within <- !is.null(m$input_wait_mean_ms) && !is.null(m$fetch_floor_ms) &&
      m$input_wait_mean_ms < m$fetch_floor_ms
    margin <- m$input_wait_margin
    return(sprintf(
      "%s (waiting for input %s%s of step time%s%s)", m$input_verdict %||% "?",
      format_percent(m$input_wait_share, 1),
      if (!is.null(margin) && margin > 0) sprintf(" +/- %.1f points", 100 * margin) else "",
      if (!is.null(m$input_near_line)) sprintf(", near the %s line", format_percent(m$input_near_line)) else "",
      if (within)
        sprintf(
          ", %.2f ms a step: less than the %.2f ms taking a ready batch takes", m$input_wait_mean_ms, m$fetch_floor_ms
        ) else ""
    ))
  }
  why <- m$input_wait_method %||% "input wait not measured"
  if (is.null(m$input_share_alone)) return(sprintf("%s (%s)", m$input_verdict %||% "not known", why))
  c(
    sprintf(
      "%s, estimated: the pipeline alone takes %.2f ms a batch, %s of a training step",
      m$input_verdict %||% "?", m$pipeline_batch_ms %||% NA_real_, format_percent(m$input_share_alone, 1)
    ),
    sprintf("(%s)", why)
  )
}

gpu_figures <- function(mean, p95, mib) {
  sprintf(
    "utilization mean %.0f%%, p95 %.0f%%; memory used up to %s", mean, p95 %||% NA_real_, format_mib(mib %||% NA_real_)
  )
}

# One line per GPU of a run on several, then how far apart they are.
format_each_gpu <- function(m) {
  lines <- vapply(m$gpus, function(g) {
    figures <- if (is.null(g$utilization_mean)) "not measured" else
      gpu_figures(g$utilization_mean, g$utilization_p95, g$memory_used_max_mib)
    sprintf("  %s (%s): %s", g$device, g$name %||% "?", figures)
  }, character(1))
  spread <- if (!is.null(m$gpu_utilization_imbalance)) {
    sprintf(
      "  imbalance: %.0f points of utilization, %s of memory between the busiest and the idlest GPU",
      m$gpu_utilization_imbalance, format_mib(m$gpu_memory_imbalance_mib %||% NA_real_)
    )
  }
  paste0("              ", c(lines, spread))
}

format_fit_settings <- function(settings) {
  clipping <- c("clipnorm", "clipvalue", "global_clipnorm")
  clipping <- clipping[!vapply(settings[clipping], is.null, logical(1))]
  run <- c(
    if (!is.null(settings$remat)) sprintf("rematerialized (%s)", settings$remat),
    if (isTRUE(settings$accumulate > 1)) {
      sprintf(
        "accumulate %d (micro-batch %s)", as.integer(settings$accumulate), format(settings$micro_batch_size %||% "?")
      )
    },
    if (!is.null(settings$steps_per_epoch))
      sprintf("%s steps per epoch", format(settings$steps_per_epoch, big.mark = ",")),
    if (!is.null(settings$steps_per_execution))
      sprintf("steps_per_execution %d", as.integer(settings$steps_per_execution)),
    if (!is.null(settings$jit_compile)) sprintf("jit_compile %s", settings$jit_compile),
    vapply(clipping, function(name) sprintf("%s %s", name, format(settings[[name]])), character(1)),
    if (!is.null(settings$seed)) sprintf("seed %d", as.integer(settings$seed)),
    # Said only when on: off is every framework's default, and most runs'.
    if (isTRUE(settings$deterministic)) "deterministic ops"
  )
  backups <- if (!is.null(settings$backup_dir)) {
    resumed <- settings$resumed_from
    paste0(
      settings$backup_dir,
      if (is.numeric(settings$backup_freq)) sprintf(", every %d batches", as.integer(settings$backup_freq)),
      if (!is.null(resumed))
        sprintf(
          " (resumed in epoch %d, after %s batches)", as.integer(resumed$epoch),
          format(resumed$batches_done, big.mark = ",")
        )
    )
  }
  strategy <- settings$strategy
  placement <- if (!is.null(strategy)) {
    sprintf(
      "%s over %s (%d replica%s)%s",
      strategy$type, paste(unlist(strategy$devices), collapse = ", "), as.integer(strategy$replicas),
      if (strategy$replicas == 1) "" else "s",
      if (!is.null(strategy$global_batch_size)) {
        sprintf(
          "; global batch %d = %s per replica", as.integer(strategy$global_batch_size),
          format(strategy$per_replica_batch_size)
        )
      } else {
        ""
      }
    )
  }
  c(
    if (!is.null(placement)) paste("Strategy:      ", placement),
    # Multi-worker: who can reach this worker's ports (print(strategy) gives the firewall rules).
    if (!is.null(strategy$network)) paste("Network:       ", strategy$network$reach),
    if (length(run)) paste("Settings:      ", paste(run, collapse = ", ")),
    if (!is.null(settings$learning_rate)) paste("Learning rate: ", format_learning_rate(settings$learning_rate)),
    if (!is.null(settings$accumulate_reason)) paste("Accumulate:    ", settings$accumulate_reason),
    if (!is.null(backups)) paste("Backups:       ", backups),
    if (!is.null(settings$ema)) {
      paste(
        "Weights:       ",
        sprintf(
          "moving average (ema %s): validation and the returned model use the averaged weights", format(settings$ema)
        )
      )
    },
    if (length(settings$best$best)) {
      best <- settings$best$best[[1]]
      paste("Best kept:     ", sprintf(
        "%d by %s (best: epoch %d, %s); fit$settings$best", length(settings$best$best), settings$best$monitor,
        as.integer(best$epoch), format(signif(best$value, 4))
      ))
    },
    if (!is.null(settings$tracking$key)) {
      paste(
        "Tracked:       ",
        sprintf(
          "run %s in %s (%s)", settings$tracking$run_id %||% "(being made)", settings$tracking$experiment,
          settings$tracking$uri
        )
      )
    }
  )
}

# A learning rate as the core reports it: a number, one of our schedule specs,
# or another Keras schedule (its class name and config).
format_learning_rate <- function(rate) {
  if (is.numeric(rate)) return(sprintf("%s (constant)", format_rate(rate)))
  if (is.list(rate) && isTRUE(rate$schedule %in% c("warmup_cosine", "exponential", "cyclical"))) {
    return(sub("^<gpukeras lr schedule> ", "", format(structure(rate, class = "gpukeras_lr_schedule"))))
  }
  if (is.list(rate) && !is.null(rate$schedule)) {
    details <- rate[names(rate) != "schedule" & vapply(rate, function(v) is.atomic(v) && length(v) == 1L, logical(1))]
    return(sprintf(
      "%s(%s)", rate$schedule,
      paste(names(details), vapply(details, format, character(1)), sep = " = ", collapse = ", ")
    ))
  }
  describe(rate)
}
