# What gpu_fit(background = TRUE) carries to the training child besides the
# model (job.py): the strategy, the data and the validation data (see job.R
# for the job folder, job-child.R for the other side).

# A one-device or mirrored strategy goes as its type and devices, made again
# by gpu_strategy() in the child (after its gpu_setup(), so logical CPU
# devices exist there too).
carry_strategy <- function(strategy, call = caller_env()) {
  made <- core_call("describe_strategy", strategy = strategy, error_call = call)
  if (!made$type %in% c("one_device", "mirrored")) {
    not_carriable(
      sprintf("A %s strategy", made$type),
      "Train on several machines with gpu_launch(), or in the session (background = FALSE).", call = call
    )
  }
  list(type = made$type, devices = as.character(unlist(made$devices)))
}

# How the child gets `data` (as fit_data() read it): R data as .npy files;
# a gpu_dataset() as the call that made it (files) or as its arrays, as .npy
# files, and its options (R data); gpu_text_data()'s texts, labels and options
# as an .rds file (the preset's tokenizer travels in the model).
carry_data <- function(data, dir, name, call = caller_env()) {
  if (data$kind == "python") {
    recipe <- attr(data$dataset, "gpukeras_recipe")
    info <- attr(data$dataset, "gpukeras")
    if (!is.null(recipe$texts)) {
      file <- job_file(dir, sprintf("%s-texts.rds", name))
      write_rds_atomic(recipe$texts, file, carried_what(name, basename(file)), call = call)
      return(list(kind = "texts", file = file))
    }
    if (is.null(recipe)) {
      not_carriable(
        sprintf("`%s` (a dataset not made by gpu_dataset())", name),
        "Give gpu_fit() the R data itself, list(x = , y = ) (the child memory-maps it), or make it with gpu_dataset().",
        call = call
      )
    }
    if (!is.null(recipe$map %||% recipe$options$map)) {
      not_carriable(
        sprintf("`%s` (a gpu_dataset() with a `map` function)", name), "Train it with background = FALSE.", call = call
      )
    }
    if (!is.null(recipe$arrays)) {
      if (recipe$options$validation_split > 0 && is.null(recipe$options$seed)) {
        not_carriable(
          sprintf("`%s` (a gpu_dataset() split into train and validation rows at random)", name),
          "Give gpu_dataset() a `seed`: the child then splits the rows as this session did.", call = call
        )
      }
      recipe$arrays <- save_arrays(recipe$arrays, dir, name, call = call)
    }
    return(list(kind = "dataset", recipe = recipe, role = info$role %||% "train"))
  }
  arrays <- fit_arrays(data, call = call)
  files <- c(
    list(kind = "arrays"),
    save_arrays(list(x = arrays[[1]], y = arrays[[2]], sample_weight = arrays[[3]]), dir, name, call = call)
  )
  rm(arrays)
  files
}

# `arrays$x` (an array, or a named list of them), `arrays$y` and `arrays$sample_weight` as
# .npy files (the core's job_save_arrays). A full disk is a gpukeras_error_job_write naming
# the file (numpy's own error is a bare OSError, "N requested and M written").
save_arrays <- function(arrays, dir, name, call = caller_env()) {
  saved <- core_call("job_save_arrays", arrays = arrays, job_dir = dir, name = name, error_call = call)
  if (!is.null(saved$failed)) {
    job_write_failed(dir, carried_what(name, saved$failed), call = call)
  }
  saved$files
}

# A carried data file in a job_write_failed() error: "The training data (data-x.npy)".
carried_what <- function(name, file) sprintf("The %s data (%s)", if (name == "data") "training" else name, file)

# The arrays save_arrays() wrote (`files`), memory-mapped: pages are read from the files as
# training needs them. With `rows` (R's row numbers), those rows alone, each one NumPy copy
# in C order (gpu_fit() takes NumPy data as it is).
load_arrays <- function(files, rows = NULL) {
  rows <- if (!is.null(rows)) as.list(as.integer(rows) - 1L)
  load <- function(path) core_call_python("job_load_array", path = path, rows = rows)
  x <- if (is.list(files$x)) do.call(reticulate::dict, c(lapply(files$x, load), convert = FALSE)) else load(files$x)
  c(
    list(x = x, y = if (!is.null(files$y)) load(files$y)),
    if (!is.null(files$sample_weight)) list(sample_weight = load(files$sample_weight))
  )
}
