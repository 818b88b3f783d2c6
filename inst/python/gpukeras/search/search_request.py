"""gpu_search()'s request as its study records it (the space, the model function's digest,
the objective and its direction, the data's shape, gpu_fit()'s arguments): the digest that
tells the same search from another, and what differs between the study's request and a new
call's, each part named with both values as R writes them ("gpu_fit()'s `epochs` is 3 in
the study, 5 in this call"; a searched value as ``search_int(4, 32)``), for the refusal
``search.open_study`` raises."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from gpukeras.core.r_words import r_number

# What each part of a search's request is, in a mismatch's message.
REQUEST_PARTS = {
    "space": "the search space",
    "model_fn": "the model function",
    "objective": "the objective",
    "direction": "the direction",
    "data": "the data",
    "fit": "gpu_fit()'s",
}
# The longest value a mismatch's message shows whole.
SHOWN_CHARACTERS = 60


def digest(request: dict[str, Any]) -> str:
    """The request's SHA-256, over its JSON with sorted keys: equal for equal requests."""
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def differences(stored: dict[str, Any], request: dict[str, Any]) -> list[str]:
    """What differs between the study's request and this call's, each part or argument
    named with both values: "gpu_fit()'s `epochs` is 3 in the study, 5 in this call"."""
    said = []
    for key in request:
        before, now = stored.get(key), request.get(key)
        if before == now:
            continue
        name = REQUEST_PARTS.get(key, key)
        if key == "model_fn":
            said.append("the model function differs (its arguments or body)")
        elif isinstance(before, dict) and isinstance(now, dict):
            shown = _shown_spec if key == "space" else _shown
            of = name if key == "fit" else f"{name}'s"
            said.extend(
                f"{of} `{part}` is {shown(before.get(part))} in the study, "
                f"{shown(now.get(part))} in this call"
                for part in [*now, *(part for part in before if part not in now)]
                if before.get(part) != now.get(part)
            )
        else:
            said.append(
                f"{name} is {_shown(before, True)} in the study, {_shown(now, True)} in this call"
            )
    return said


def _shown(value: Any, quoted: bool = False) -> str:
    """A request's value as a message shows it: "not given" for none, a string as it is
    (gpu_fit()'s arguments come deparsed by R) or ``quoted``, a long one cut short."""
    if value is None:
        return "not given"
    text = value if isinstance(value, str) and not quoted else json.dumps(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 3] + "..."


def _shown_spec(spec: Any) -> str:
    """A searched value's spec as the R call that makes it: search_int(4, 32)."""
    if not isinstance(spec, dict):
        return "not searched" if spec is None else _shown(spec)
    log = ", log = TRUE" if spec.get("log") and spec.get("type") != "choice" else ""
    if spec.get("type") == "choice":
        return f"search_choice({', '.join(json.dumps(c) for c in spec.get('choices', []))})"
    return f"search_{spec.get('type')}({spec.get('lower')}, {spec.get('upper')}{log})"


def spec_line(spec: dict[str, Any]) -> str:
    """print() of a search_int(), search_float() or search_choice() value: what it draws, in
    words ("a whole number from 16 to 256 (log scale)", "one of "adam", 3"), numbers as R's
    ``format()`` writes them."""
    if spec["type"] == "choice":
        shown = (f'"{v}"' if isinstance(v, str) else r_number(v) for v in spec["choices"])
        return f"one of {', '.join(shown)}"
    kind = "a whole number" if spec["type"] == "int" else "a number"
    log = " (log scale)" if spec["log"] is True else ""
    return f"{kind} from {r_number(spec['lower'])} to {r_number(spec['upper'])}{log}"
