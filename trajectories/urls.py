from __future__ import annotations

app_name = "trajectories"
urlpatterns: list = []
