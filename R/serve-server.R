# gpu_serve()'s server: a Python process of its own (the core's serve/server.py, on uvicorn
# and h11), which loads the model gpu_save() wrote and answers every request.

# The server, started and listening: a processx process that ends when its stdin closes,
# as it does when this R process ends however it ends. A port it cannot listen on is a
# classed error; one open beyond this machine without a token, a warning (the core's).
serve_start <- function(settings, log, call) {
  command <- core_call(
    "serve_command", host = settings$host, port = settings$port, token = !is.null(settings$token), error_call = call
  )
  raise_core_warnings(command$warnings)
  command <- command$argv
  server <- processx::process$new(
    command[[1]], unlist(command[-1]),
    stdin = "|", stdout = "|", stderr = log, cleanup = TRUE,
    # outside R's library path, as python_run_env says (Python's ssl, which uvicorn imports)
    env = c("current", LD_LIBRARY_PATH = "")
  )
  server$write_input(paste0(jsonlite::toJSON(settings, auto_unbox = TRUE, null = "null", digits = NA), "\n"))
  deadline <- Sys.time() + 300
  repeat {
    # alive before reading: a server that has exited has written all it will, so what it
    # said before exiting (port_in_use) is read, not lost to the check after the read
    alive <- server$is_alive()
    said <- server$read_output_lines()
    if ("ready" %in% said) return(server)
    if ("port_in_use" %in% said) {
      gpukeras_abort(c(
        sprintf(
          "Cannot listen on %s port %d: it is in use, or not this machine's address, or needs privileges.",
          settings$host, settings$port
        ),
        "Choose another port (e.g. port = 8001), or stop what listens there."
      ), "gpukeras_error_port_in_use", call = call)
    }
    if (!alive || Sys.time() > deadline) break
    server$poll_io(200L)
  }
  server$kill()
  serve_server_failed("did not start", log, call)
}

# The server's end or failure to start, as an error with the last lines it wrote.
serve_server_failed <- function(what, log, call) {
  said <- log_tail(log, 5L)
  gpukeras_abort(c(
    sprintf("The service's server (the process that listens on its port) %s.", what),
    if (length(said)) c(i = paste("It said:", paste(said, collapse = " "))),
    "Start gpu_serve() again; if this repeats, report it with the output of gpu_check()."
  ), "gpukeras_error_serve_server", call = call)
}
