# Helpers the service's benchmarks share (bench/serve.R, bench/serve_image.R): a fit served
# by gpu_serve() in an R process of its own, and that process' memory.

# `fit` saved with gpu_save() and served by gpu_serve(max_rows = ) in an R process of its
# own that loads it with gpu_load(), as a deployment would (the package loaded as here:
# this source tree, or the installed one). Waits for /health; a list of `server` (the
# callr process), `url` and `start_seconds` (from the process' start to the first answer).
serve_in_process <- function(fit, max_rows) {
  model_path <- file.path(tempfile("bench-serve-"), "model.keras")
  dir.create(dirname(model_path))
  gpu_save(fit, model_path)
  port <- utils::getFromNamespace("free_ports", "gpukeras")(1L)
  server <- callr::r_bg(function(root, model_path, port, max_rows) {
    if (nzchar(root)) pkgload::load_all(root, quiet = TRUE) else library(gpukeras)
    gpukeras::gpu_serve(gpukeras::gpu_load(model_path), port = port, max_rows = max_rows, quiet = TRUE)
  }, args = list(root = if (from_sources) getwd() else "", model_path = model_path, port = port, max_rows = max_rows))
  url <- sprintf("http://127.0.0.1:%d", port)
  started <- Sys.time()
  repeat {
    up <- tryCatch(curl::curl_fetch_memory(paste0(url, "/health"))$status_code == 200L, error = function(e) FALSE)
    if (up) break
    if (!server$is_alive()) stop("the service ended: ", paste(server$read_all_error_lines(), collapse = "\n"))
    if (difftime(Sys.time(), started, units = "secs") > 180) stop("the service did not answer /health in 180 s")
    Sys.sleep(0.2)
  }
  list(server = server, url = url, start_seconds = as.numeric(difftime(Sys.time(), started, units = "secs")))
}

# The service's processes: the R process that serves and its children (gpu_serve()'s
# server, the Python process that listens on its port).
service_pids <- function(server) {
  pids <- server$get_pid()
  children <- suppressWarnings(system2("pgrep", c("-P", pids[1]), stdout = TRUE))
  c(pids, as.integer(children))
}

# The service's resident memory now and at its peak, in MiB (its processes' together).
served_memory <- function(server) {
  pids <- service_pids(server)
  mib <- function(field) {
    sum(vapply(pids, function(pid) {
      status <- readLines(sprintf("/proc/%d/status", pid))
      as.numeric(gsub("\\D", "", grep(paste0("^", field, ":"), status, value = TRUE))) / 1024
    }, numeric(1)))
  }
  list(rss_mib = mib("VmRSS"), peak_mib = mib("VmHWM"))
}
