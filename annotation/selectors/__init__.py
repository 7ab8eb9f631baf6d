"""Reads for views, API, exports and commands, by feature: queue (an annotator's work), review
(discussions and adjudication), dashboard (a study's progress and results), exports, pilot."""
