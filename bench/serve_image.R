# gpu_serve() of an image model at its default limits: what one request as large as they
# allow costs the service (issue #77's goal: answered within 5 s and 500 MB of the
# service's memory).
#
# A small CNN (32x32x3 images, Conv2D 16 3x3 relu, global average pooling, 4-class
# softmax) trained on an array of random images, saved with gpu_save() and served by
# gpu_serve() with its default limits (max_rows = NULL) in an R process of its own that
# loads it with gpu_load() (bench/lib/serve.R). `rounds` requests of as many images as
# /metadata's max_rows allows, pixels in [0, 1] with 8 decimals as JSON nested arrays,
# one after another: each request's time from sending to the answer read (curl's total
# time), and the service's peak resident memory (VmHWM, its processes together) added
# over the first request. The answers are checked against predict(fit) in this process.
#
# Usage (from the repository root): Rscript bench/serve_image.R [--quick | --smoke]
# Writes bench/results/serve-image-<device>[-quick].json (see bench/lib/common.R).
wall_started <- Sys.time()
load_before <- readLines("/proc/loadavg")

source("bench/lib/load.R")
source("bench/lib/common.R")
source("bench/lib/serve.R")
mode <- bench_mode()
code <- code_state()
rounds <- if (mode$smoke) 1L else if (mode$quick) 3L else 5L

# `n` images of 32x32x3, pixels in [0, 1] with 8 decimals.
images <- function(n, seed) withr::with_seed(seed, array(round(stats::runif(n * 32 * 32 * 3), 8), c(n, 32, 32, 3)))

keras <- gpu_keras()
train <- images(if (mode$smoke) 64L else 512L, 1)
y <- factor(withr::with_seed(2, sample(c("a", "b", "c", "d"), dim(train)[1], replace = TRUE)))
model <- keras$Sequential(list(
  keras$Input(shape = list(32L, 32L, 3L)),
  keras$layers$Conv2D(16L, 3L, activation = "relu"),
  keras$layers$GlobalAveragePooling2D(),
  keras$layers$Dense(4L, activation = "softmax")
))
model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
fit <- gpu_fit(model, list(x = train, y = y), epochs = 1L, verbose = 0, monitor = FALSE, seed = 1)
service <- serve_in_process(fit, NULL)
meta <- jsonlite::fromJSON(rawToChar(curl::curl_fetch_memory(paste0(service$url, "/metadata"))$content))

rows <- if (mode$smoke) 10L else meta$max_rows
newdata <- images(rows, 3)
body <- charToRaw(as.character(jsonlite::toJSON(newdata, digits = I(8)))) # raw: curl 5.0.0 refuses a string this long as postfields ("bad argument")
expected <- predict(fit, newdata)
before <- served_memory(service$server)
requests <- lapply(seq_len(rounds), function(round) {
  handle <- curl::new_handle(postfields = body, timeout = 300)
  curl::handle_setheaders(handle, `Content-Type` = "application/json")
  answer <- curl::curl_fetch_memory(paste0(service$url, "/predict"), handle = handle)
  served <- if (answer$status_code == 200L) jsonlite::fromJSON(rawToChar(answer$content))$predictions
  difference <- if (is.null(served)) NA_real_ else max(abs(as.matrix(served[colnames(expected)]) - unname(expected)))
  memory <- served_memory(service$server)
  cat(sprintf(
    "request %d: %d images, status %d in %.2f s; the service's peak memory %.0f -> %.0f MiB\n",
    round, rows, answer$status_code, answer$times[["total"]], before$peak_mib, memory$peak_mib
  ))
  list(status = answer$status_code, seconds = answer$times[["total"]], max_abs_difference = difference, memory_after = memory)
})
invisible(service$server$kill())
seconds <- vapply(requests, `[[`, numeric(1), "seconds")
peak_added <- requests[[rounds]]$memory_after$peak_mib - before$peak_mib

machine <- machine_facts(load_before)
result <- list(
  benchmark = "serve-image", command = bench_command("bench/serve_image.R", mode), date = format(Sys.time(), "%Y-%m-%d"),
  quick = mode$quick, smoke = mode$smoke,
  device = if (identical(machine$gpu, "none")) paste("CPU:", machine$cpu) else machine$gpu[[1]],
  machine = machine, code = code, backend = keras$backend$backend(), versions = version_facts(),
  workload = list(
    model = "CNN 32x32x3 -> Conv2D 16 (3x3, relu) -> global average pooling -> 4-class softmax, trained on an array",
    max_rows = meta$max_rows, max_bytes = meta$max_bytes, request_images = rows, body_bytes = length(body)
  ),
  goal = "a request at the image model's default limits answered within 5 s and 500 MB of the service's memory",
  service_start_seconds = service$start_seconds,
  results = list(
    statuses = vapply(requests, `[[`, integer(1), "status"), median_seconds = stats::median(seconds), max_seconds = max(seconds),
    memory_before = before, peak_added_mib = peak_added,
    max_abs_difference = max(vapply(requests, `[[`, numeric(1), "max_abs_difference"))
  ),
  notes = c(
    "seconds: curl's total time of each request, from connecting to the answer read: the body's upload, parsing, predict(), the JSON answer.",
    "peak_added_mib: the service's VmHWM (its R process and its server's Python process together) after the last request minus before the first.",
    "max_abs_difference: the served probabilities against predict(fit) on the same images in this process."
  ),
  wall_seconds = round(as.numeric(difftime(Sys.time(), wall_started, units = "secs")), 1)
)
out <- write_result(result, paste0("serve-image-", if (identical(machine$gpu, "none")) "cpu" else "gpu"), mode)
cat(sprintf(
  "%d images (%.1f MiB) a request: median %.2f s, max %.2f s; the service's peak memory +%.0f MiB; served vs predict(): %.2g\nwrote %s\n",
  rows, length(body) / 2^20, median(seconds), max(seconds), peak_added, result$results$max_abs_difference, out
))
stopifnot(all(result$results$statuses == 200L), result$results$max_abs_difference <= 1e-5)
