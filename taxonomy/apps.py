from __future__ import annotations

from django.apps import AppConfig


class TaxonomyConfig(AppConfig):
    name = "taxonomy"
    verbose_name = "Taxonomy (codebooks)"
