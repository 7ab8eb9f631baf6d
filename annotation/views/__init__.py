"""HTML pages and htmx fragments, by feature: coding, review, dashboard, pilot."""
