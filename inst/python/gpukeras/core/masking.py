"""The one masking rule: no credential in what gpukeras prints, keeps or raises.

A URI loses all of its user information (``https://TOKEN@h`` and ``https://u:p@h`` both
become ``https://***@h``: a user's name alone may be a token) and the value of every
query key whose name says it is a secret: a password, token, key, secret, credential,
authorization or signature, case-insensitively and wherever the word stands in the name
(``password``, ``sslpassword``, ``access_token``, ``api_key``, ``X-Amz-Signature``), in
its query or its fragment (OAuth's ``#access_token=``). Text (a message, an error, a
traceback) has every URI in it masked so, every query string in it too (an HTTP
library's report of a request's path), and the values of the secret variables it is
given. A variable's name says it is a secret by the same words (``is_secret_name``).

Every URI the core shows (tracking stores, study storages, reports) goes through
``mask_uri``; every message R receives from the core goes through ``mask_text``
(``bridge``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

MASK = "***"
# The words a name holds when its value is a secret (in a query key, a variable's name).
_SECRET_WORDS = r"pass|pwd|token|key|secret|credential|auth|sig"
_SECRET_NAME = re.compile(_SECRET_WORDS, re.IGNORECASE)
# A query string's key=value pair (separated by & or ;) whose key says it is a secret.
_QUERY_PAIR = re.compile(r"(^|[&;])([^&;=#]*(?:" + _SECRET_WORDS + r")[^&;=#]*=)[^&;#]*", re.I)
# A URI in text: a scheme, "://", then anything up to white space or a quote.
_URI_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
# A query string in text without its URI (a request's path, as an HTTP library reports it).
_QUERY_IN_TEXT = re.compile(r"\?[^\s'\"<>`?]+")
# The secrets gpukeras passes on to a client by name (MLflow's), masked wherever they show.
SECRET_VARIABLES = ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")


def is_secret_name(name: str) -> bool:
    """Whether a name (a query key, a variable) says its value is a secret."""
    return bool(_SECRET_NAME.search(name))


def mask_uri(uri: str) -> str:
    """``uri`` with no user information and no secret query value; anything that is not a
    URI (a folder) as it is."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    where, mark, query = rest.partition("?")
    if "@" in where:  # the last "@" before the query: a password may hold "@", "/" or "#"
        where = f"{MASK}@{where.rpartition('@')[2]}"
    if mark:
        query, hash_mark, fragment = query.partition("#")
    else:  # a fragment without a query
        where, hash_mark, fragment = where.partition("#")
    masked = f"{_masked_query(query)}{hash_mark}{_masked_query(fragment)}"
    return f"{scheme}{sep}{where}{mark}{masked}"


def _masked_query(query: str) -> str:
    return _QUERY_PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", query)


def mask_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every URI and query string in it masked (``mask_uri``), and no value
    of ``secrets`` (nor of ``SECRET_VARIABLES`` as this process has them) left in it."""
    text = _URI_IN_TEXT.sub(lambda m: mask_uri(m.group(0)), text)
    text = _QUERY_IN_TEXT.sub(lambda m: _masked_query(m.group(0)), text)
    values = [*secrets, *(os.environ.get(name) for name in SECRET_VARIABLES)]
    for secret in sorted({value for value in values if value}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
