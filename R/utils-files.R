# Files written whole or not at all: the one way R writes a file a reader must never see
# half of (a job's files, a user's .Renviron, a report).

# Make `bytes` (a raw vector) the content of `path`: written to a new file beside it,
# counted (a full disk shows only as a short file, or as a warning when the connection
# closes, which must still complete), then renamed over it, keeping an existing file's
# permissions. A link at `path` is replaced, not followed; the old file stays whole when
# anything fails. TRUE, or why not (a string). `bytes` is forced first: a warning while
# it is computed (a job's whole work can be that promise) is the caller's, not a failed write.
write_file_atomic <- function(path, bytes) {
  force(bytes)
  temporary <- tempfile(paste0(".", basename(path), "-"), tmpdir = dirname(path))
  on.exit(unlink(temporary))
  # A step fails by an error or a warning; one that warned still completes (a close).
  succeeds <- function(step) {
    warned <- FALSE
    done <- withCallingHandlers(tryCatch({
      step
      TRUE
    }, error = function(e) FALSE), warning = function(w) {
      warned <<- TRUE
      invokeRestart("muffleWarning")
    })
    done && !warned
  }
  connection <- tryCatch(file(temporary, "wb"), error = function(e) NULL, warning = function(w) NULL)
  if (is.null(connection)) return("it could not be created")
  # `&`, not `&&`: the connection is closed whether or not the write failed.
  written <- succeeds(writeBin(bytes, connection)) & succeeds(close(connection))
  if (!written || !isTRUE(file.size(temporary) == length(bytes))) {
    return("it was not written whole: is the disk full?")
  }
  if (file.exists(path)) Sys.chmod(temporary, file.mode(path))
  if (!file.rename(temporary, path)) return("it could not be renamed into place")
  TRUE
}
