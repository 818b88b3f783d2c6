# gpu_search() on a study in PostgreSQL that two R sessions share, as two machines
# would: both run the same call on the same database URL at the same time, and between
# them they run the `trials` asked for, each trial once. The server is a real one,
# started for the test on 127.0.0.1 and stopped after it. A URL's password (PostgreSQL's,
# or one in a query string) is never shown or saved (issue #59, item 4).

mark_slow()

# The folder of PostgreSQL's server programs (initdb, pg_ctl), or NULL: on the PATH,
# else Debian's and Ubuntu's /usr/lib/postgresql/<version>/bin (the newest).
postgres_bin <- function() {
  on_path <- Sys.which(c("initdb", "pg_ctl"))
  if (all(nzchar(on_path))) {
    return(dirname(normalizePath(on_path[["pg_ctl"]])))
  }
  found <- Sys.glob("/usr/lib/postgresql/*/bin")
  found <- found[file.exists(file.path(found, "initdb")) & file.exists(file.path(found, "pg_ctl"))]
  if (!length(found)) {
    return(NULL)
  }
  versions <- numeric_version(basename(dirname(found)), strict = FALSE)
  found[order(versions, decreasing = TRUE)][1]
}

# A throwaway PostgreSQL server on 127.0.0.1, on a free port, in a folder of its own,
# with the user `postgres` trusted without a password, or with `password` required:
# returns its URL (postgresql://postgres[:password]@127.0.0.1:PORT/postgres). The server is stopped and its folder
# removed when `env` ends. PostgreSQL refuses to run as root, so as root the server
# runs as the system user `postgres` (made by Debian's postgresql package). Skips when
# there is no server to run.
local_postgres <- function(env = parent.frame(), password = NULL) {
  testthat::skip_on_os("windows")
  bin <- postgres_bin()
  testthat::skip_if(
    is.null(bin),
    "no PostgreSQL server programs (initdb, pg_ctl) found: install PostgreSQL (Debian: the postgresql package)"
  )
  root <- identical(unname(Sys.info()[["effective_user"]]), "root")
  if (root) {
    testthat::skip_if(
      !nzchar(Sys.which("runuser")), "running as root, and no runuser to run PostgreSQL as another user"
    )
    testthat::skip_if(
      system2("id", c("-u", "postgres"), stdout = FALSE, stderr = FALSE) != 0L,
      "running as root, and there is no user `postgres` to run PostgreSQL as"
    )
  }
  run <- function(program, args) {
    command <- file.path(bin, program)
    said <- if (root) {
      suppressWarnings(system2("runuser", c("-u", "postgres", "--", command, args), stdout = TRUE, stderr = TRUE))
    } else {
      suppressWarnings(system2(command, args, stdout = TRUE, stderr = TRUE))
    }
    list(ok = is.null(attr(said, "status")), said = paste(said, collapse = "\n"))
  }
  # In /tmp rather than R's session folder, which only its owner can enter; short, for
  # the server's Unix socket (at most 107 characters).
  dir <- tempfile("gpukeras-postgres-", tmpdir = if (dir.exists("/tmp")) "/tmp" else tempdir())
  dir.create(dir, mode = "0700")
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  if (root) system2("chown", c("postgres", shQuote(dir)))
  data <- file.path(dir, "data")
  auth <- c("-A", "trust")
  if (!is.null(password)) {
    writeLines(password, file.path(dir, "password"))
    if (root) system2("chown", c("postgres", shQuote(file.path(dir, "password"))))
    auth <- c("-A", "scram-sha-256", paste0("--pwfile=", shQuote(file.path(dir, "password"))))
  }
  made <- run("initdb", c("-D", shQuote(data), auth, "-U", "postgres", "--no-sync"))
  if (!made$ok) stop("initdb failed: ", made$said)
  port <- free_ports(1L)
  # -l: the server writes to its log, not to the pipe system2() reads until it closes.
  options <- sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir)
  log <- file.path(dir, "server.log")
  started <- run(
    "pg_ctl", c("-D", shQuote(data), "-o", shQuote(options), "-l", shQuote(log), "-w", "-t", "60", "start")
  )
  if (!started$ok) {
    said <- tryCatch(paste(readLines(log), collapse = "\n"), error = function(e) "")
    stop("PostgreSQL did not start: ", started$said, "\n", said)
  }
  withr::defer(run("pg_ctl", c("-D", shQuote(data), "-m", "fast", "-w", "stop")), envir = env, priority = "first")
  sprintf("postgresql://postgres%s@127.0.0.1:%d/postgres", if (is.null(password)) "" else paste0(":", password), port)
}

