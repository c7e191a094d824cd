"""The live page of ``serve --ui``: one read-only page, its assets and its event stream.

Kept apart from the exporter (``commands/serve_http.py`` routes here) and from the HTML report
(``report/``): the page only reuses the report's vendored chart library.
"""
