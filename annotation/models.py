"""Studies, assignments and labels arrive with the annotation issue (#3)."""