# The Python driver gpu_search() reaches PostgreSQL through, or a skip.
skip_if_no_postgres_driver <- function() {
  skip_if_no_python()
  testthat::skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed in gpukeras' Python")
  testthat::skip_if_not(
    reticulate::py_module_available("psycopg2") || reticulate::py_module_available("psycopg"),
    "no PostgreSQL driver in gpukeras' Python: run install_gpukeras(extras = \"postgresql\")"
  )
}

# One query's rows through the server's own client (psql beside pg_ctl), each row a
# string with its columns separated by "|": the storage as it is, not as Optuna reads it.
postgres_query <- function(url, sql) {
  port <- sub(".*:([0-9]+)/.*", "\\1", url)
  psql <- file.path(postgres_bin(), "psql")
  if (!file.exists(psql)) psql <- Sys.which("psql")
  args <- c("-h", "127.0.0.1", "-p", port, "-U", "postgres", "-d", "postgres", "-A", "-t", "-c", shQuote(sql))
  said <- suppressWarnings(system2(psql, args, stdout = TRUE, stderr = TRUE))
  if (!is.null(attr(said, "status"))) stop("psql failed: ", paste(said, collapse = "\n"))
  said
}

# The search both sessions run, word for word (the study records a digest of model_fn's
# code: the same code, the same study). A learning rate on a continuous scale: two
# trials that share one were drawn alike.
search_model_fn <- quote(function(params) {
  keras <- gpu_keras()
  model <- keras$Sequential(list(
    keras$Input(shape = list(4L)),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(3L, activation = "softmax")
  ))
  model$compile(optimizer = keras$optimizers$Adam(params$learning_rate), loss = "sparse_categorical_crossentropy")
  model
})

search_space <- quote(list(learning_rate = search_float(1e-3, 1e-1, log = TRUE)))
search_call <- quote(gpu_search(
  model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species),
  space = space, trials = 6, storage = url, seed = 1, workers = 1, pruner = "none",
  epochs = 1, batch_size = 32
))

test_that("two sessions running the same gpu_search() on one PostgreSQL study run its trials between them, each once", {
  skip_if_no_postgres_driver()
  url <- local_postgres()
  # a new database: no study, no table
  expect_identical(postgres_query(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), "0")

  session <- bquote({
    model_fn <- .(search_model_fn)
    url <- .(url)
    space <- .(search_space)
    search <- .(search_call)
    list(pid = Sys.getpid(), trials = as.list(search$trials), best = search$best$number)
  })
  call <- fresh_r_call(session, character(), character(), list())
  sessions <- lapply(1:2, function(i) callr::r_bg(call$func, args = call$args, supervise = TRUE))
  withr::defer(for (s in sessions) s$kill_tree())
  deadline <- Sys.time() + 240
  while (any(vapply(sessions, function(s) s$is_alive(), logical(1))) && Sys.time() < deadline) {
    Sys.sleep(0.2)
  }
  alive <- vapply(sessions, function(s) s$is_alive(), logical(1))
  if (any(alive)) {
    for (s in sessions) s$kill_tree()
    trials <- postgres_query(url, "SELECT number, state FROM trials ORDER BY number")
    fail(sprintf("the two searches had not ended after 240 s (trials: %s)", paste(trials, collapse = ", ")))
    return()
  }
  results <- lapply(sessions, function(s) s$get_result())
  pids <- vapply(results, function(r) r$pid, integer(1))

  # Each session's result lists the study's six trials, its own and the other's: the
  # other's last may still have been running when this one ended.
  for (result in results) {
    expect_setequal(result$trials$number, 0:5)
    expect_true(all(result$trials$state %in% c("complete", "running")))
  }

  # The storage as it is: six trials trained, each by one of the two sessions (the
  # owner of a trial is the session that asked for it), numbered once; none left
  # running. A trial asked past the budget (both asking at the end) is recorded failed
  # and uncounted, and was never run.
  owners <- postgres_query(url, paste(
    "SELECT t.number, t.state, a.value_json FROM trials t",
    "JOIN trial_user_attributes a ON a.trial_id = t.trial_id AND a.key = 'gpukeras_owner'",
    "ORDER BY t.number"
  ))
  owners <- do.call(rbind, lapply(strsplit(owners, "|", fixed = TRUE), function(row) {
    pid <- as.integer(sub('.*"pid": *([0-9]+).*', "\\1", row[3]))
    data.frame(number = as.integer(row[1]), state = row[2], pid = pid)
  }))
  expect_identical(owners$number, 0:5)
  expect_identical(unique(owners$state), "COMPLETE")
  expect_setequal(owners$pid, pids)
  expect_identical(postgres_query(url, "SELECT count(*) FROM trials WHERE state = 'RUNNING'"), "0")
  expect_identical(postgres_query(url, "SELECT count(*) = count(DISTINCT number) FROM trials"), "t")

  # The same call once more: the study holds its six trials, so nothing runs, and it
  # reads them all complete.
  asked <- postgres_query(url, "SELECT count(*) FROM trials")
  model_fn <- eval(search_model_fn)
  space <- eval(search_space)
  again <- eval(search_call)
  expect_identical(postgres_query(url, "SELECT count(*) FROM trials"), asked)
  expect_identical(sort(again$trials$number), 0:5)
  expect_identical(unique(again$trials$state), "complete")
  # Both sessions drew with the same seed, yet no two trials have the same learning
  # rate: a trial's draw is seeded by its number, not by how many the session drew.
  expect_identical(anyDuplicated(again$trials$learning_rate), 0L)
  # each session's best is the best of the trials complete when it ended, so no better
  for (result in results) {
    expect_gte(again$trials$value[again$trials$number == result$best], again$best$value)
  }
  expect_identical(postgres_query(url, "SELECT count(*) FROM trials WHERE state = 'COMPLETE'"), "6")

  # Another search on the same study is refused, and leaves it as it was.
  expect_error(
    eval(search_call, list(space = list(learning_rate = search_float(1e-4, 1e-1, log = TRUE)))),
    class = "gpukeras_error_search_mismatch"
  )
  expect_identical(postgres_query(url, "SELECT count(*) FROM trials WHERE state = 'COMPLETE'"), "6")
})

