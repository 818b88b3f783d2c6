# Where a gpu_search() keeps its study: a folder of this user's (its journal and models)
# or a database URL (its best model in this session's temporary folder).

# `storage` as the study's database URL and the folder for the best model.
search_storage <- function(storage, study, call) {
  storage <- storage %||% tempfile("gpukeras-search-study-")
  check_string(storage, call = call)
  if (is_database_url(storage)) {
    # A study in a database keeps its best model in this session's temporary folder, one
    # folder per database and study (named by a digest: the URL may hold a password).
    return(list(
      url = storage, folder = NULL,
      models = file.path(tempdir(), paste0("gpukeras-search-", substr(rlang::hash(c(storage, study)), 1, 12)))
    ))
  }
  # made for this user alone, and refused when another user could swap what is in it
  # (gpu_backup()'s rules), or when its study or models is a link; the study is its journal
  # (or an older gpukeras' search.db, resumed there)
  checked <- core_call("search_folder", folder = path.expand(storage), error_call = call)
  list(url = checked$storage, folder = checked$folder, models = file.path(checked$folder, "models"))
}

is_database_url <- function(storage) grepl("^[a-z][a-z0-9+]*://", storage)
