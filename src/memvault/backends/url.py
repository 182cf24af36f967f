"""Store URLs as backends read them: one parser for the options a URL's query carries
(typed, checked, refused with one message everywhere), and passwords kept out of
every message.

The facade's registry (:mod:`memvault.urls`) picks the backend from the URL's scheme;
the backend reads the rest with :func:`read_options`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from memvault.errors import ConfigurationError

# user:password@ right after a "//". The password runs to the last "@" before the next
# "/": an unencoded "#", "?" or "@" in it still ends up hidden. If no "@" comes before
# the next "/", an unencoded "/" may be in the password: unless what follows the ":" is
# a port (digits, then the path, query or end: "host:5432/db?user=me@corp"), it runs to
# the next "@". Matched by hand: urlsplit finds no password when the scheme is not a
# valid one ("://u:pw@h", "bäd://u:pw@h") and raises on a bad host ("[bad"), yet such
# strings end up in errors.
_USERINFO = re.compile(
    r"^(?P<head>.*?//[^/?#:@]*):(?:[^/]*@|(?![0-9]*(?:[/?#]|$))[^@]*@)", re.DOTALL
)
# A password given as a query parameter (libpq's ?password=, sslpassword=, ...), up to
# the next "&" ("#" included: unencoded, it may be part of the password).
_QUERY_PASSWORD = re.compile(r"(?P<name>[?&][^=&]*password=)[^&]*", re.IGNORECASE)


def redact(url: str) -> str:
    """The URL with any password replaced by ``***`` (for errors, logs and repr): the
    one in ``user:password@`` and any query parameter whose name ends in
    ``password``."""
    url = _USERINFO.sub(r"\g<head>:***@", url, count=1)
    return _QUERY_PASSWORD.sub(r"\g<name>***", url)


def _quoted(text: str, url: str) -> str:
    """``text`` of ``url``'s query, decoded and quoted for an error; unless the
    redacted URL hides it: then it is a password's tail (an unencoded "?" in the
    password started the "query"), named but never shown."""
    if text not in redact(url):
        return "the text after a '?' in the password (percent-encode it)"
    return repr(unquote_plus(text))


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def boolean(text: str) -> bool:
    """A query value read as a bool: true/1/yes or false/0/no, in any case."""
    try:
        return _BOOLEANS[text.lower()]
    except KeyError:
        raise ValueError(f"not a boolean: {text!r}") from None


Parse = Callable[[str], Any]
"""Turns an option's text in a URL query into its value; raises ValueError on bad text."""

KEYWORD_ONLY: Parse | None = None
"""The parser of an option a URL cannot set (a keyword argument only)."""


class _Any:
    def __contains__(self, name: object) -> bool:
        return True


EVERY_PARAMETER: Container[str] = _Any()
"""``passed_on`` for a driver that takes any other query parameter (libpq)."""


@dataclass(frozen=True)
class BackendOptions:
    """A backend's options, read from its URL's query and the keyword arguments.

    Attributes:
        from_url: the backend's options the query set, converted to their types.
        keywords: the options given as keyword arguments.
        passed_on: the query's other parameters, as written (``name=value``), for
            the driver.
    """

    from_url: dict[str, Any]
    keywords: dict[str, Any]
    passed_on: list[str]

    @property
    def merged(self) -> dict[str, Any]:
        """The options to use: the query's, then the keywords (keywords win)."""
        return {**self.from_url, **self.keywords}


def unsupported(
    url: str, name: str, backend: str, options: Mapping[str, Any], passed_on: Container[str] = ()
) -> ConfigurationError:
    """The one refusal of an option a backend does not take, keyword or URL parameter."""
    takes = f"takes {', '.join(sorted(options))}" if options else "takes no option"
    if isinstance(passed_on, (set, frozenset)) and passed_on:
        takes += f" (its driver takes the URL parameters {', '.join(sorted(passed_on))})"
    return ConfigurationError(f"{redact(url)}: unsupported option {name!r}; {backend} {takes}")


def read_options(
    url: str,
    query: str,
    options: Mapping[str, Parse | None],
    keywords: Mapping[str, Any],
    *,
    backend: str,
    passed_on: Container[str] = (),
) -> BackendOptions:
    """Read a backend's options from its URL's ``query`` and the ``keywords``.

    Args:
        url: the store URL (shown redacted in errors).
        query: the URL's query, without the ``?``.
        options: the backend's option names, each with the parser of its query text
            (:data:`KEYWORD_ONLY`: the URL cannot set it).
        keywords: the options the caller gave as keyword arguments.
        backend: the backend's name, for messages ("SQLite").
        passed_on: query parameter names handed to the driver as they are.

    Raises:
        ConfigurationError: an unknown keyword or parameter (:func:`unsupported`), a
            query that is not ``name=value&...``, or a value its parser refuses.
            Checking a converted value's range is the backend's job.
    """
    for name in keywords:
        if name not in options:
            raise unsupported(url, name, backend, options)
    from_url: dict[str, Any] = {}
    passed: list[str] = []
    for part in query.split("&") if query else []:
        if not part:
            continue
        key, equals, text = part.partition("=")
        name = unquote_plus(key)
        if not equals:
            raise ConfigurationError(
                f"cannot parse the query of {redact(url)!r}: {_quoted(part, url)} is not name=value"
            )
        parse = options.get(name)
        if parse is not None:
            try:
                from_url[name] = parse(unquote_plus(text))
            except ValueError:
                raise ConfigurationError(
                    f"{redact(url)}: bad value {_quoted(text, url)} for {name}"
                ) from None
        elif name in passed_on and name not in options:
            passed.append(part)
        else:
            raise unsupported(
                url, name, backend, {n: p for n, p in options.items() if p is not None}, passed_on
            )
    return BackendOptions(from_url, dict(keywords), passed)
