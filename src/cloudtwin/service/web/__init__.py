"""The web pages: rendered on the server from templates, plots drawn by the bundled plotly.js."""

from cloudtwin.service.web.pages import mount_web

__all__ = ["mount_web"]