test_that("on JAX a search's populations report to a PostgreSQL study, each trial once", {
  skip_if_no_postgres_driver()
  skip_if_not(reticulate::py_module_available("jax"), "JAX is not installed")
  url <- local_postgres()
  # the learning rate gpu_fit()'s, not model_fn's: the trials are of one shape, one population
  # (a rate model_fn takes makes each trial a group of its own, trained as a process)
  session <- bquote({
    model_fn <- function(params) {
      keras <- gpu_keras()
      model <- keras$Sequential(list(
        keras$Input(shape = list(4L)), keras$layers$Dense(8L, activation = "relu"),
        keras$layers$Dense(3L, activation = "softmax")
      ))
      model$compile(optimizer = "adam", loss = "sparse_categorical_crossentropy")
      model
    }
    search <- gpu_search(
      model_fn, list(x = as.matrix(iris[, 1:4]), y = iris$Species), space = list(),
      learning_rate = search_float(1e-3, 1e-1, log = TRUE), trials = 6, storage = .(url), seed = 1,
      workers = 1, pruner = "none", epochs = 1, batch_size = 32
    )
    unclass(search)
  })
  call <- fresh_r_call(session, c(KERAS_BACKEND = "jax"), character(), list())
  search <- callr::r(call$func, args = call$args, timeout = 240)
  expect_identical(search$trained, "populations")
  expect_identical(search$trials$state, rep("complete", 6))
  expect_identical(postgres_query(url, "SELECT count(*) FROM trials WHERE state = 'COMPLETE'"), "6")
  # each trial reported its epoch to the study from the population
  expect_identical(postgres_query(url, "SELECT count(*) FROM trial_intermediate_values"), "6")
})

# A search on a storage URL with `secret` in it: what it prints, says, raises and saves
# (its result saved with saveRDS(), the best model's folder), gathered as text and files.
# A background job's storage argument reaches its process through its environment. And
# while each trial trains, its worker looks for `secret` in the files of the process that
# started it (looking_model_fn(): `looked`).
search_artifacts <- function(url, wrong_url, secret) {
  shown <- character()
  keep <- function(...) shown <<- c(shown, ...)
  looked <- tempfile("looked-")
  model_fn <- looking_model_fn(eval(search_model_fn), secret, looked)
  space <- eval(search_space)
  data <- list(x = as.matrix(iris[, 1:4]), y = iris$Species)
  run <- function(background = FALSE, ...) {
    args <- utils::modifyList(list(
      model_fn, data, space = space, trials = 2, storage = url, seed = 1, workers = 1, pruner = "none",
      epochs = 1, batch_size = 32, background = background
    ), list(...))
    keep(utils::capture.output(made <- do.call(gpu_search, args), type = "output"))
    made
  }
  said <- function(expr) {
    tryCatch(expr, error = function(e) {
      keep(conditionMessage(e), utils::capture.output(print(e)))
      e
    })
  }
  gather <- function() {
    # in the background, cancelled once a trial is done: its print and status, then the
    # same call here, which resumes it, and once more in the background, to its end
    job <- run(background = TRUE)
    repeat {
      status <- gpu_job_status(job)
      if (status$done >= 1 || status$state != "running") break
      Sys.sleep(0.2)
    }
    keep(utils::capture.output(print(job)), format(status), unlist(unclass(status)))
    gpu_job_cancel(job)
    keep(utils::capture.output(print(job)), format(gpu_job_status(job)), unlist(unclass(gpu_job_status(job))))
    search <- run()
    keep(utils::capture.output(print(search)), format(search), unlist(search[c("storage", "study", "best")]))
    rds <- tempfile(fileext = ".rds")
    saveRDS(search, rds)
    again <- run(background = TRUE)
    waited <- gpu_job_wait(again, timeout = 120)
    keep(utils::capture.output(print(again)), format(gpu_job_status(again)), format(waited))
    # errors: another search on the study, a wrong password
    mismatch <- said(run(space = list(learning_rate = search_float(1e-4, 1e-1, log = TRUE))))
    refused <- said(run(storage = wrong_url))
    list(
      search = search, job = job, again = again, mismatch = mismatch, refused = refused,
      files = c(rds, list.files(search_storage(url, "gpukeras", environment())$models, full.names = TRUE)),
      looked = looked
    )
  }
  # messages and warnings are kept too (each warning once: SQLAlchemy warns about a
  # query string SQLite ignores at every open)
  gathered <- withCallingHandlers(gather(), message = function(m) keep(conditionMessage(m)), warning = function(w) {
    keep(conditionMessage(w))
    invokeRestart("muffleWarning")
  })
  c(list(shown = shown), gathered)
}

