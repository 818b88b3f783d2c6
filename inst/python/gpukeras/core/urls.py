"""A URL as gpukeras may show it: its password masked, for the storages and tracking servers
that users name by URL (gpu_search()'s database, gpu_track()'s MLflow server)."""

from __future__ import annotations

import re

# A password given in a URL's query string (``?password=``; libpq also reads these keys).
_QUERY_SECRET = re.compile(r"((?:^|&)(?:password|passwd|pwd)=)[^&#]*", re.IGNORECASE)


def safe_url(url: str) -> str:
    """``url`` without its password (after the user's name, or ``?password=`` in the query
    string), for whatever is shown or saved: messages, prints, job status, results."""
    scheme, sep, rest = url.partition("://")
    where, mark, query = rest.partition("?")
    if "@" in where:
        credentials, _, host = where.rpartition("@")
        user, colon, _ = credentials.partition(":")
        where = f"{user}:***@{host}" if colon else where
    query = _QUERY_SECRET.sub(r"\1***", query)
    return f"{scheme}{sep}{where}{mark}{query}"
