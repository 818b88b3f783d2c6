# gpu_serve(): requests per second and latency of POST /predict, 8 concurrent clients.
#
# A classifier of a data.frame with numeric and factor columns, as an R user's would
# be (8 numeric columns, `region` with 4 levels and `plan` with 3, one-hot: 15
# features; MLP 15-64-64-2, relu and softmax), trained here for 2 epochs on 5,000
# rows, saved with gpu_save() and served by gpu_serve() in an R process of its own that
# loads it with gpu_load() (as a deployment would). This process is the clients:
# `clients` (8) closed-loop clients on curl's multi interface, each sending its next
# request as soon as its last was answered, JSON records of 1 row or of 1,000 rows,
# `requests` per client per round. Per size and round: requests per second (answers /
# wall time from the first request sent to the last answer) and the latency of each
# request (curl's total time: sent -> answer read, the time queued at the server
# included, as the service answers one request at a time). Also, for reference, one
# client alone, and predict() on the same rows in this process (the model's own time,
# without HTTP and JSON). Before the load, the served answers are checked against
# predict(fit) here: the largest difference of the probabilities (float32 outputs; the
# goal is <= 1e-6) and the classes (type=class) identical.
#
# Usage (from the repository root): Rscript bench/serve.R [--quick | --smoke]
# Writes bench/results/serve-<device>[-quick].json (a smoke run: see bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
mode <- bench_mode()
code <- code_state()

rows_train <- if (mode$smoke) 300L else 5000L
epochs <- if (mode$smoke) 1L else 2L
clients <- if (mode$smoke) 2L else 8L
requests <- if (mode$smoke) 2L else if (mode$quick) 10L else 25L
rounds <- if (mode$smoke) 1L else if (mode$quick) 2L else 3L
sizes <- c(1L, 1000L)
max_rows <- 10000L

bench_frame <- function(n, seed) {
  withr::with_seed(seed, {
    x <- as.data.frame(matrix(round(stats::rnorm(n * 8), 4), n, 8, dimnames = list(NULL, paste0("x", 1:8))))
    x$region <- sample(c("east", "north", "south", "west"), n, replace = TRUE)
    x$plan <- sample(c("basic", "plus", "pro"), n, replace = TRUE)
    x
  })
}

keras <- gpu_keras()
train <- bench_frame(rows_train, 1)
y <- factor(ifelse(train$x1 + train$x2 + (train$region == "west") + withr::with_seed(4, stats::rnorm(rows_train, sd = 0.5)) > 0.5, "yes", "no"))
model <- keras$Sequential(list(
  keras$Input(shape = list(15L)),
  keras$layers$Dense(64L, activation = "relu"),
  keras$layers$Dense(64L, activation = "relu"),
  keras$layers$Dense(2L, activation = "softmax")
))
model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
fit <- gpu_fit(model, list(x = train, y = y), epochs = epochs, verbose = 0, monitor = FALSE, seed = 1)
model_path <- file.path(tempfile("bench-serve-"), "model.keras")
dir.create(dirname(model_path))
gpu_save(fit, model_path)

# The service, in an R process of its own: the package loaded as here (this source tree,
# or the installed one), the model loaded from its file.
port <- utils::getFromNamespace("free_ports", "gpukeras")(1L)
server <- callr::r_bg(function(root, model_path, port, max_rows) {
  if (nzchar(root)) pkgload::load_all(root, quiet = TRUE) else library(gpukeras)
  gpukeras::gpu_serve(gpukeras::gpu_load(model_path), port = port, max_rows = max_rows, quiet = TRUE)
}, args = list(root = if (in_source_tree) getwd() else "", model_path = model_path, port = port, max_rows = max_rows))
url <- sprintf("http://127.0.0.1:%d", port)
started <- Sys.time()
repeat {
  up <- tryCatch(curl::curl_fetch_memory(paste0(url, "/health"))$status_code == 200L, error = function(e) FALSE)
  if (up) break
  if (!server$is_alive()) stop("the service ended: ", paste(server$read_all_error_lines(), collapse = "\n"))
  if (difftime(Sys.time(), started, units = "secs") > 180) stop("the service did not answer /health in 180 s")
  Sys.sleep(0.2)
}
service_start_seconds <- as.numeric(difftime(Sys.time(), started, units = "secs"))