# No worker found the secret in its owner's files while its trial trained
# (search_artifacts()): workers of the session's search, and of a background one.
expect_never_in_workers_files <- function(artifacts) {
  owners <- expect_looked_and_not_held(artifacts$looked)
  expect_true(tempdir() %in% owners)
  expect_gte(length(owners), 2L)
}

expect_never_shown <- function(artifacts, secret) {
  shown <- artifacts$shown
  expect_gt(length(shown), 20L)
  said <- grep(secret, shown, fixed = TRUE, value = TRUE)
  expect(!length(said), sprintf("shown with the password: %s", paste(said, collapse = " | ")))
  holding <- Filter(function(file) file_holds(file, secret), artifacts$files)
  expect(!length(holding), sprintf("saved with the password: %s", paste(unlist(holding), collapse = ", ")))
}

test_that("a study in PostgreSQL with a password never shows it: prints, job status, results, errors and saved files", {
  skip_if_no_postgres_driver()
  # (not written whole: this file's lines travel with what the tests here run in other R
  # processes, and callr's files that start those stay in the session's temporary folder)
  secret <- paste0("S3cret", "PW-59")
  url <- local_postgres(password = secret)
  expect_match(url, secret, fixed = TRUE)
  wrong <- sub(secret, "Wr0ngPW-59", url, fixed = TRUE)
  artifacts <- search_artifacts(url, wrong, secret)
  expect_never_shown(artifacts, secret)
  expect_never_shown(artifacts, "Wr0ngPW-59")
  expect_never_in_workers_files(artifacts)
  masked <- sub("//[^/]*@", "//***@", url)
  expect_identical(artifacts$search$storage, masked)
  expect_identical(gpu_job_status(artifacts$job)$storage, masked)
  expect_match(
    format(gpu_job_status(artifacts$job)), sprintf("The study is kept in %s", masked), fixed = TRUE, all = FALSE
  )
  expect_match(
    format(artifacts$search), sprintf("Study:      'gpukeras' in %s, seed 1", masked), fixed = TRUE, all = FALSE
  )
  expect_s3_class(artifacts$mismatch, "gpukeras_error_search_mismatch")
  expect_match(conditionMessage(artifacts$mismatch), masked, fixed = TRUE)
  expect_s3_class(artifacts$refused, "gpukeras_error_search_storage")
  expect_match(conditionMessage(artifacts$refused), "//***@127.0.0.1", fixed = TRUE)
})

test_that("a password in an SQLite URL's query string is never shown either", {
  skip_if_no_python()
  skip_if_not(reticulate::py_module_available("optuna"), "optuna is not installed in gpukeras' Python")
  secret <- paste0("S3cret", "QS-59") # (not written whole: see above)
  dir <- withr::local_tempdir()
  url <- sprintf("sqlite:///%s?password=%s", file.path(dir, "search.db"), secret)
  wrong <- sprintf("sqlite:///%s?password=Wr0ngQS-59", file.path(dir, "other", "search.db"))
  artifacts <- search_artifacts(url, wrong, secret)
  expect_never_shown(artifacts, secret)
  expect_never_shown(artifacts, "Wr0ngQS-59")
  expect_never_in_workers_files(artifacts)
  # nor do the processes the session keeps for the next gpu_cv() or gpu_search(): the
  # search's workers, which had the URL whole in their environment, were ended
  skip_if_not(dir.exists("/proc/self"), "no /proc to read a process's environment from")
  pids <- vapply(the$spares, function(worker) worker$session$get_pid(), numeric(1))
  expect_gte(length(pids), 1L)
  expect_false(any(vapply(sprintf("/proc/%d/environ", pids), file_holds, NA, secret)))
  expect_identical(artifacts$search$storage, sub(secret, "***", url, fixed = TRUE))
})
