# gpu_serve()'s server: the port clients reach is a Python process of its own (the core's
# serve/server.py, on uvicorn and Starlette), which reads every request, enforces the
# service's limits and sends each request it takes, whole, to R's router on a Unix socket
# that only this user can open (httpuv's pipe server, in a private folder).

# Serve `api` (a plumber router) behind the server on `host`:`port` until interrupted, or
# until the server ends (an error: the port no longer answers).
serve_behind_front <- function(api, host, port, settings, call) {
  folder <- tempfile("gpukeras-serve-")
  dir.create(folder, mode = "0700")
  on.exit(unlink(folder, recursive = TRUE), add = TRUE)
  socket <- file.path(folder, "r.sock")
  server <- httpuv::startPipeServer(socket, strtoi("177", 8L), api)
  on.exit(httpuv::stopServer(server), add = TRUE)
  log <- file.path(folder, "server.log")
  front <- serve_front_start(host, port, socket, settings, log, call)
  on.exit(front$kill(), add = TRUE)
  while (front$is_alive()) httpuv::service(1000)
  serve_front_failed("ended", log, call)
}

# The server, started and listening: a processx process that ends when its stdin closes,
# as it does when this R process ends however it ends.
serve_front_start <- function(host, port, socket, settings, log, call) {
  command <- core_call("serve_command", error_call = call)$argv
  front <- processx::process$new(
    command[[1]], unlist(command[-1]),
    stdin = "|", stdout = "|", stderr = log, cleanup = TRUE,
    # outside R's library path, as python_run_env says (Python's ssl, which uvicorn imports)
    env = c("current", LD_LIBRARY_PATH = "")
  )
  front$write_input(paste0(as_json(list(
    host = host, port = as.integer(port), backend = socket, max_bytes = settings$max_bytes,
    too_large = refusal(413L, "too_large", too_large_message(settings$max_bytes))$body
  )), "\n"))
  deadline <- Sys.time() + 30
  while (front$is_alive() && Sys.time() < deadline) {
    front$poll_io(200L)
    if ("ready" %in% front$read_output_lines()) return(front)
  }
  front$kill()
  serve_front_failed("did not start", log, call)
}

# The server's end or failure to start, as an error with the last lines it wrote.
serve_front_failed <- function(what, log, call) {
  said <- log_tail(log, 5L)
  gpukeras_abort(c(
    sprintf("The service's server (the process that listens on its port) %s.", what),
    if (length(said)) c(i = paste("It said:", paste(said, collapse = " "))),
    "Start gpu_serve() again; if this repeats, report it with the output of gpu_check()."
  ), "gpukeras_error_serve_front", call = call)
}
