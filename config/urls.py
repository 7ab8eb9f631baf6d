from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.utils.csp import CSP
from django.views.decorators.csp import csp_override
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounts import people_views
from accounts.views import LoginView
from config import views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", people_views.PasswordChange.as_view(), name="password_change"),
    path("accounts/people/", people_views.people, name="people"),
    path("accounts/people/add/", people_views.people_add, name="people_add"),
    path("accounts/people/roles/", people_views.people_roles, name="people_roles"),
    # One login page (with its throttle) for the app and the admin.
    path(
        "admin/login/",
        login_not_required(RedirectView.as_view(pattern_name="login", query_string=True)),
        name="admin-login",
    ),
    path("admin/", admin.site.urls),
    path("trajectories/", include("trajectories.urls")),
    path("annotate/", include("annotation.urls")),
    path("codebooks/", include("taxonomy.urls")),
    path("api/", include("config.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI (third-party) sets inline styles; only this page may.
    path(
        "api/docs/",
        csp_override({**settings.SECURE_CSP, "style-src": [CSP.SELF, CSP.UNSAFE_INLINE]})(
            SpectacularSwaggerSplitView.as_view(url_name="api-schema")
        ),
        name="api-docs",
    ),
    path("healthz", views.healthz, name="healthz"),
]

handler400 = "config.views.bad_request_page"
handler403 = "config.views.forbidden"
handler404 = "config.views.not_found"
handler500 = "config.views.crashed"
