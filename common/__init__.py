"""What every app shares and none owns: keyset paging of the long lists (`keyset`), the API's strict page
numbers (`pagination`), the API's JSON parser (`parsers`), what typed text may hold (`text`), CSV cells a
spreadsheet would run as formulas (`spreadsheet`), the request type of the views (`htmx`) and the 400 page for a
malformed query parameter (`responses`).

Below every other app: it imports none of them (tests/test_layers.py holds every app to the picture)."""
