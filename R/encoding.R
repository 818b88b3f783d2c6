# How R data becomes numbers: the encoding, one object of the core (data/encoding.py: its
# rules, levels matched by name, new data checked against it), made once from R's account of
# the training data; R hands each column over once, as it is (frame_handover()).

# The encoding of data `x` (a part, or a named list of them; `parts`, as data_parts() gives
# them) and labels `y`, made by the core from R's account of them (data/recording.py record;
# `factors` as gpu_dataset() takes it, NULL for new data of a model without one); with the
# training `encoding` (new data), the one the core says the data is encoded by, once it has
# checked the data against it (an image array's largest pixel too). Its warnings are `call`'s.
data_encoding <- function(x, y = NULL, na = "error", call = caller_env(), factors = "one_hot", encoding = NULL,
                          parts = data_parts(x, call)) {
  made <- core_call(
    "data_encoding",
    inputs = Map(part_spec, parts), y = if (!is.null(y)) label_spec(y), several = is.list(x) && !is.data.frame(x),
    na = na, factors = if (is.null(names(factors))) factors[[1]] else as.list(factors), encoding = encoding,
    highest = if (!is.null(encoding$images) && is.numeric(x) && length(x)) max(x, na.rm = TRUE), error_call = call
  )
  raise_core_warnings(made$warnings, call = call)
  encoding_from_plain(made$encoding)
}

# R's account of an input, which the core makes its spec from: a data.frame handed over as
# its columns (frame_handover(), whose types and levels the core reads); an array's shape
# after the rows, column names and R's words for it; a NumPy array itself.
part_spec <- function(part) {
  if (is_numpy_part(part)) return(part)
  if (is.data.frame(part)) return(frame_handover(part, numbers = FALSE))
  shape <- if (is.null(dim(part))) 1L else as.integer(dim(part)[-1])
  list(type = "array", shape = shape, names = if (length(shape) == 1L) colnames(part), describe = describe(part))
}

# Labels' account: a factor (a character vector as the factor of its values) as its levels,
# those no row has too, and its codes; else numbers; with R's words for them.
label_spec <- function(y) {
  factor <- is.factor(y) || is.character(y) && is.null(dim(y))
  codes <- if (factor) if (is.factor(y)) y else factor(y)
  values <- if (factor) array(as.integer(codes))
  list(type = if (factor) "factor" else "numeric", levels = levels(codes), values = values, describe = describe(y))
}

# A data.frame part `name` as the core's encoder takes it (data/encoding.py, which makes the
# model's float32 matrix and raises for unseen levels, wrong types and NA): each column once
# (with the training input's `spec`, its columns: a data.frame's, or a matrix's names, whose
# columns the core takes as numbers), a number column as doubles, a factor (a character
# column as the factor of its values) as its integer codes and levels; with `numbers` FALSE
# (what the core records the encoding from) its type and levels alone.
frame_handover <- function(df, name = NULL, spec = NULL, unknown = "error", numbers = TRUE) {
  if (!is.null(spec)) df <- df[spec$names %||% names(spec$columns)]
  columns <- lapply(df, function(values) {
    given <- list(class = class(values)[1], typeof = typeof(values), appearance = is.character(values))
    if (is.character(values)) values <- factor(values)
    given$number <- is.numeric(values) || is.logical(values) # else, not a factor, of a type the core refuses
    if (!is.factor(values)) return(c(list(values = if (numbers && given$number) array(as.double(values))), given))
    c(list(values = if (numbers) array(as.integer(values)), levels = as.list(levels(values))), given)
  })
  list(gpukeras_frame = list(name = name, spec = spec$columns, unknown = unknown, columns = columns))
}

# Factor (or character) labels as the core takes them (data/encoding.py label_codes): R's
# codes and levels, and the training `levels` the core matches them to by name.
labels_handover <- function(y, levels) {
  list(gpukeras_labels = c(label_spec(y)[c("values", "levels")], list(training = levels, appearance = is.character(y))))
}
