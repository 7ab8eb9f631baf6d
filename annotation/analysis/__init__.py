"""A study's statistics: its inputs (one read of the study), one pure `compute` returning a typed,
versioned document, and its store. The pure statistics live here too (agreement, reports, signatures)."""
