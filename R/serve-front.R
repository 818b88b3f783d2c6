# gpu_serve()'s front: the port clients reach is a process of its own (the core's
# serve front, a Python script of the standard library alone), which refuses a body over
# max_bytes from its head, on none of R's threads, and forwards every other request to
# httpuv on a loopback port of R's (serve_guard() makes the other checks there, as
# before). httpuv decides from a request's headers only on R's thread and reads what
# the client sends meanwhile on a thread that shares R's core: clients that sent 50 MB
# bodies in a loop took most of the service's CPU (bench/results/serve-hostile-*).

# Serve `app` (httpuv's) on `host`:`port` behind the front until interrupted, or until
# the front ends (an error: the port no longer answers).
serve_behind_front <- function(app, host, port, settings, call) {
  backend <- free_ports(1L, call = call)
  server <- httpuv::startServer("127.0.0.1", backend, app)
  on.exit(httpuv::stopServer(server), add = TRUE)
  log <- tempfile("gpukeras-serve-front-", fileext = ".log")
  on.exit(unlink(log), add = TRUE)
  front <- serve_front_start(host, port, backend, settings, log, call)
  on.exit(front$kill(), add = TRUE)
  while (front$is_alive()) httpuv::service(1000)
  serve_front_failed("ended", log, call)
}

# The front, started and listening: a processx process that ends when its stdin
# closes, as it does when this R process ends however it ends.
serve_front_start <- function(host, port, backend, settings, log, call) {
  command <- core_call("serve_front_command", error_call = call)$argv
  front <- processx::process$new(
    command[[1]], unlist(command[-1]),
    stdin = "|", stdout = "|", stderr = log, cleanup = TRUE
  )
  front$write_input(paste0(as_json(list(
    host = host, port = as.integer(port), backend_port = as.integer(backend), max_bytes = settings$max_bytes,
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

# The front's end or failure to start, as an error with the last lines it wrote.
serve_front_failed <- function(what, log, call) {
  said <- log_tail(log, 5L)
  gpukeras_abort(c(
    sprintf("The service's front (the process that listens on its port) %s.", what),
    if (length(said)) c(i = paste("It said:", paste(said, collapse = " "))),
    "Start gpu_serve() again; if this repeats, report it with the output of gpu_check()."
  ), "gpukeras_error_serve_front", call = call)
}
