"""Codebooks arrive with the taxonomy issue (#3)."""
