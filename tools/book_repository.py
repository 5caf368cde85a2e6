"""Sphinx extension of the book: ``{{ repository }}`` names the repository from ``_config.yml``.

The repository's address is set once, as Jupyter Book's ``repository: url:`` in ``_config.yml``
(which also drives the theme's repository button). Jupyter Book passes it to the theme as
``html_theme_options["repository_url"]``; this extension reads it from there when Sphinx's
configuration is ready and defines the MyST substitution ``repository`` (MyST renders a
substitution's value as Markdown):

- with a URL: a link, ``[the hacn-book repository](<url>)``;
- without one (the project has no public home yet): plain text saying so.

A page writes ``{{ repository }}`` wherever it sends the reader to the source, so no page holds the
address itself. Loaded by ``sphinx: local_extensions:`` in ``_config.yml``.
"""

from __future__ import annotations

from typing import Any

NO_URL_TEXT = "the hacn-book repository (not yet public)"


def repository_markdown(url: str | None) -> str:
    """The Markdown ``{{ repository }}`` stands for: a link to ``url``, or :data:`NO_URL_TEXT`."""
    url = (url or "").strip()
    if not url:
        return NO_URL_TEXT
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"repository.url in _config.yml must be an http(s) address or empty, got {url!r}")
    return f"[the hacn-book repository]({url})"


def _define_substitution(app: Any, config: Any) -> None:
    theme_options = getattr(config, "html_theme_options", None) or {}
    substitutions = dict(getattr(config, "myst_substitutions", None) or {})
    substitutions.setdefault("repository", repository_markdown(theme_options.get("repository_url")))
    config.myst_substitutions = substitutions


def setup(app: Any) -> dict[str, Any]:
    app.connect("config-inited", _define_substitution)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