records <- function(df) as.character(jsonlite::toJSON(df, dataframe = "rows", digits = NA))
post_handle <- function(body) {
  handle <- curl::new_handle(postfields = body, timeout = 120)
  curl::handle_setheaders(handle, `Content-Type` = "application/json")
  handle
}

# The served answers against predict(fit) in this process.
check_answers <- function(newdata) {
  raw <- curl::curl_fetch_memory(paste0(url, "/predict"), handle = post_handle(records(newdata)))
  classes <- curl::curl_fetch_memory(paste0(url, "/predict?type=class"), handle = post_handle(records(newdata)))
  stopifnot(raw$status_code == 200L, classes$status_code == 200L)
  served <- jsonlite::fromJSON(rawToChar(raw$content))$predictions
  expected <- predict(fit, newdata)
  list(
    rows = nrow(newdata),
    max_abs_difference = max(abs(as.matrix(served[colnames(expected)]) - unname(expected))),
    classes_identical = identical(jsonlite::fromJSON(rawToChar(classes$content))$predictions, as.character(predict(fit, newdata, type = "class")))
  )
}
agreement <- lapply(sizes, function(n) check_answers(bench_frame(n, 2)))
names(agreement) <- paste0("rows_", sizes)

# `clients` closed-loop clients, `per_client` requests each, of the body `body`:
# requests per second and each request's latency.
load_run <- function(body, clients, per_client) {
  pool <- curl::new_pool(total_con = clients, host_con = clients)
  latencies <- numeric()
  failures <- 0L
  send <- function(left) {
    if (left == 0L) {
      return(invisible())
    }
    curl::curl_fetch_multi(
      paste0(url, "/predict"),
      done = function(response) {
        if (response$status_code == 200L) latencies <<- c(latencies, response$times[["total"]]) else failures <<- failures + 1L
        send(left - 1L)
      },
      fail = function(message) {
        failures <<- failures + 1L
        send(left - 1L)
      },
      pool = pool, handle = post_handle(body)
    )
  }
  for (i in seq_len(clients)) send(per_client)
  began <- Sys.time()
  curl::multi_run(pool = pool)
  wall <- as.numeric(difftime(Sys.time(), began, units = "secs"))
  list(
    requests = length(latencies), failures = failures, seconds = wall, requests_per_second = length(latencies) / wall,
    median_latency_ms = 1000 * stats::median(latencies), p90_latency_ms = 1000 * unname(stats::quantile(latencies, 0.9)),
    max_latency_ms = 1000 * max(latencies)
  )
}

bodies <- lapply(sizes, function(n) records(bench_frame(n, 3)))
names(bodies) <- paste0("rows_", sizes)
if (!mode$smoke) {
  cat("warming up ...\n")
  for (body in bodies) load_run(body, clients, 2L)
}
measured <- list()
for (round in seq_len(rounds)) {
  for (size in names(bodies)) {
    for (k in unique(c(clients, 1L))) {
      key <- sprintf("%s_clients_%d", size, k)
      per_client <- if (k == 1L) max(2L, requests %/% 2L) else requests
      run <- load_run(bodies[[size]], k, per_client)
      run$loadavg_after <- readLines("/proc/loadavg")
      measured[[key]] <- c(measured[[key]], list(run))
      cat(sprintf(
        "round %d, %-22s %6.1f requests/s, median latency %7.1f ms (p90 %7.1f), %d failed\n",
        round, key, run$requests_per_second, run$median_latency_ms, run$p90_latency_ms, run$failures
      ))
    }
  }
}

