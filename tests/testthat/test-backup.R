# gpu_fit(backup = gpu_backup(dir)): what the folder may be, what is kept in it, and
# the classed errors of backups and of the user's own callbacks. Crashes and
# resuming are in test-fit.R; the core's tests (python/tests/test_backup.py)
# damage backups, fill disks and plant links.

test_that("the user's own files in backup_dir are kept, whatever their names", {
  skip_if_no_python()
  folder <- withr::local_tempdir()
  mine <- c("weights-best.weights.h5", "weights-000001.weights.h5", "notes.txt")
  for (name in mine) writeLines(name, file.path(folder, name))
  fit <- gpu_fit(tiny_model(), regression_data(64), epochs = 2, batch_size = 16, seed = 1,
                 backup = gpu_backup(folder, every = 2), verbose = 0, monitor = FALSE)
  expect_identical(fit$history$epoch, 1:2)
  expect_setequal(list.files(folder, all.files = TRUE, no.. = TRUE), mine)
  for (name in mine) expect_identical(readLines(file.path(folder, name)), name)
})

test_that("a backup_dir other users may write to is refused, saying why and what to do", {
  skip_if_no_python()
  shared <- withr::local_tempdir()
  Sys.chmod(shared, "1777", use_umask = FALSE)
  error <- expect_error(
    gpu_fit(tiny_model(), regression_data(64), backup = gpu_backup(shared), verbose = 0),
    class = "gpukeras_error_backup_dir_unsafe"
  )
  expect_match(conditionMessage(error), "can be written by every user (mode 1777", fixed = TRUE)
  expect_match(conditionMessage(error), sprintf("chmod go-w %s", normalizePath(shared)), fixed = TRUE)
  expect_identical(list.files(shared, all.files = TRUE, no.. = TRUE), character())
})

test_that("a backup_dir of another user is refused (root gives a folder to nobody)", {
  skip_if_no_python()
  skip_on_os("windows")
  if (!identical(unname(Sys.info()[["effective_user"]]), "root")) skip("needs root to chown")
  shared <- withr::local_tempdir()
  stopifnot(system2("chown", c("nobody", shared)) == 0)
  expect_error(
    gpu_fit(tiny_model(), regression_data(64), backup = gpu_backup(shared), verbose = 0),
    "belongs to nobody",
    class = "gpukeras_error_backup_dir_unsafe"
  )
})

test_that("an error in the user's own callback has its own class, not 'please report it'", {
  skip_if_no_python()
  reticulate::py_run_string(paste(
    "import keras",
    "class Broken(keras.callbacks.Callback):",
    "    def on_epoch_end(self, epoch, logs=None):",
    "        raise ValueError('my callback is broken')",
    sep = "\n"
  ))
  error <- expect_error(
    gpu_fit(tiny_model(), regression_data(64), epochs = 2, verbose = 0,
            callbacks = reticulate::py$Broken()),
    class = "gpukeras_error_callback"
  )
  expect_match(
    conditionMessage(error),
    paste0(
      "^Your callback Broken[.]on_epoch_end raised ValueError: my callback is broken \\(at <string>, line 4\\)[.] ",
      "Training stopped in epoch 1[.]"
    )
  )
  expect_false(grepl("please report", conditionMessage(error)))
})
