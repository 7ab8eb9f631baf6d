"""Pure statistics on plain data (no ORM): agreement, the study's result tables, balanced
assignment, chart geometry. Definitions in docs/agreement.md."""