# predict() in this process on the same rows: the model's own time per request.
predict_ms <- lapply(sizes, function(n) {
  newdata <- bench_frame(n, 3)
  predict(fit, newdata, batch_size = 1024)
  times <- vapply(seq_len(if (mode$smoke) 2L else 20L), function(i) system.time(predict(fit, newdata, batch_size = 1024))[["elapsed"]], numeric(1))
  1000 * stats::median(times)
})
names(predict_ms) <- paste0("rows_", sizes)

summarise <- function(runs) {
  pick <- function(what) vapply(runs, `[[`, numeric(1), what)
  list(
    requests_per_second = stats::median(pick("requests_per_second")), median_latency_ms = stats::median(pick("median_latency_ms")),
    p90_latency_ms = stats::median(pick("p90_latency_ms")), failures = sum(pick("failures")), rounds = runs
  )
}

machine <- machine_facts(load_before)
short <- if (identical(machine$gpu, "none")) "cpu" else "gpu"
result <- list(
  benchmark = "serve",
  command = bench_command("bench/serve.R", mode),
  date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick,
  smoke = mode$smoke,
  device = if (identical(machine$gpu, "none")) paste("CPU:", machine$cpu) else machine$gpu[[1]],
  machine = machine,
  code = code,
  backend = keras$backend$backend(),
  versions = c(version_facts(), list(plumber = as.character(utils::packageVersion("plumber")), curl = as.character(utils::packageVersion("curl")))),
  workload = list(
    data = "data.frame: 8 numeric columns, region (4 levels), plan (3 levels); one-hot: 15 features",
    model = "MLP 15-64-64-2 (relu, softmax), adam, sparse categorical cross-entropy",
    train_rows = rows_train, epochs = epochs, request_rows = sizes, clients = clients,
    requests_per_client = requests, rounds = rounds, batch_size = 1024L, max_rows = max_rows,
    body_bytes = lapply(bodies, nchar, type = "bytes")
  ),
  service_start_seconds = service_start_seconds,
  agreement = agreement,
  results = lapply(measured, summarise),
  predict_in_process_ms = predict_ms,
  notes = c(
    sprintf("The machine has %d CPU cores, shared: the service (one R process, answering one request at a time; TensorFlow's threads), the clients (this R process, curl's multi interface) and other people's processes ran on them (load averages in machine and each round).", machine$cores),
    "requests_per_second: answers with status 200 / wall time from the first request sent to the last answer, per round; median_latency_ms and p90_latency_ms: of each request's curl total time (connect, send, queued at the service, predict(), JSON, read), per round; the summary is the median over rounds.",
    "rows_1_clients_1 and rows_1000_clients_1: one client alone, for reference (no queueing).",
    "predict_in_process_ms: predict(fit, newdata, batch_size = 1024) in the clients' process on the same rows, median: the model's own time, which the service adds HTTP, JSON and its checks to.",
    "agreement: the served probabilities against predict(fit) in this process (max absolute difference) and the served classes (type=class) against predict(fit, type = \"class\")."
  ),
  wall_seconds = NA_real_
)
result$wall_seconds <- round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
out <- write_result(result, paste0("serve-", short), mode)
for (key in names(result$results)) {
  r <- result$results[[key]]
  cat(sprintf("%-22s %6.1f requests/s, median latency %7.1f ms, p90 %7.1f ms\n", key, r$requests_per_second, r$median_latency_ms, r$p90_latency_ms))
}
cat(sprintf("predict() in process: %s ms\n", paste(sprintf("%s %.1f", names(predict_ms), unlist(predict_ms)), collapse = ", ")))
cat(sprintf("served vs predict(): max difference %s; classes identical: %s\n",
  paste(sprintf("%.2g", vapply(agreement, `[[`, numeric(1), "max_abs_difference")), collapse = ", "),
  paste(vapply(agreement, `[[`, logical(1), "classes_identical"), collapse = ", ")
))
invisible(server$kill())
stopifnot(all(vapply(agreement, `[[`, numeric(1), "max_abs_difference") <= 1e-6), all(vapply(agreement, `[[`, logical(1), "classes_identical")))
cat(sprintf("wrote %s (%.0f s)\n", out, result$wall_seconds))
