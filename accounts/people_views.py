"""The People page: admins add people and set their roles (accounts/services.py); everyone's own password."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.messages.views import SuccessMessageMixin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from .roles import ALL_ROLES, is_admin
from .services import PeopleError, person_create, person_set_roles

User = get_user_model()


def _admin(request: HttpRequest) -> None:
    if not is_admin(request.user):
        raise PermissionDenied("Only admins manage people and their roles.")


def _page(request: HttpRequest, *, error: PeopleError | None = None, form=None, status: int = 200) -> HttpResponse:
    people = User.objects.filter(is_active=True).prefetch_related("groups").order_by("username")
    rows = [(person, {g.name for g in person.groups.all()}) for person in people]
    context = {
        "rows": rows,
        "roles": ALL_ROLES,
        "error": error,
        "form": {"username": "", "email": "", "roles": [], **(form or {})},
    }
    return render(request, "accounts/people.html", context, status=status)


@require_GET
def people(request: HttpRequest) -> HttpResponse:
    _admin(request)
    return _page(request)


@require_POST
def people_add(request: HttpRequest) -> HttpResponse:
    """Add a person; refused input comes back on the page with its field named (422), the password never echoed."""
    _admin(request)
    form = {
        "username": request.POST.get("username", "")[:200],
        "email": request.POST.get("email", "")[:254],
        "roles": request.POST.getlist("roles"),
    }
    try:
        person = person_create(**form, password=request.POST.get("password", ""), actor=request.user)
    except PeopleError as exc:
        return _page(request, error=exc, form=form, status=422)
    messages.success(request, f"{person.get_username()} can log in now.")
    return redirect("people")


@require_POST
def people_roles(request: HttpRequest) -> HttpResponse:
    _admin(request)
    raw = request.POST.get("person", "")
    if not (raw.isascii() and raw.isdigit()):
        return _page(request, error=PeopleError("person", f"not a person: {raw[:40]!r}"), status=422)
    person = get_object_or_404(User, pk=int(raw), is_active=True)
    try:
        roles = person_set_roles(person=person, roles=request.POST.getlist("roles"), actor=request.user)
    except PeopleError as exc:
        return _page(request, error=exc, status=422)
    messages.success(request, f"{person.get_username()}: {', '.join(roles) or 'no role'}.")
    return redirect("people")


class PasswordChange(SuccessMessageMixin, auth_views.PasswordChangeView):
    """Anyone changes their own password (Django's form and rules); back to their start page, told it worked."""

    template_name = "accounts/password.html"
    success_url = "/"
    success_message = "Your password is changed."
