"""Writes, by feature: studies (design and assignment), coding (an annotator's codings),
review (reconcile → discussion → adjudication), pilot (open coding), published (the study's own
records). Views, API, Celery tasks and management commands all call these."""
